"""Names as a version writes them into paths (artifact slugs, context slugs)."""

from __future__ import annotations

import re
import unicodedata


def slugify(name: str, limit: int = 80) -> str:
    """Lowercase ASCII, runs of other characters → `-`, at most `limit` characters (§7.3)."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")
    return slug[:limit].rstrip("-") or "item"
