"""Curation with a model end to end, over the wire formats of both providers (real HTTP servers on
127.0.0.1 that answer like a careful curator): the API's curate with `model`, usage and task stats,
then the new artifacts through the knowledge API, MCP's SDK tools and the SDK itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.compile.pipeline import compile_context
from sleuth.models.catalog import Catalog
from sleuth.sandbox import SandboxHost
from sleuth.sdk.knowledge import Knowledge, ScopedContext
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from tests.api.support import launch, upload, wait_task
from tests.api.test_mcp import value
from tests.compile.curator import CORPUS, MANIFEST, answer, write_corpus
from tests.models.wire import Canned, WireServer, openai_completion, wire_server


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def _openai(body: dict[str, Any]) -> Canned:
    system, user = (m["content"] for m in body["messages"][:2])
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    return Canned(body=openai_completion(json.dumps(answer(system, user)), usage=usage, model=body["model"]))


def _anthropic(body: dict[str, Any]) -> Canned:
    blocks = body["system"] if isinstance(body["system"], list) else [{"text": body["system"]}]
    system = "\n\n".join(b["text"] for b in blocks)
    content = body["messages"][0]["content"]
    user = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    return Canned(
        body={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": json.dumps(answer(system, user))}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 90, "output_tokens": 30},
        }
    )


@pytest.fixture
def openai_wire() -> Iterator[WireServer]:
    with wire_server(Canned(500, {"error": {"message": "no"}}), "/v1", respond=_openai) as wire:
        yield wire


def _config(home: Home, entry: str) -> None:
    home.root.mkdir(parents=True, exist_ok=True)
    (home.root / "config.toml").write_text(entry, encoding="utf-8")


def test_anthropic_wire_format_curates_every_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sleuth compile --model` over the Anthropic Messages wire format."""
    with wire_server(
        Canned(500, {"type": "error", "error": {"type": "api_error", "message": "no"}}), "", _anthropic
    ) as wire:
        home = Home(tmp_path / "home")
        _config(
            home,
            f'[models."claude/curator"]\nprovider = "anthropic"\nmodel = "claude-test"\n'
            f'base_url = "{wire.url}"\napi_key = "sk-ant-test"\n',
        )
        folder = write_corpus(tmp_path)
        report = compile_context(
            "deals",
            [folder],
            tmp_path / "manifest.json",
            home=home,
            model="claude/curator",
            settings=current(),
        )
        extraction = report.counts["extraction"]
        assert extraction["model"] == "claude/curator" and extraction["calls"] == len(wire.requests)
        assert extraction["input_tokens"] == 90 * extraction["calls"]
        assert report.counts["artifacts_by_type"] == {"Agreement": 2, "Company": 2}
        assert report.counts["rows_by_table"] == {"payment": 1}
        # `sleuth profile` after the run: every per-source call is in the cache, nothing to pay again
        monkeypatch.setenv("SLEUTH_HOME", str(home.root))
        result = CliRunner().invoke(app, ["profile", "-c", "deals", "--model", "claude/curator", "--json"])
        assert result.exit_code == 0, result.output
        estimate = json.loads(result.output)
        assert estimate["model"] == "claude/curator" and estimate["total"]["cached_calls"] == 9
        sent = wire.requests[0].body
        assert "JSON" in json.dumps(sent["system"])  # json mode: the adapter adds the instruction


