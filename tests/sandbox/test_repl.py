"""REPL semantics (spec/runtime.md §4.3-4.4), in process and through a real sandbox."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from sleuth.sandbox import Sandbox, messages
from sleuth.sandbox.output import observation
from sleuth.sandbox.protocol import LineReader, ProtocolError, encode
from sleuth.sandbox.repl import Repl
from sleuth.sdk.knowledge import Knowledge, ScopedContext


@pytest.fixture
def repl(acme_version: Path) -> Iterator[Repl]:
    opened = Repl(Knowledge([ScopedContext("acme", acme_version)]))
    yield opened
    opened.close()


def step(repl: Repl, code: str, n: int = 1, limit: int = 10_000, timeout: float = 120) -> dict[str, object]:
    """One step; the timeout only guards against a hang (a first search loads the embedder, which on a
    loaded machine took longer than the 10 s this once allowed, and `final` was never reached)."""
    return repl.run_step(n, code, timeout, limit, 1 << 20)


def test_state_persists_and_the_last_expression_is_echoed(repl: Repl) -> None:
    assert step(repl, "x = 20")["output"] == ""
    assert step(repl, "def double(v):\n    return v * 2\ndouble(x) + 2", 2)["output"] == "42\n"
    assert step(repl, "None", 3)["output"] == ""


def test_top_level_await_and_gather(repl: Repl) -> None:
    result = step(
        repl,
        "a, b = await asyncio.gather(search_source('remote work', top_k=2), "
        "search_source_by_keyword('ERR-4012', top_k=2))\nprint(len(a), len(b))",
    )
    assert result["ok"] and result["output"] == "2 2\n"
    calls = sorted(c["fn"] for c in cast(list[dict[str, Any]], result["calls"]))
    assert calls == ["search_source", "search_source_by_keyword"]
    assert result["spans"] and result["spans"][0]["ref"] == "E1"  # type: ignore[index]


def test_reads_work_with_or_without_await(repl: Repl) -> None:
    result = step(repl, "a = get_fact('source_count')\nb = await get_fact('source_count')\nprint(a, b)")
    assert result["output"] == "21 21\n"


def test_unawaited_search_says_to_await(repl: Repl) -> None:
    out = step(repl, "hits = search_source('remote work')\nprint(hits)\nhits[0]")["output"]
    assert str(out).count("write `await search_source(...)`") == 2


def test_asyncio_run_is_tolerated(sandbox: Sandbox) -> None:
    out = sandbox.exec(
        "async def main():\n    return await search_source('travel hotel', top_k=1)\n"
        "hits = asyncio.run(main())\nprint(len(hits))"
    ).output
    assert out == "1\n"
    inside = sandbox.exec("await asyncio.sleep(0)\nasyncio.run(asyncio.sleep(0))").output
    assert "write `await ...`" in inside


def test_tracebacks_show_only_the_models_lines(repl: Repl) -> None:
    result = step(repl, "x = 1\nread_artifact('No Such Thing')", 7)
    error = result["error"]
    assert isinstance(error, dict) and error["type"] == "NotFoundError"
    trace = error["traceback"]
    assert 'File "<step-7>", line 2' in trace and "knowledge.py" not in trace
    assert "SystemExit" not in str(step(repl, "raise SystemExit(3)")["output"])


def test_truncation_notice_keeps_the_error_line() -> None:
    text = "a" * 50 + "\nValueError: boom"
    shown, cut = observation(text, len(text), 20, "ValueError: boom")
    assert cut and shown == "a" * 20 + "\n[truncated: showing 20 of 67 chars]\nValueError: boom"
    assert observation("short", 5, 20) == ("short", False)


def test_final_is_reported(repl: Repl) -> None:
    result = step(
        repl,
        "hits = await search_source('revenue 2025', top_k=1)\n"
        "try:\n    final('Revenue was $48.2 million.', evidence=hits)\nexcept Exception:\n    pass",
    )
    assert result["error"] is None, result["error"]  # say why, where the search itself failed
    assert result["final"] == {"answer": "Revenue was $48.2 million.", "evidence": ["E1"]}


def test_protocol_rejects_bad_lines() -> None:
    reader = LineReader()
    assert reader.feed(encode({"t": "exec", "id": 1})[:5]) == []
    assert [f.message for f in reader.feed(encode({"t": "exec", "id": 1})[5:])] == [{"t": "exec", "id": 1}]
    for bad in (b"[1, 2]\n", b'{"x": 1}\n', b"not json\n", b'{"t": "x", "v": NaN}\n', b"\xff\xfe\n"):
        with pytest.raises(ProtocolError):
            LineReader().feed(bad)


def test_protocol_bounds_a_line_before_parsing_it() -> None:
    """A line of millions of empty lists, or one nested past the parser's stack, is refused without
    being turned into objects (issue 10: ten such 16 MiB lines cost the host 4 GB)."""
    many = b'{"t":"rpc","id":1,"fn":"embed","args":{"texts":[' + b"[]," * 4_000_000 + b"[]]}}\n"
    with pytest.raises(ProtocolError, match="values"):
        LineReader().feed(many)
    deep = b'{"t":"x","v":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    with pytest.raises(ProtocolError, match="deeper"):
        LineReader().feed(deep)
    # Brackets and commas inside strings are text, not structure.
    text = json.dumps({"t": "result", "output": "[[[[,,,,{{{{" * 100_000}).encode() + b"\n"
    assert LineReader().feed(text)[0].message["output"].startswith("[[[[")


def test_protocol_makes_text_valid_utf8_once() -> None:
    """A lone surrogate, from Python text or a JSON escape, arrives as U+FFFD and encodes as UTF-8."""
    assert encode({"t": "x", "s": "a\ud800b"}) == '{"t":"x","s":"a\ufffdb"}\n'.encode()
    (frame,) = LineReader().feed(b'{"t":"x","s":"a\\ud800b","k":{"\\udfff":1}}\n')
    assert frame.message == {"t": "x", "s": "a\ufffdb", "k": {"\ufffd": 1}}
    json.dumps(frame.message, ensure_ascii=False).encode("utf-8")


def test_messages_have_one_schema_per_kind() -> None:
    with pytest.raises(ProtocolError, match="unknown message kind"):
        messages.parse({"t": "nonsense"})
    with pytest.raises(ProtocolError, match="invalid result"):
        messages.parse({"t": "result", "id": 1, "ok": True})  # no output
    with pytest.raises(ProtocolError, match="invalid rpc"):
        messages.parse({"t": "rpc", "id": "1", "fn": "embed", "args": {}})
    span = {"ref": "E1", "context": "acme", "source_path": "a.md", "page": -1, "start": 0, "end": 1}
    with pytest.raises(ProtocolError, match="page"):
        messages.parse(
            {"t": "result", "id": 1, "ok": True, "output": "", "output_chars": 0, "truncated": False,
             "full_output": "", "spans": [span]}
        )  # fmt: skip


def test_host_commands_have_one_schema_both_ends_read() -> None:
    """What the host sends (exec, rpc_result, close) is typed too: one schema, written by the host
    and read back by the sandbox's REPL."""
    run = messages.Exec(id=3, step=3, code="print(1)", timeout_s=30, max_output=100, full_output_cap=10)
    assert messages.Exec.model_validate(messages.wire(run)) == run
    failed = messages.RpcResult(id=7, ok=False, error=messages.RpcError(type="HostError", message="no"))
    assert messages.wire(failed) == {
        "t": "rpc_result",
        "id": 7,
        "ok": False,
        "error": {"type": "HostError", "message": "no"},
    }
    answered = messages.RpcResult(id=8, ok=True, result={"vector": [0.5, None]})
    assert messages.RpcResult.model_validate(messages.wire(answered)).result == {"vector": [0.5, None]}
    assert messages.wire(messages.Close()) == {"t": "close"}


