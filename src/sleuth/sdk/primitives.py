"""The SDK's primitives, declared once (spec/runtime.md §5.2).

Each method of `Knowledge` that model-written code may call is marked `@primitive("read")` or
`@primitive("search")`. Its signature, with the bounds of its arguments written as the `Annotated`
types below, and its docstring are the only statement of it:
- the REPL binds every primitive, awaiting the searches (`sandbox/repl.py`);
- the prompt's SDK reference prints `signature_text` and the docstring (`agent/orientation.py`);
- `tools=` is checked against the names (`agent/turn.py`);
- MCP serves each one as a tool whose JSON Schema comes from the same annotations (`api/mcp.py`);
- the bounds are checked when the primitive is called (`LimitError`, worded for the model).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field

from sleuth.format.identity import DOC_TYPE_NAMES
from sleuth.sdk.errors import LimitError
from sleuth.sdk.notices import notice
from sleuth.sdk.types import Hit, Span
from sleuth.settings import declared_limits

__all__ = [
    "CLAMPED",
    "Around",
    "ArtifactName",
    "Clamped",
    "DocType",
    "Documents",
    "FactKey",
    "Issuer",
    "Latest",
    "Locator",
    "MaxChars",
    "MaxHops",
    "MaxSentences",
    "MaxTotal",
    "MustContain",
    "PageNumber",
    "PageRanges",
    "PerQuery",
    "PerSource",
    "Phrase",
    "Primitive",
    "Queries",
    "Query",
    "RankBy",
    "Section",
    "SourcePaths",
    "Sql",
    "TopK",
    "TypeName",
    "Year",
    "check",
    "primitive",
    "primitives",
    "shown",
    "signature_text",
]


class Clamped:
    """`Annotated` metadata of a count: above its `le` it is lowered to it, with a notice in the
    step's output, instead of failing the step (asking for 500 hits is not worth a step)."""


CLAMPED = Clamped()

Query = Annotated[str, Field(min_length=1, max_length=2000, description="What to look for.")]
TopK = Annotated[int, Field(ge=1, le=100, description="How many hits to return (1-100)."), CLAMPED]
MaxTotal = Annotated[int, Field(ge=1, le=100, description="At most this many hits (1-100)."), CLAMPED]
PerSource = Annotated[
    int | None,
    Field(ge=1, le=100, description="At most this many hits from each source; each is searched on its own."),
    CLAMPED,
]
PerQuery = Annotated[
    int | None, Field(ge=1, le=100, description="At most this many hits from each query's list."), CLAMPED
]
MaxHops = Annotated[int, Field(ge=1, le=4, description="Hops to follow (1-4).")]
ArtifactName = Annotated[
    str, Field(min_length=1, description="An artifact's name (exact, any case, or slug).")
]
Issuer = Annotated[
    str | None, Field(max_length=200, description="Only documents whose issuer contains this (see _sources).")
]
DocType = Annotated[
    str | None,
    Field(max_length=100, description="Only documents of this type, one of: " + ", ".join(DOC_TYPE_NAMES)),
]
Year = Annotated[int | None, Field(description="Only documents covering this year, e.g. 2023.")]
Latest = Annotated[bool, Field(description="Only the newest document of each issuer and type (period end).")]
TypeName = Annotated[str, Field(min_length=1, description="An artifact type's name (outline_knowledge).")]
FactKey = Annotated[str, Field(min_length=1, description="A fact's key: artifact_count, page_count, ...")]
Sql = Annotated[str, Field(min_length=1, description="One read-only statement (SQLite dialect).")]
SourcePaths = Annotated[str | Sequence[str], Field(description="Source paths, e.g. an artifact's `sources`.")]
Queries = Annotated[
    str | Sequence[str], Field(description="One query, or several searched separately and fused.")
]
RankBy = Annotated[
    str | Sequence[str] | None, Field(description="Queries that rank the artifact's quotes (optional).")
]
MustContain = Annotated[
    str | Sequence[str] | None,
    Field(description="Only chunks that hold this text (or each of these) word for word, in any case."),
]
Phrase = Annotated[str, Field(min_length=1, max_length=500, description="Text a chunk must hold.")]
Locator = Annotated[
    Hit | Span | str,
    Field(description="A hit, a span, an evidence label ('E7') or a chunk id ('chk_…'); or a source path."),
]
Around = Annotated[int, Field(ge=0, le=10, description="Chunks to read on that side (0-10).")]
PageNumber = Annotated[int | None, Field(ge=1, le=100_000, description="A 1-based page number.")]
MaxChars = Annotated[int, Field(ge=200, le=20_000, description="At most this many characters (200-20,000).")]
Section = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=200,
        description="Words of a heading, e.g. 'Liquidity', or of a heading path: 'Item 7 > Liquidity'.",
    ),
]
Documents = Annotated[
    Sequence[str], Field(description="2-10 source paths; the first is the base the others are compared with.")
]
PageRanges = Annotated[
    tuple[int, int] | Mapping[str, tuple[int, int]] | None,
    Field(description="Pages (first, last), 1-based, for every document, or {source path: (first, last)}."),
]
MaxSentences = Annotated[
    int,
    Field(ge=10, le=2000, description="At most this many sentences of each document (10-2,000)."),
    CLAMPED,
]

