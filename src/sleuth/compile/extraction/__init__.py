"""Curation with a model (spec/context.md §5.4): the kinds `summary`, `topic`, `entity` and `event`,
rows found in prose and typed edges, each claim backed by a verbatim quote located in the page text.

`ModelExtractor` (extractor.py) is the `compile.extract.Extractor` the compiler calls when a model is
configured. It asks for JSON per kind (schemas.py, prompts.py) through `ExtractionClient` (client.py:
validation, one repair round, retries, usage and the token budget), caches every validated reply by
content (cache.py), turns quotes into provenance (quotes.py) and groups corpus mentions (grouping.py).
`profile.py` estimates what a curate will cost before anything is spent.
"""
