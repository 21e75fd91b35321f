"""The YAML front matter of an artifact or roster file (`knowledge/artifacts/…/*.md`)."""

from __future__ import annotations

from typing import Any

import yaml


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The YAML block of an artifact or roster file, and the Markdown after it. A file without one, or
    whose block is not a YAML mapping, has no front matter: all of it is body."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 4)
    if end == -1:
        return {}, text
    try:
        data = yaml.safe_load(text[4:end])
    except yaml.YAMLError:
        return {}, text
    return (data, text[end + 5 :]) if isinstance(data, dict) else ({}, text)


def read_front_matter(text: str) -> dict[str, Any]:
    """The YAML block of an artifact or roster file."""
    return split_front_matter(text)[0]