def test_api_curate_with_a_model_then_every_surface_serves_its_artifacts(
    tmp_path: Path, api_host: SandboxHost, openai_wire: WireServer
) -> None:
    home = Home(tmp_path / "home")
    _config(
        home,
        f'[models."local/curator"]\nprovider = "openai-compatible"\nmodel = "curator"\n'
        f'base_url = "{openai_wire.url}"\napi_key = "unused"\n[tiers]\nlite = "local/curator"\n',
    )
    server, stop = launch(home, api_host, tmp_path)
    try:
        client = server.client
        assert (
            client.post(
                "/api/contexts", json={"slug": "deals", "name": "Deals", "manifest": MANIFEST}
            ).status_code
            == 200
        )
        for name, text in CORPUS.items():
            assert upload(client, "deals", name, text.encode()).status_code == 200
        profile = client.post("/api/contexts/deals/curate/profile", json={}).json()
        assert profile["model"] == "local/curator"  # the manifest's `lite` tier, mapped in config.toml
        assert {t["type"] for t in profile["types"]} == {"Agreement", "Company", "Payment", "_sample_queries"}
        assert profile["total"]["cached_calls"] == 0 and len(openai_wire.requests) == 0  # nothing spent
        plan = profile["preview"]
        assert plan["model"] == "local/curator" and {t["built_by"] for t in plan["types"]} == {"model"}
        assert sorted(plan["sources"]["new"]) == sorted(f"uploads/{name}" for name in CORPUS)
        bad = client.post("/api/contexts/deals/curate", json={"model": "local/nope"})
        assert bad.status_code == 400 and bad.json()["code"] == "model_unavailable"
        started = client.post("/api/contexts/deals/curate", json={"model": "local/curator"})
        assert started.status_code == 200, started.text
        task = wait_task(client, started.json()["task_id"])
        assert task["state"] == "completed", task
        output = task["output"]
        calls = len(openai_wire.requests)
        assert (
            output["usage"]["prompt_tokens"] == 100 * calls
            and output["usage"]["completion_tokens"] == 20 * calls
        )
        assert output["usage"]["by_model"] == {
            "local/curator": {"prompt_tokens": 100 * calls, "completion_tokens": 20 * calls}
        }
        assert output["delta"]["artifacts_screened"] == 1  # the notes' made-up quote
        assert output["artifacts_skipped_no_model"] == {}
        stats = client.get(f"/api/tasks/{task['id']}/stats").json()
        assert stats["tokens_total"] == 120 * calls  # was always 0
        assert "Which companies" in " ".join(output["sample_queries"])

        # the knowledge API lists and reads the new artifacts
        listed = client.get("/api/contexts/deals/knowledge/list/artifacts/company").json()
        names = json.dumps(listed)
        assert "acme-corp" in names
        read = client.get("/api/contexts/deals/knowledge/read/artifacts/company/acme-corp.md")
        assert read.status_code == 200 and "## Conflicts" in read.text

        async def through_mcp() -> None:
            async with Client(f"{server.url}/mcp") as mcp:
                art = value(await mcp.call_tool("read_artifact", {"context": "deals", "name": "Acme Corp"}))
                assert art["kind"] == "entity" and len(art["sources"]) == 2
                hits = value(
                    await mcp.call_tool("search_knowledge", {"context": "deals", "query": "ACME supplier"})
                )
                assert any(h["name"] == "Acme Corp" for h in hits)
                rows = value(
                    await mcp.call_tool(
                        "query_db", {"context": "deals", "sql": "SELECT payer, amount FROM payment"}
                    )
                )
                assert rows["rows"] == [{"payer": "Globex Inc.", "amount": 13000.0}]

        anyio.run(through_mcp)

        # pack, then restore into an empty context: the model-made artifacts come back from the packed
        # extraction cache, and no model is called (a restore never needs one)
        calls = len(openai_wire.requests)
        packed = wait_task(client, client.post("/api/contexts/deals/pack", json={}).json()["task_id"])
        archive = client.get(f"/api/tasks/{packed['id']}/files/read/deals.context.zip").content
        assert client.post("/api/contexts", json={"slug": "deals-copy", "name": "Copy"}).status_code == 200
        restore = client.post(
            "/api/contexts/deals-copy/restore", files={"file": ("deals.context.zip", archive)}
        )
        restored = wait_task(client, restore.json()["task_id"])
        assert restored["state"] == "completed", restored
        copy = client.get("/api/contexts/deals-copy/knowledge/read/artifacts/company/acme-corp.md")
        assert copy.status_code == 200 and "## Conflicts" in copy.text
        assert len(openai_wire.requests) == calls
    finally:
        stop()

    # the SDK reads them as any other artifact, with citable spans and the typed edge
    ctx = home.find("deals")
    version = ctx.version_dir(ctx.live_version() or "")
    knowledge = Knowledge([ScopedContext("deals", version)])
    try:
        outline = knowledge.outline_knowledge()
        assert {(a.type, a.kind) for a in outline} >= {("Agreement", "summary"), ("Company", "entity")}
        acme = knowledge.read_artifact("Acme Corp")
        assert acme.kind == "entity" and acme.provenance and acme.edges[0].type == "party_to"
        for span in acme.provenance:
            assert (version / "knowledge" / "pages" / f"{span.source_path}.jsonl").is_file() and span.text
        cited = anyio.run(knowledge.cite_from_artifact, "Acme Corp", "supplier of industrial pumps")
        assert cited and any("supplier of industrial pumps" in (h.chunk_text or "") for h in cited)
        assert knowledge.describe_type("Company").count == 2
        roster = next(r for r in knowledge.read_rosters() if r.type == "Company")
        assert {e.name for e in roster.entries} == {"Acme Corp", "Globex Inc"}
        graph = knowledge.walk_graph("Acme Corp", edge_types=["party_to"])
        assert [n.type for n in graph.nodes if n.name != "Acme Corp"] == ["Agreement"]
    finally:
        knowledge.close()
    assert Catalog.load(home.root).resolve("local/curator").base_url == openai_wire.url
