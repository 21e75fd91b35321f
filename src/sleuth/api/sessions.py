"""Routes: sessions (api.md). Filled in by its owner module."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
