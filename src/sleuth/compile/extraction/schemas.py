"""What a model must return for each extraction call (spec/context.md §5.4), one pydantic model per
call kind. A reply that does not validate is sent back once with the errors (client.py)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

#: Longest verbatim quote used (§5.4: ≤ 300 characters): a longer one is cut to its first 300, which
#: is still a verbatim piece of the page when the whole was.
MAX_QUOTE_CHARS = 300


def _quote(value: Any) -> str:
    return str(value)[:MAX_QUOTE_CHARS] if value is not None else ""


def _quotes(value: Any) -> list[str]:
    """One quote or many; empty ones dropped, at most 12 kept."""
    items = value if isinstance(value, list) else [value]
    return [q for q in (_quote(v).strip() for v in items if v is not None) if q][:12]


def _names(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [str(v).strip()[:200] for v in items if v is not None and str(v).strip()][:12]


def _fields(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# Replies are read leniently where a small model's slip loses nothing (a string for a list, a long quote,
# `null` for `{}`), and strictly where it matters (names and bodies are strings, lists are lists).
Quote = Annotated[str, BeforeValidator(_quote), Field(min_length=1)]
Quotes = Annotated[list[str], BeforeValidator(_quotes)]
Name = Annotated[str, BeforeValidator(lambda v: "" if v is None else str(v)[:200])]
Names = Annotated[list[str], BeforeValidator(_names)]
Fields = Annotated[dict[str, Any], BeforeValidator(_fields)]


class _Reply(BaseModel):
    """Unknown keys are ignored (models add commentary fields); the ones we read are checked."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class DocumentReply(_Reply):
    """Document scope: one artifact for one source (or one window of it)."""

    name: Name
    body: str
    fields: Fields = Field(default_factory=dict)
    quotes: Quotes = Field(default_factory=list)


class Mention(_Reply):
    """What one source says about one subject of a corpus type."""

    subject: Name
    aliases: Names = Field(default_factory=list)
    text: Annotated[str, BeforeValidator(lambda v: "" if v is None else str(v))] = ""
    quotes: Quotes = Field(default_factory=list)
    fields: Fields = Field(default_factory=dict)


class EdgeClaim(_Reply):
    """A typed edge stated in a source: `from` and `to` name subjects (or "this document")."""

    type: Name
    from_: Name = Field(alias="from")
    to: Name
    attributes: Fields = Field(default_factory=dict)
    quote: Quote


class MapReply(_Reply):
    """Corpus scope, map: the subjects of one type a source mentions, and the edges it states."""

    mentions: Annotated[list[Mention], Field(max_length=500)] = Field(default_factory=list)
    edges: Annotated[list[EdgeClaim], Field(max_length=500)] = Field(default_factory=list)


class ReduceReply(_Reply):
    """Corpus scope, reduce: one artifact from the mentions of one subject."""

    name: Name
    body: str
    fields: Fields = Field(default_factory=dict)


class RowClaim(_Reply):
    """One row of a `format: sqlite` type found in prose, with the quote that states it."""

    values: dict[str, Any]
    quote: Quote


class RowsReply(_Reply):
    rows: Annotated[list[RowClaim], Field(max_length=500)] = Field(default_factory=list)


class QueriesReply(_Reply):
    """Sample queries a user could ask of the context (spec/context.md §5.5)."""

    queries: Annotated[list[Annotated[str, Field(min_length=3, max_length=300)]], Field(max_length=20)]