Kind = Literal["read", "search"]
#: What a call is in a turn's trace (spec/runtime.md §7): the step's category is its calls'.
Category = Literal["read", "search", "structured", "graph", "facts"]
#: The space a primitive's scores live in, where it returns scored hits.
ScoreSpace = Literal["hybrid_rrf", "bm25"]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Primitive:
    """One primitive: its name, whether it is awaited, and the `Knowledge` method that is it."""

    name: str
    kind: Kind
    method: Callable[..., Any]
    category: Category = "read"
    score_space: ScoreSpace | None = None

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.method) or ""

    def parameters(self) -> list[inspect.Parameter]:
        """The parameters after `self`, each annotated with its resolved type (bounds included)."""
        return _parameters(self.method)


_REGISTRY: dict[str, Primitive] = {}


#: The modules that declare primitives, in the order of spec/runtime.md §5.2 (the reads of
#: artifacts, the searches, the reads around evidence, the comparison of a section across
#: documents, the database, the orientation); each module's own in the order it declares them.
MODULES = (
    "sleuth.sdk.reads",
    "sleuth.sdk.searches",
    "sleuth.sdk.passages",
    "sleuth.sdk.comparisons",
    "sleuth.sdk.tables",
    "sleuth.sdk.orientation",
)


def primitives() -> list[Primitive]:
    """Every primitive, in the order of spec/runtime.md §5.2 (`MODULES`). Declaring `Knowledge`
    registers them: its module must have been imported."""
    if not _REGISTRY:
        raise RuntimeError("no primitives: import sleuth.sdk.knowledge first")

    def rank(item: Primitive) -> int:
        module = item.method.__module__
        return MODULES.index(module) if module in MODULES else len(MODULES)

    return sorted(_REGISTRY.values(), key=rank)


def primitive(
    kind: Kind, category: Category | None = None, score_space: ScoreSpace | None = None
) -> Callable[[F], F]:
    """Mark a `Knowledge` method as a primitive, and check its declared bounds on every call.
    `category` is what its calls are in a trace (default: its kind); `score_space` where its hits'
    scores come from, for a primitive that ranks."""

    def mark(method: F) -> F:
        if inspect.iscoroutinefunction(method):

            @functools.wraps(method)
            async def checked_search(*args: Any, **kwargs: Any) -> Any:
                args, kwargs = _check(method, args, kwargs)
                async with args[0].evidence.issued():  # labels in issue order (Evidence.in_turn)
                    return await method(*args, **kwargs)

            wrapper: Callable[..., Any] = checked_search
        else:

            @functools.wraps(method)
            def checked_read(*args: Any, **kwargs: Any) -> Any:
                args, kwargs = _check(method, args, kwargs)
                return method(*args, **kwargs)

            wrapper = checked_read
        _REGISTRY[method.__name__] = Primitive(method.__name__, kind, wrapper, category or kind, score_space)
        return typing.cast(F, wrapper)

    return mark


