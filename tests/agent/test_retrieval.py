"""Retrieval-only turns (spec/api.md §8.7) through the real runtime over the compiled sample corpus: one
hybrid retrieval, fused across chunks and artifacts, as one step; no model, no sandbox, no synthesis."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sleuth.agent.replay import replay
from sleuth.agent.retrieval import Retrieval, RetrievalOptions, retrieval_options
from sleuth.agent.turn import Runtime, TurnError, TurnRequest
from sleuth.compile.pipeline import CompileReport
from sleuth.models.base import Model, ModelConfig
from sleuth.sandbox import Limits, SandboxHost
from sleuth.sandbox.host import Sandbox
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.store.contexts.home import Home
from sleuth.store.records.server_db import ServerDB

HOTEL = "What is the hotel limit per night when travelling?"
MODEL = "openai:gpt-test"  # a provider model: building it would go through the model factory
HIT_KEYS = ["kind", "context", "source", "pages", "section_path", "score", "text", "name", "type"]


class NoSandboxHost(SandboxHost):
    """A real host whose sandboxes must never be started: a retrieval-only turn runs none."""

    def start_turn(self, *args: Any, **kwargs: Any) -> Sandbox:
        raise AssertionError("a retrieval-only turn started a sandbox")


@pytest.fixture
def runtime(sample_home: tuple[Home, CompileReport], tmp_path: Path) -> Iterator[Runtime]:
    """A runtime whose model factory and sandbox host both refuse to be used."""
    home, _ = sample_home
    built: list[str] = []

    def no_model(config: ModelConfig) -> Model:
        built.append(config.id)
        raise AssertionError(f"a retrieval-only turn built model {config.id}")

    with Runtime(
        home,
        db=ServerDB(tmp_path / "server.sqlite", replay_root=tmp_path),
        sandbox_host=NoSandboxHost(Limits()),
        model_factory=no_model,
    ) as rt:
        rt.models_built = built  # type: ignore[attr-defined]
        yield rt


def ask(runtime: Runtime, events: list[dict[str, Any]] | None = None, **flags: Any) -> Any:
    """A retrieval-only turn, asked with the request flags of spec/api.md §8.1."""
    request = TurnRequest(ask=HOTEL, scope=["acme"], model=MODEL, **flags)
    return runtime.ask(request, events.append if events is not None else None)


def test_hits_are_fused_across_chunks_and_artifacts(runtime: Runtime) -> None:
    events: list[dict[str, Any]] = []
    query = ask(runtime, events, retrieval_only=True, max_retrieved=10)
    assert query.status == "completed", query.error
    hits = query.output_json["hits"]
    assert len(hits) == 10
    assert all(list(h) == HIT_KEYS for h in hits)
    assert {h["kind"] for h in hits} == {"chunk", "artifact"}
    # the best chunk leads (ties go to chunks), then the lists interleave by rank
    assert hits[0]["kind"] == "chunk" and "$220" in hits[0]["text"]
    assert [h["kind"] for h in hits[:4]] == ["chunk", "artifact", "chunk", "artifact"]
    # Each hit keeps its own search's score (hybrid, 0..1): the same number `search_source` gives.
    for kind in ("chunk", "artifact"):
        scores = [h["score"] for h in hits if h["kind"] == kind]
        assert scores == sorted(scores, reverse=True) and all(0.0 < s <= 1.0 for s in scores)
    # the best chunk of a page the learned ranker is sure of scores near 1 (its page score, 0..1)
    assert hits[0]["score"] == max(h["score"] for h in hits if h["kind"] == "chunk") > 0.5
    chunk = hits[0]
    assert chunk["context"] == "acme" and chunk["source"].endswith("travel-policy.md")
    assert chunk["pages"] == [1] and chunk["section_path"][-1] == "6. Hotels"
    assert chunk["name"] is None and chunk["type"] is None
    artifact = next(h for h in hits if h["kind"] == "artifact")
    assert artifact["name"] and artifact["type"] and artifact["source"].startswith("uploads/")
    assert artifact["pages"] == [] and artifact["section_path"] == []
    assert artifact["text"].startswith(f"# {artifact['name']}")
    # no answer: no text, no citations, no synthesis, no tokens, no model
    assert query.output == [] and query.citations == [] and query.answer == ""
    assert query.synthesis is None and query.output_grounding is None
    assert query.model is None and query.usage.total_tokens == 0
    assert runtime.models_built == []  # type: ignore[attr-defined]
    rollup = query.rollup
    assert rollup is not None and rollup.stop_reason == "retrieval_only"
    assert query.max_steps == 1  # one retrieval step, whatever the request asked
    assert rollup.total_hits == 20  # 10 chunks and 10 artifacts came back before the cut
    assert rollup.n_steps == 1 and rollup.by_category == {"search": 2, "read": rollup.n_tool_calls - 2}
    # one step, sent running then completed, its calls recorded like a loop step's
    [step] = query.steps
    assert step.step_id == "step_1" and step.status == "completed"
    assert step.commentary.startswith("retrieval only: hybrid search")
    assert step.fns == ["search_source", "search_knowledge", "read_artifact"]
    assert step.strategy.kind == "chunks_first" and step.strategy.scope == ["acme"]
    search, knowledge = step.tool_calls[:2]
    assert search.fn == "search_source" and search.score_space == "hybrid_rrf" and search.ok
    assert search.result["hits"] == 10 and search.result["top"].endswith("travel-policy.md p.1")
    ranked = search.result["ranked"]  # the first hits, their scores and what ranked them (issue 44)
    assert len(ranked) == 3 and ranked[0]["where"] == search.result["top"]
    assert all(0 <= r["score"] <= 1 for r in ranked) and any(r.get("why") for r in ranked)
    assert search.args == f"{HOTEL!r}, top_k=10"
    assert knowledge.fn == "search_knowledge" and knowledge.result["hits"] == 10
    reads = step.tool_calls[2:]
    assert len(reads) == sum(1 for h in hits if h["kind"] == "artifact")
    assert all(c.fn == "read_artifact" and c.category == "read" and c.ok for c in reads)
    assert "search_source(query, top_k=10)" in step.code["source"]
    assert step.output == "10 hits kept (5 chunks, 5 artifacts) of 20 retrieved"
    # the usual events, without an answer or a synthesis
    assert [e["type"] for e in events] == [
        "response.created",
        "response.step",
        "response.step",
        "response.turn_rollup",
        "response.trace",
        "response.completed",
    ]
    assert [e["status"] for e in events[1:3]] == ["running", "completed"]
    assert events[1]["code"]["source"] == step.code["source"]
    assert events[3]["stop_reason"] == "retrieval_only"
    # stored and traced like any turn
    assert runtime.db.get_query(query.id)["output_json"] == query.output_json  # type: ignore[index]
    trace = runtime.db.get_trace(query.id)
    assert trace is not None and query.trace_ref == f"trace/{query.id}"
    assert [s["step_id"] for s in trace["steps"]] == ["step_1"]
    assert trace["steps"][0]["calls"][0]["fn"] == "search_source"
    rollup = trace["rollup"]
    assert rollup is not None and rollup["stop_reason"] == "retrieval_only" and trace["synthesis"] is None
    assert trace["sandbox"] is None and trace["models"] == [] and trace["evidence"] == []
    # Replay re-runs the retrieval over the pinned version with the recorded embeddings.
    assert trace["replay"]["available"] is True
    report = replay(runtime.home, query.id, runtime.db)
    assert report == {"identical": True, "steps_compared": 1, "first_difference": None}
    assert trace["usage_seams"][0]["kind"] == "embed" and trace["usage_seams"][0]["requests"] == 1


def test_max_hits_and_max_chars_cut_the_hits(runtime: Runtime) -> None:
    query = ask(runtime, retrieval_only=True, max_retrieved=3, max_retrieved_chars=40)
    assert query.status == "completed", query.error
    hits = query.output_json["hits"]
    assert len(hits) == 3 and all(len(h["text"]) <= 40 for h in hits)
    assert query.rollup.total_hits == 6  # top_k follows max_hits: 3 of each kind before the cut


def test_pointers_only_omits_the_text(runtime: Runtime) -> None:
    query = ask(runtime, pointers_only=True, max_retrieved=6)
    assert query.status == "completed", query.error
    hits = query.output_json["hits"]
    assert len(hits) == 6 and all("text" not in h for h in hits)
    assert all(h["source"] and h["context"] == "acme" for h in hits)
    [step] = query.steps
    assert step.fns == ["search_source", "search_knowledge"]  # no artifact is read for its text
    assert "read_artifact" not in step.code["source"]


def test_chunks_only_and_artifacts_only_narrow_the_kinds(runtime: Runtime) -> None:
    chunks = ask(runtime, chunks_only=True, max_retrieved=5)
    assert {h["kind"] for h in chunks.output_json["hits"]} == {"chunk"}
    assert chunks.steps[0].fns == ["search_source"] and chunks.rollup.total_hits == 5
    artifacts = ask(runtime, artifacts_only=True, max_retrieved=5)
    assert {h["kind"] for h in artifacts.output_json["hits"]} == {"artifact"}
    assert artifacts.steps[0].fns == ["search_knowledge", "read_artifact"]
    assert artifacts.steps[0].strategy.kind == "artifacts_first"


def test_same_request_same_hits(runtime: Runtime) -> None:
    first = ask(runtime, retrieval_only=True, max_retrieved=8)
    second = ask(runtime, retrieval_only=True, max_retrieved=8)
    assert first.output_json == second.output_json


def test_fusion_spans_contexts(sample_version: Path) -> None:
    """Two scoped contexts (the same version under two slugs): each kind is fused across them by the
    SDK, then the kinds are fused; every hit names its context."""
    contexts = {"acme": sample_version, "mirror": sample_version}
    found = Retrieval(contexts, HOTEL, RetrievalOptions(max_hits=8)).run()
    assert {h["context"] for h in found.hits} == {"acme", "mirror"}
    assert found.total_hits == 16
    # the two copies of the best chunk tie across contexts and rank 1 and 2 among the chunks
    assert [h["kind"] for h in found.hits[:4]] == ["chunk", "artifact", "chunk", "artifact"]
    assert found.hits[0]["text"] == found.hits[2]["text"]
    assert {found.hits[0]["context"], found.hits[2]["context"]} == {"acme", "mirror"}


def test_hits_match_the_sdk(sample_version: Path) -> None:
    """A retrieval-only turn returns what `search_source` returns to a model, in the same order."""
    import asyncio

    found = Retrieval({"acme": sample_version}, HOTEL, RetrievalOptions(kinds=("chunk",), max_hits=5)).run()
    knowledge = Knowledge([ScopedContext("acme", sample_version)])
    try:
        hits = asyncio.run(knowledge.search_source(HOTEL, top_k=5))
    finally:
        knowledge.close()
    assert [(h["source"], h["text"], h["score"]) for h in found.hits] == [
        (h.source_path, h.chunk_text, h.score) for h in hits
    ]


def test_a_failing_retrieval_fails_the_turn(runtime: Runtime, tmp_path: Path) -> None:
    prepared = runtime.prepare(TurnRequest(ask=HOTEL, scope=["acme"], chunks_only=True))
    # the pinned version disappears under the turn (e.g. collected): the index cannot be read
    broken = prepared.briefs[0]
    prepared.briefs[0] = replace(broken, version_dir=tmp_path / "gone")
    query = runtime.run(prepared)
    assert query.status == "failed" and query.error is not None
    assert query.error.startswith("retrieval failed: ")
    [step] = query.steps
    assert step.status == "failed" and step.error is not None
    assert query.rollup is not None and query.rollup.stop_reason == "failed"
    assert runtime.db.get_trace(query.id) is not None


def test_options_are_checked_before_anything_is_stored(runtime: Runtime) -> None:
    """Ranges are the turn contract's (refused when the request is built); options that exclude each
    other are refused by the runtime before a session or query is stored."""
    bad: list[dict[str, Any]] = [
        {"max_retrieved": 0},
        {"max_retrieved": 201},
        {"max_retrieved_chars": 20_001},
    ]
    for flags in bad:
        with pytest.raises(ValidationError) as invalid:
            TurnRequest(ask=HOTEL, scope=["acme"], retrieval_only=True, **flags)
        assert invalid.value.errors()[0]["loc"] == (next(iter(flags)),)
    conflicting: list[dict[str, Any]] = [
        {"compose": False, "shape": {"type": "object"}},
        {"chunks_only": True, "artifacts_only": True},
    ]
    for flags in conflicting:
        with pytest.raises(TurnError) as raised:
            runtime.prepare(TurnRequest(ask=HOTEL, scope=["acme"], **flags))
        assert raised.value.code == "conflicting_options", flags
    assert runtime.db.list_sessions() == []


def test_flags_map_to_options() -> None:
    assert retrieval_options() is None
    assert retrieval_options(compose=False) == RetrievalOptions()
    assert retrieval_options(retrieval_only=True, max_retrieved=5, max_retrieved_chars=9) == RetrievalOptions(
        max_hits=5, max_chars=9
    )
    assert retrieval_options(pointers_only=True) == RetrievalOptions(pointers_only=True)
    assert retrieval_options(chunks_only=True) == RetrievalOptions(kinds=("chunk",))
    assert retrieval_options(artifacts_only=True) == RetrievalOptions(kinds=("artifact",))
