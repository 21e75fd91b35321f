"""One extraction call: ask for JSON, validate it against the kind's schema, repair once, account.

- **Structured output** (spec/context.md §5.4): the reply must validate against the call's schema;
  an invalid one is sent back once with the validation errors, then the item counts as errored.
- **Retries**: a timeout, 429 or 5xx is retried as `models.fallback` does (twice, honouring the
  provider's `Retry-After`); a call that still fails raises `ModelError`, which the extractor records
  for its source without failing the run.
- **Concurrency**: at most `SLEUTH_CURATE_CONCURRENCY` calls in flight per provider endpoint, in the
  whole process (two curates on one server share it).
- **Budget**: once the tokens spent reach the budget, no further call starts (`BudgetExhausted`);
  calls already in flight finish, so a run may end a little over it.
- **Screening** (issue 22): a reply over `MAX_REPLY_BYTES`, nested deeper than `MAX_REPLY_DEPTH` or
  holding text that is not valid Unicode (a lone surrogate) is refused before it is parsed, repaired
  with only its head echoed, or cached; it is sent back once like an invalid one, then the item counts
  as errored, with the reason, and the curate goes on.
- **Usage**: calls, tokens, repairs, errors and screened replies per artifact type, for the report,
  the version, the ledger and the task's stats.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.errors import Failed, Invalid
from sleuth.models.base import CompletionParams, Message, Model, ModelConfig
from sleuth.models.fallback import FallbackModel

R = TypeVar("R", bound=BaseModel)
#: The longest reply read, in UTF-8 bytes. A call's output cap is at most 8,192 + 512 tokens (the
#: manifest's `max_tokens` is capped at 8,192); even at 16 bytes a token that is under 140 KB, so no
#: honest reply comes near 512 KiB, and a longer one is refused before it is parsed, echoed or cached.
MAX_REPLY_BYTES = 512 * 1024
#: The deepest nesting of objects and arrays a reply may have (the schemas use four levels): `json`
#: recurses once per level, and a reply nested 200,000 deep would raise `RecursionError`.
MAX_REPLY_DEPTH = 64
#: Characters of a screened reply sent back with the repair prompt: enough to see what went wrong.
REFUSED_ECHO_CHARS = 2_000
_FENCE = re.compile(r"^\s*```(?:json)?\s*|\s*```\s*$")
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)  # a string (skipped) or a bracket
_SLOTS: dict[str, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


class BudgetExhausted(Failed):
    """The curate's token budget is spent: what was built so far is kept (never leaves the extractor)."""


class ReplyRefused(Invalid, ValueError):
    """A reply screened out whole (too long, too deep, not valid Unicode); the message is the reason,
    the same for every reply refused for it, so the report can count them."""


@dataclass
class TypeUsage:
    """What extraction cost for one artifact type (or `_sample_queries`)."""

    calls: int = 0  # model calls made (repairs included)
    cached: int = 0  # replies taken from the extraction cache
    input_tokens: int = 0
    output_tokens: int = 0
    repairs: int = 0
    errored: int = 0  # items whose reply never validated, or whose call failed
    seconds: float = 0.0
    replies_screened: int = 0  # replies refused whole before they were read (repairs included)
    reply_reasons: dict[str, int] = field(default_factory=dict)  # why, reply by reply

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


def screen_reply(text: str) -> None:
    """`ReplyRefused` for a reply that must not be parsed: over `MAX_REPLY_BYTES`, nested deeper than
    `MAX_REPLY_DEPTH` (a scan of brackets outside strings, before `json` recurses), or not encodable
    as UTF-8 (a lone surrogate the provider's decoder let through)."""
    if len(text) > MAX_REPLY_BYTES:  # a character is at least a byte: no need to encode it
        raise ReplyRefused(f"over {MAX_REPLY_BYTES} bytes")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ReplyRefused("not valid Unicode (a lone surrogate)") from None
    if size > MAX_REPLY_BYTES:
        raise ReplyRefused(f"over {MAX_REPLY_BYTES} bytes")
    depth = 0
    for token in _TOKENS.finditer(text):
        ch = token.group()
        if ch in "[{":
            depth += 1
            if depth > MAX_REPLY_DEPTH:
                raise ReplyRefused(f"nested over {MAX_REPLY_DEPTH} deep")
        elif ch in "]}":
            depth = max(0, depth - 1)


def stored_form(reply: BaseModel) -> dict[str, Any]:
    """The reply as the cache and the version keep it; `ReplyRefused` when a value is not valid
    Unicode (a `\\ud800` escape decodes to a lone surrogate, which no UTF-8 file can hold)."""
    data: dict[str, Any] = reply.model_dump(mode="json", by_alias=True)
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ReplyRefused("not valid Unicode (a lone surrogate)") from None
    return data


def parse_json(text: str) -> Any:
    """The JSON object in a reply: fences stripped, else the outermost `{...}`, else (a reply cut off
    by its token limit) the longest prefix that ends after a complete list item, closed."""
    stripped = _FENCE.sub("", text.strip())
    try:
        return json.loads(stripped)
    except ValueError:
        start, end = stripped.find("{"), stripped.rfind("}")
        if 0 <= start < end:
            try:
                return json.loads(stripped[start : end + 1])
            except ValueError:
                pass
        salvaged = salvage_json(stripped[start:] if start >= 0 else stripped)
        if salvaged is None:
            raise
        return salvaged


