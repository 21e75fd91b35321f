"""The YAML front matter of an artifact or roster file (`knowledge/artifacts/…/*.md`)."""

from __future__ import annotations

from typing import Any

import yaml


def read_front_matter(text: str) -> dict[str, Any]:
    """The YAML block of an artifact or roster file."""
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---\n", 4)
    data = yaml.safe_load(text[4:end]) if end != -1 else None
    return data if isinstance(data, dict) else {}
