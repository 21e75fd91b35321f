"""What a model must return for each extraction call (spec/context.md §5.4), one pydantic model per
call kind. A reply that does not validate is sent back once with the errors (client.py)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

#: Longest verbatim quote accepted (§5.4: ≤ 300 characters).
MAX_QUOTE_CHARS = 300

Quote = Annotated[str, Field(min_length=1, max_length=MAX_QUOTE_CHARS)]
Quotes = Annotated[list[Quote], Field(max_length=12)]
Name = Annotated[str, Field(max_length=200)]


class _Reply(BaseModel):
    """Unknown keys are ignored (models add commentary fields); the ones we read are checked."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class DocumentReply(_Reply):
    """Document scope: one artifact for one source (or one window of it)."""

    name: Name
    body: str
    fields: dict[str, Any] = Field(default_factory=dict)
    quotes: Quotes = Field(default_factory=list)


class Mention(_Reply):
    """What one source says about one subject of a corpus type."""

    subject: Name
    aliases: Annotated[list[Name], Field(max_length=12)] = Field(default_factory=list)
    text: str = ""
    quotes: Quotes = Field(default_factory=list)
    fields: dict[str, Any] = Field(default_factory=dict)


class EdgeClaim(_Reply):
    """A typed edge stated in a source: `from` and `to` name subjects (or "this document")."""

    type: Name
    from_: Name = Field(alias="from")
    to: Name
    attributes: dict[str, Any] = Field(default_factory=dict)
    quote: Quote


class MapReply(_Reply):
    """Corpus scope, map: the subjects of one type a source mentions, and the edges it states."""

    mentions: Annotated[list[Mention], Field(max_length=200)] = Field(default_factory=list)
    edges: Annotated[list[EdgeClaim], Field(max_length=200)] = Field(default_factory=list)


class ReduceReply(_Reply):
    """Corpus scope, reduce: one artifact from the mentions of one subject."""

    name: Name
    body: str
    fields: dict[str, Any] = Field(default_factory=dict)


class RowClaim(_Reply):
    """One row of a `format: sqlite` type found in prose, with the quote that states it."""

    values: dict[str, Any]
    quote: Quote


class RowsReply(_Reply):
    rows: Annotated[list[RowClaim], Field(max_length=500)] = Field(default_factory=list)


class QueriesReply(_Reply):
    """Sample queries a user could ask of the context (spec/context.md §5.5)."""

    queries: Annotated[list[Annotated[str, Field(min_length=3, max_length=300)]], Field(max_length=20)]