def signature_text(method: Callable[..., Any]) -> str:
    """`(query: str, top_k: int = 10, ...)`: a `Knowledge` method's signature (a primitive's, or
    `final`'s) as the model reads it, bounds left to the docstring and the error messages."""
    plain = [p.replace(annotation=_bare(p.annotation)) for p in _parameters(method)]
    returns = typing.get_type_hints(method).get("return", inspect.Signature.empty)
    shown = str(inspect.Signature(plain, return_annotation=returns))
    for qualified in ("collections.abc.", "typing.", "sleuth.sdk.types.", "sleuth.sdk.knowledge."):
        shown = shown.replace(qualified, "")
    return shown


def _parameters(method: Callable[..., Any]) -> list[inspect.Parameter]:
    hints = typing.get_type_hints(method, include_extras=True)
    after_self = list(inspect.signature(method).parameters.values())[1:]
    return [p.replace(annotation=hints.get(p.name, p.annotation)) for p in after_self]


def _bare(annotation: Any) -> Any:
    return typing.get_args(annotation)[0] if typing.get_origin(annotation) is Annotated else annotation


@functools.cache
def _bounds(
    method: Callable[..., Any],
) -> tuple[inspect.Signature, dict[str, dict[str, Any]], frozenset[str]]:
    """The method's signature, the bounds (ge/le, min_length/max_length) each parameter declares,
    and the parameters whose upper bound is `CLAMPED`."""
    hints = typing.get_type_hints(method, include_extras=True)
    bounds: dict[str, dict[str, Any]] = {}
    clamped: set[str] = set()
    for name, hint in hints.items():
        if typing.get_origin(hint) is not Annotated:
            continue
        found = declared_limits(typing.get_args(hint)[1:])
        if found:
            bounds[name] = found
        if any(isinstance(meta, Clamped) for meta in typing.get_args(hint)[1:]):
            clamped.add(name)
    return inspect.signature(method), bounds, frozenset(clamped)


def _check(
    method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments, checked against their bounds; a `CLAMPED` count above its bound is
    lowered to it, with a notice (`sdk.notices`: on stderr, the step's output, inside the REPL)."""
    signature, bounds, clamped = _bounds(method)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise LimitError(f"{method.__name__}(): {exc}") from None
    for name, limits in bounds.items():
        if name not in bound.arguments:
            continue  # its default, which is within bounds
        value = bound.arguments[name]
        if value is None and signature.parameters[name].default is None:
            continue
        high = limits.get("le")
        if name in clamped and _is_int(value) and high is not None and value > high:
            notice(f"[notice: {method.__name__}({name}={shown(value)}) is above {high}; using {high}]")
            bound.arguments[name] = high
            continue
        _within(name, value, limits)
    return bound.args, bound.kwargs


def shown(value: Any) -> str:
    """`value` as a message quotes it: a huge integer is not written out (Python refuses to turn one
    of over 4,300 digits into text), anything else is its repr cut to 80 characters."""
    if isinstance(value, int) and abs(value) >= 10**18:
        return "a huge integer"
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check(name: str, value: Any, declared: Any) -> None:
    """`value` within the bounds of the `Annotated` type `declared` (e.g. each of several queries)."""
    _within(name, value, declared_limits(typing.get_args(declared)[1:]))


def _within(name: str, value: Any, limits: dict[str, Any]) -> None:
    if "ge" in limits or "le" in limits:
        low, high = limits.get("ge"), limits.get("le")
        if (
            not isinstance(value, int)
            or isinstance(value, bool)
            or (low is not None and value < low)
            or (high is not None and value > high)
        ):
            raise LimitError(f"{name} must be an integer from {low} to {high}, got {shown(value)}")
        return
    low, high = limits.get("min_length", 0), limits.get("max_length")
    if not isinstance(value, str) or len(value) < low or (high is not None and len(value) > high):
        if high is None:
            raise LimitError(f"{name} must be a non-empty string" if low else f"{name} must be a string")
        size = f"{low}-{high:,}" if low else f"at most {high:,}"
        raise LimitError(f"{name} must be a string of {size} characters")