def test_a_real_sandbox_round_trip(sandbox: Sandbox) -> None:
    assert sandbox.ready["ok"] and "seccomp" in sandbox.ready["layers"]
    first = sandbox.exec("rows = query_db('SELECT count(*) AS n FROM product')\nrows[0]['n']")
    assert first.output == "10\n" and first.calls[0]["fn"] == "query_db"
    hits = sandbox.exec("hits = await search_source('What does ERR-4012 mean?', top_k=3)\nprint(hits[0].ref)")
    assert hits.output == "E1\n" and [c["fn"] for c in hits.rpc_calls] == ["embed"]
    around = sandbox.exec("p = read_around(hits[0], before=0, after=1)\nprint(len(p), p.hits[0].ref)\np")
    assert around.output.startswith("2 E1\nPassage(") and "[E1 p." in around.output
    assert [c["fn"] for c in around.calls] == ["read_around"]
    cells = sandbox.exec(
        'rows = query_db("SELECT label, header, text, source, page, start, \\"end\\" FROM _cells "\n'
        "                \"WHERE label = 'Net income' AND year = 2025\")\n"
        "print(rows[0]['text'], rows[0]['_evidence'])"
    )
    assert cells.output.startswith("5.1 E") and cells.calls[0]["fn"] == "query_db"  # a PDF table's cell


