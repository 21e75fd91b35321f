"""Plumbing with a real local model behind the OpenAI-compatible API (spec/local-llm.md §7).

Runs only when `SLEUTH_TEST_LLM_URL` points at a running server (e.g. llama.cpp's `llama-server`
with Qwen2.5-Coder-1.5B at `http://127.0.0.1:8080/v1`) and never in CI. It asserts plumbing, not
answer quality: replies parse, code runs in the sandbox, events stream in order, surviving citations
are verbatim, the trace replays identically, and a turn always ends in a terminal state.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.replay import replay
from sleuth.agent.turn import Runtime, TurnRequest
from sleuth.compile.pipeline import CompileReport
from sleuth.models.catalog import Catalog
from sleuth.sandbox import SandboxHost
from sleuth.store.contexts.home import Home
from sleuth.store.records.server_db import ServerDB
from sleuth.store.version.search import VersionReader

URL = os.environ.get("SLEUTH_TEST_LLM_URL", "")
pytestmark = [
    pytest.mark.llm,
    pytest.mark.skipif(bool(os.environ.get("CI")), reason="real-model tests never run in CI"),
    pytest.mark.skipif(not URL, reason="set SLEUTH_TEST_LLM_URL to a local OpenAI-compatible server"),
]


def _catalog() -> Catalog:
    return Catalog.from_dict(
        {
            "models": {
                "local/qwen": {
                    "provider": "openai-compatible",
                    "base_url": URL,
                    "api_key": "unused",
                    "model": os.environ.get("SLEUTH_TEST_LLM_MODEL", "qwen2.5-coder-1.5b"),
                    "tool_protocol": "text",
                    "prompt_profile": "small",
                    "temperature": 0,
                    "seed": 1,
                    "context_window": 8192,
                }
            }
        }
    )


@pytest.mark.parametrize(
    "ask",
    ["How many products are in the catalog?", "What does error ERR-4012 mean?"],
)
def test_real_model_turn_plumbing(
    ask: str, sample_home: tuple[Home, CompileReport], agent_host: SandboxHost, tmp_path: Path
) -> None:
    home, _ = sample_home
    db = ServerDB(tmp_path / "server.sqlite", replay_root=tmp_path)
    events: list[dict[str, Any]] = []
    with Runtime(home, catalog=_catalog(), db=db, sandbox_host=agent_host) as runtime:
        query = runtime.ask(
            TurnRequest(ask=ask, scope=["acme"], model="local/qwen", max_steps=4, timeout_seconds=300),
            events.append,
        )
    assert query.status in ("completed", "failed")
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created" and kinds[-1] in ("response.completed", "response.failed")
    assert "response.trace" in kinds
    reader = VersionReader(home.find("acme").version_dir(home.find("acme").live_version() or ""))
    for citation in query.citations:
        page = reader.page_text(citation.source, citation.pages[0]) or ""
        assert page[citation.start : citation.end] == citation.grounding
    if query.status == "completed":
        assert query.steps, "the model ran at least one step"
        report = replay(home, query.id, db=db)
        assert report["identical"], report
