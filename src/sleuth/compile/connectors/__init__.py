"""Connectors (issue 27): sources beyond uploads that stay in sync.

`base` says what a connector is; `folder`, `git`, `s3` and `web` are the kinds, which `kinds` builds
from their configuration; `addresses` guards where they may connect; `sync` brings a context's sources
to what a connector lists now (deletions included); `registry` keeps a context's connectors and what
their last sync did.
"""
