"""The synthesis call (spec/runtime.md §8.2, §8.5): a separate model call that sees only the evidence the
loop surfaced, the computed results and the conversation, and writes the answer with `[n]` markers
(or, with a `shape`, one JSON object whose `data` is validated against it).

Markers here are positions in the evidence list; citations.py turns them into verified citations.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sleuth.agent.claims import stating
from sleuth.agent.evidence import format_evidence
from sleuth.agent.loop import ModelCallRecord
from sleuth.agent.orientation import prompt_text
from sleuth.agent.shape import extract_json_object, validate
from sleuth.agent.spans import EvidenceSpan
from sleuth.errors import Failed
from sleuth.models.base import CompletionParams, Message, Model, ModelError, TokenUsage
from sleuth.store.records.rows import QueryDocument


class ShapeInvalid(Failed):
    """The synthesis document stayed invalid after one repair (`output did not match shape: …`)."""

    def __init__(self, errors: list[str], text: str) -> None:
        super().__init__("output did not match shape: " + "; ".join(errors[:5]))
        self.errors = errors
        self.text = text


@dataclass
class SynthesisInput:
    ask: str
    instructions: str
    history: list[Message]
    draft: str | None
    computed: str
    evidence: list[EvidenceSpan]
    shape: dict[str, Any] | None = None


@dataclass
class SynthesisOutput:
    text: str
    data: dict[str, Any] | None = None
    grounding: dict[str, list[int]] | None = None  # JSON pointer → evidence positions (1-based)
    usage: TokenUsage = field(default_factory=TokenUsage)
    ms: float = 0.0
    calls: list[ModelCallRecord] = field(default_factory=list)
    model: str | None = None


def synthesis_messages(inp: SynthesisInput) -> list[Message]:
    system = prompt_text("synthesis.md").strip()
    if inp.instructions:
        system += "\n\n## Instructions\n" + inp.instructions
    if inp.shape is not None:
        system += "\n\n## Output format\n" + prompt_text("synthesis_shape.md").strip()
        system += "\n\nJSON Schema of `data`:\n" + json.dumps(inp.shape, ensure_ascii=False)
    parts = [f"Question: {inp.ask}"]
    if inp.draft:
        parts.append(f"Draft answer from the research loop (check it against the evidence):\n{inp.draft}")
    if inp.computed:
        parts.append(f"Computed results:\n{inp.computed}")
    parts.append("Evidence:\n" + (format_evidence(inp.evidence) if inp.evidence else "(none)"))
    return [Message("system", system), *inp.history, Message("user", "\n\n".join(parts))]


def synthesize(
    model: Model, inp: SynthesisInput, max_tokens: int = 2048, timeout_s: float = 300.0
) -> SynthesisOutput:
    """One synthesis call, plus one repair call when a shape document is invalid.

    Raises ModelError when the model fails (the caller degrades to the extractive synthesizer) and
    ShapeInvalid when the document is still invalid after the repair."""
    messages = synthesis_messages(inp)
    params = CompletionParams(
        max_tokens=max_tokens,
        temperature=model.config.temperature,
        seed=model.config.seed,
        json_mode=inp.shape is not None,
        timeout_s=timeout_s,
    )
    out = SynthesisOutput(text="")
    began = time.monotonic()
    reply = _call(model, messages, params, out)
    if inp.shape is None:
        out.text = reply.strip()
        out.ms = (time.monotonic() - began) * 1000
        return out
    document, errors = _parse_document(reply, inp.shape)
    if errors:
        messages = [
            *messages,
            Message("assistant", reply),
            Message(
                "user",
                "The JSON did not match the schema:\n"
                + "\n".join(errors)
                + "\nReply again with one corrected JSON object.",
            ),
        ]
        reply = _call(model, messages, params, out)
        document, errors = _parse_document(reply, inp.shape)
    out.ms = (time.monotonic() - began) * 1000
    if errors or document is None:
        text = str(document.get("answer", "")) if document else ""
        raise ShapeInvalid(errors or ["no JSON object in the reply"], text)
    out.text = str(document.get("answer") or "").strip()
    out.data = document["data"]
    grounding: dict[str, list[int]] = {}
    for pointer, numbers in (document.get("grounding") or {}).items():
        if isinstance(pointer, str) and isinstance(numbers, list):
            grounding[pointer] = [
                int(n) for n in numbers if isinstance(n, int | float) and not isinstance(n, bool)
            ]
    out.grounding = grounding
    return out


def repair(
    model: Model,
    inp: SynthesisInput,
    first: str,
    flagged: Sequence[Mapping[str, Any]],
    max_tokens: int = 2048,
    timeout_s: float = 300.0,
) -> SynthesisOutput:
    """One more call when the answer states what its citations do not (spec/runtime.md §8.4.1): the
    model sees its answer, each flagged sentence and the facts its evidence lacks, and rewrites the
    answer from the same evidence. The caller keeps the rewrite only when the claim check flags fewer
    sentences in it, so a repair can only take a wrong fact out, never put one in.

    Raises ModelError when the call fails (the caller keeps the first answer)."""
    lines = []
    for flag in flagged:
        sentence = " ".join(str(flag.get("text", "")).split())
        missing = ", ".join(str(m) for m in flag.get("missing") or [])
        if flag.get("reason") != "uncited":
            lines.append(f'- "{sentence}": the evidence it cites does not state {missing}')
        elif found := stating(sentence, inp.evidence):
            shown = " or ".join(f"[{n}]" for n in found)
            body = sentence.rstrip(".!?")
            end = sentence[len(body) :] or "."
            lines.append(
                f'- "{sentence}": cites no evidence, though {shown} states {missing}: '
                f'if it says what you mean, write "{body} [{found[0]}]{end}"'
            )
        else:
            lines.append(f'- "{sentence}": cites no evidence, and no evidence states {missing}')
    ask = (
        "These sentences of your answer state facts that the evidence they cite does not:\n"
        + "\n".join(lines)
        + "\nWrite the whole answer again from the same evidence. State only figures, dates and "
        "quotations that the evidence you cite states, each sentence with its [n]; where the evidence "
        "does not say, say so instead of guessing. Reply with the answer only."
    )
    messages = [*synthesis_messages(inp), Message("assistant", first), Message("user", ask)]
    params = CompletionParams(
        max_tokens=max_tokens,
        temperature=model.config.temperature,
        seed=model.config.seed,
        timeout_s=timeout_s,
    )
    out = SynthesisOutput(text="")
    began = time.monotonic()
    out.text = _call(model, messages, params, out, phase="repair").strip()
    out.ms = (time.monotonic() - began) * 1000
    return out


def _call(
    model: Model,
    messages: list[Message],
    params: CompletionParams,
    out: SynthesisOutput,
    phase: str = "synthesis",
) -> str:
    sent = [m.to_json() for m in messages]
    began = time.monotonic()
    try:
        reply = model.complete(messages, [], params)
    except ModelError as exc:
        out.calls.append(ModelCallRecord(phase, sent, None, str(exc), (time.monotonic() - began) * 1000))
        raise
    out.calls.append(ModelCallRecord(phase, sent, reply.to_json(), None, (time.monotonic() - began) * 1000))
    out.usage = out.usage + reply.usage
    out.model = reply.model or model.config.id
    return reply.text


def _parse_document(reply: str, shape: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    document = extract_json_object(reply)
    if document is None:
        return None, ["/: the reply held no JSON object"]
    if "data" not in document:
        return document, ['/: the object needs a "data" member']
    return document, validate(document["data"], shape)


def history_messages(turns: Sequence[QueryDocument], budget_chars: int = 24_000) -> list[Message]:
    """Earlier completed turns as user/assistant pairs (spec/runtime.md §9): the ask, then the answer with
    its source list. The most recent turns that fit in the budget are kept, oldest first."""
    pairs: list[tuple[Message, Message]] = []
    used = 0
    for query in reversed(list(turns)):
        ask = "".join(str(m.get("content", "")) for m in query.get("input") or [])
        answer = "".join(
            str(part.get("text", ""))
            for message in query.get("output") or []
            for part in message.get("content") or []
            if part.get("type") == "output_text"
        )
        sources = [
            f"[{i}] {c.get('source')} p.{(c.get('pages') or [1])[0]}"
            for i, c in enumerate(query.get("citations") or [], 1)
        ]
        if sources:
            answer += "\nSources: " + " ".join(sources)
        size = len(ask) + len(answer)
        if used + size > budget_chars:
            break
        used += size
        pairs.append((Message("user", ask), Message("assistant", answer)))
    return [m for pair in reversed(pairs) for m in pair]


def cited_documents(turns: Sequence[QueryDocument]) -> tuple[tuple[str, str], ...]:
    """(context, source) of every document `turns` cited, in citation order, each once: what "it" or
    "and in 2024?" in the next question most likely still means."""
    seen: dict[tuple[str, str], None] = {}
    for query in turns:
        for citation in query.get("citations") or []:
            context, source = citation.get("context"), citation.get("source")
            if isinstance(context, str) and isinstance(source, str):
                seen.setdefault((context, source), None)
    return tuple(seen)


def synthesis_reserve(timeout_seconds: float) -> float:
    """Seconds kept back from the loop for synthesis: a fifth of the cap (at most 60 s), but half of a
    short cap (up to 5 s), so a short turn still finishes under its hard cap instead of timing out."""
    return min(60.0, max(0.2 * timeout_seconds, min(0.5 * timeout_seconds, 5.0)))