def salvage_json(text: str) -> Any:
    """A JSON object cut off mid-way, closed after its last complete element of a list, or None.

    Small models run out of output tokens in the middle of a long list of mentions or rows: every item
    before the cut is still good, and the quality screen checks each of them anyway."""
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []  # (position after a complete list element, closers then)
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
            if stack and stack[-1] == "]":
                cuts.append((i + 1, "".join(reversed(stack))))
    for position, closers in reversed(cuts):
        try:
            value = json.loads(text[:position] + closers)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _problems(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        lines = []
        for err in exc.errors()[:12]:
            where = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
            lines.append(f"- {where}: {err.get('msg', '')}")
        return "\n".join(lines)
    return f"- not a JSON object: {str(exc)[:200]}"


def _head(text: str) -> str:
    """The start of a screened reply, valid UTF-8, for the repair prompt."""
    head = text[:REFUSED_ECHO_CHARS].encode("utf-8", "replace").decode("utf-8")
    return head + ("…" if len(text) > REFUSED_ECHO_CHARS else "")


def _slot(config: ModelConfig, concurrency: int) -> threading.BoundedSemaphore:
    """The endpoint's calls in flight, `concurrency` at most (the process's `curate_concurrency`)."""
    endpoint = f"{config.provider}|{config.base_url or ''}"
    with _SLOTS_LOCK:
        if endpoint not in _SLOTS:
            _SLOTS[endpoint] = threading.BoundedSemaphore(concurrency)
        return _SLOTS[endpoint]


class ExtractionClient:
    """Calls of one run: `concurrency` in flight per endpoint and `timeout_s` each (the settings
    `curate_concurrency` and `curate_timeout_s`)."""

    def __init__(
        self,
        model: Model,
        cache: ExtractionCache | None,
        *,
        concurrency: int,
        timeout_s: float,
        token_budget: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model if isinstance(model, FallbackModel) else FallbackModel([model])
        self.model_id = model.config.id  # recorded with each cached reply
        self.cache = cache
        self.token_budget = token_budget
        self.usage: dict[str, TypeUsage] = {}
        self.budget_exhausted = False
        self._lock = threading.Lock()
        self._clock = clock
        self._slot = _slot(model.config, concurrency)
        self._timeout = timeout_s

    def spent(self) -> int:
        return sum(self.totals())

    def totals(self) -> tuple[int, int]:
        """(input, output) tokens spent so far, over every type."""
        with self._lock:
            usage = list(self.usage.values())
            return sum(u.input_tokens for u in usage), sum(u.output_tokens for u in usage)

    def count_error(self, type_name: str) -> None:
        usage = self.usage_of(type_name)
        with self._lock:
            usage.errored += 1

    def count_screened(self, type_name: str, reason: str) -> None:
        usage = self.usage_of(type_name)
        with self._lock:
            usage.replies_screened += 1
            usage.reply_reasons[reason] = usage.reply_reasons.get(reason, 0) + 1

    def usage_of(self, type_name: str) -> TypeUsage:
        with self._lock:
            return self.usage.setdefault(type_name, TypeUsage())

    def ask(
        self,
        reply_type: type[R],
        system: str,
        user: str,
        *,
        type_name: str,
        key: str,
        max_tokens: int,
    ) -> R | None:
        """The validated reply (from the cache when it holds one), or None when it never validated."""
        usage = self.usage_of(type_name)
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                try:
                    reply = reply_type.model_validate(cached)
                except ValidationError:
                    pass
                else:
                    with self._lock:
                        usage.cached += 1
                    return reply
        messages = [Message("system", system), Message("user", user)]
        params = CompletionParams(
            max_tokens=max_tokens, temperature=0.0, json_mode=True, timeout_s=self._timeout
        )
        for attempt in range(2):
            self._check_budget()
            with self._slot:
                self._check_budget()  # again: the slot may have been waited for while others spent
                began = self._clock()
                answer = self.model.complete(messages, [], params)
                elapsed = self._clock() - began
            spent_in, spent_out = answer.usage.input_tokens, answer.usage.output_tokens
            if not spent_in and not spent_out:  # a provider that reports no usage: ⌈characters / 4⌉
                spent_in = -(-sum(len(m.content) for m in messages) // 4)
                spent_out = -(-len(answer.text) // 4)
            with self._lock:
                usage.calls += 1
                usage.input_tokens += spent_in
                usage.output_tokens += spent_out
                usage.seconds += elapsed
            echo = answer.text
            try:
                screen_reply(answer.text)
                parsed = reply_type.model_validate(parse_json(answer.text))
                stored = stored_form(parsed)
            except ReplyRefused as exc:
                self.count_screened(type_name, str(exc))
                problems = f"- the reply was refused: {exc}"
                echo = _head(answer.text)
            except (ValueError, ValidationError) as exc:
                problems = _problems(exc)
            else:
                if self.cache is not None:
                    self.cache.put(key, stored, type=type_name, model=self.model_id)
                return parsed
            if attempt == 0:
                with self._lock:
                    usage.repairs += 1
                messages += [Message("assistant", echo), Message("user", repair_prompt(problems))]
        with self._lock:
            usage.errored += 1
        return None

    def _check_budget(self) -> None:
        if self.token_budget is not None and self.spent() >= self.token_budget:
            self.budget_exhausted = True
            raise BudgetExhausted(f"the token budget of {self.token_budget} is spent")


def repair_prompt(problems: str) -> str:
    return (
        "Your reply did not match the required JSON schema:\n"
        f"{problems}\n"
        "Reply again with only the corrected JSON object, nothing else."
    )