def test_sleuth_exec_cli(sample_home: tuple[object, object], tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    home, _ = sample_home
    env = {**os.environ, "SLEUTH_HOME": str(home.root)}  # type: ignore[attr-defined]
    script = tmp_path / "q.py"
    script.write_text(
        "rows = query_db('SELECT sku FROM product ORDER BY sku LIMIT 2')\nprint(rows)\nprint('x' * 5000)"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sleuth", "exec", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = run("--context", "acme", str(script), "--max-tool-output-chars", "200")
    assert done.returncode == 0, done.stderr
    assert "AX-220" in done.stdout and "[truncated: showing 200 of 5,0" in done.stdout
    script.write_text("x = 1\nraise ValueError('bad step')")
    failed = run("--context", "acme", str(script))
    assert failed.returncode == 1 and "ValueError: bad step" in failed.stdout
    missing = run("--context", "nope", str(script))
    assert missing.returncode == 1 and "no context 'nope' in " in missing.stderr  # 1: it ran and failed
    # A step that writes nested junk on its channel: a clear error, never a host traceback (issue 10).
    script.write_text(
        "import gc\nch = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')\n"
        "ch.sock.sendall(b'{\"t\":\"rpc\",\"args\":' + b'[' * 100000 + b'\\n')\nimport time\ntime.sleep(3)"
    )
    broken = run("--context", "acme", str(script))
    assert broken.returncode == 1 and "broke its channel" in broken.stderr
    assert "Traceback" not in broken.stderr


def test_isolation_floor_rules() -> None:
    from sleuth.sandbox.zygote import meets_floor

    full = ["cgroup", "namespaces", "pivot_root", "uid", "rlimits", "landlock", "seccomp"]
    assert meets_floor("standard", full, 7) == (True, [])
    assert meets_floor("strict", full, 7) == (True, [])
    assert meets_floor("standard", ["rlimits", "landlock", "seccomp"], 7) == (True, [])  # the `nons` mode
    assert meets_floor("standard", ["rlimits", "landlock"], 7) == (False, ["seccomp"])
    assert meets_floor("standard", ["rlimits", "seccomp"], 0) == (False, ["landlock or pivot_root"])
    assert meets_floor("strict", ["rlimits", "landlock", "seccomp"], 3)[1] == [
        "namespaces",
        "pivot_root",
        "uid",
        "landlock ABI >= 4",
    ]
    assert meets_floor("none", [], 0) == (True, [])
