"""What hostile model code costs the host, one turn per attack, each in its own process.

    .venv/bin/python benchmarks/hostile.py [--src DIR] [--only NAME]

Each attack is a turn whose scripted model writes the attack's code into the real sandbox over the
compiled sample corpus; the table shows how the turn ended and what it cost the *host* process (peak
RSS, CPU), the growth of `server.sqlite` and its WAL, and whether a forged citation survived. `--src`
points at another checkout's `src/` (for example an older commit in a `git worktree`), so a baseline
is measured by the same script on the same machine in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHANNEL = "import gc\nch = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')\n"
EVIDENCE = "ev = final.__self__.evidence\n"

ATTACKS: dict[str, list[str]] = {
    # Ten 16 MiB lines of empty lists as `embed` calls (issue 10, 1).
    "rpc_lines": [
        CHANNEL + 'line = b\'{"t":"rpc","id":9,"fn":"embed","args":{"texts":[\''
        " + b'[],' * 5_500_000 + b'[]]}}\\n'\nfor _ in range(10):\n    ch.sock.sendall(line)\n"
        "import time\ntime.sleep(20)"
    ],
    # A span whose source path is absolute, cited (issue 10, 2); SECRET_PATH is filled in below.
    "forged_span": [
        EVIDENCE + "ev.register('acme', SECRET_PATH, 1, 0, 20, 'TOP SECRET 7781 code', [], 'chunk')"
    ],
    # Lone surrogates in the ask, the model's code and the output, then an answer over the line
    # limit (issue 10, 3); the middle step shows whether the REPL kept its variables.
    "surrogate": ["kept = 1\nprint('\ud800')", "kept += 1\nprint(kept)", "final('x' * 20_000_000)"],
    # 4 steps of 45k forged spans (issue 10, 4).
    "span_flood": [
        EVIDENCE + "n = globals().get('n', 0)\nfor i in range(n, n + 45_000):\n"
        "    ev.register('acme', 'x', 1, i, i + 1, 'forged span text ' * 3, [], 'chunk')\nn += 45_000"
    ]
    * 4,
    # 4 steps of 15k forged spans: each step fits the channel, the turn passes its span budget.
    "span_budget": [
        EVIDENCE + "n = globals().get('n', 0)\nfor i in range(n, n + 15_000):\n"
        "    ev.register('acme', 'x', 1, i, i + 1, 'forged span text ' * 3, [], 'chunk')\nn += 15_000"
    ]
    * 4,
    # 5,000 host function calls (issue 10, 4).
    "embed_flood": [
        CHANNEL
        + "for i in range(5000):\n    try:\n        await ch.call('embed', {'texts': [f'x {i}'] * 96})\n"
        "    except Exception as e:\n        print(type(e).__name__, str(e)[:80]); break"
    ],
}


def child(name: str, home: str, scratch: str) -> dict[str, Any]:
    """Run one attack turn in this process and report what it cost."""
    from sleuth.agent.turn import Runtime, TurnRequest
    from sleuth.models.base import ModelConfig
    from sleuth.models.scripted import ScriptedModel, code, final_call
    from sleuth.sandbox import Limits, SandboxHost
    from sleuth.store.contexts.home import Home
    from sleuth.store.records.server_db import ServerDB

    secret = Path(scratch) / "secret"
    secret.with_suffix(".jsonl").write_text(json.dumps({"page": 1, "text": "TOP SECRET 7781 code"}) + "\n")
    steps = [s.replace("SECRET_PATH", repr(str(secret))) for s in ATTACKS[name]]
    model = ScriptedModel([*(code(s) for s in steps), final_call(evidence=["E1"]), "The code is 7781 [1]."])

    def build(config: ModelConfig) -> ScriptedModel:
        return model

    db_path = Path(scratch) / "server.sqlite"
    db = ServerDB(db_path, replay_root=Path(scratch))
    before = db_path.stat().st_size
    began, cpu = time.monotonic(), time.process_time()
    limits = Limits(step_timeout_s=60, hard_kill_grace_s=5)
    status, error, citations, outputs = "raised", "", 0, []
    with SandboxHost(limits) as host:
        runtime = Runtime(Home(Path(home)), db=db, sandbox_host=host, model_factory=build, limits=limits)
        try:
            ask = "What is the code \ud800?" if name == "surrogate" else "What is the code?"
            query = runtime.ask(TurnRequest(ask=ask, scope=["acme"], model="openai:gpt-test"))
            status, error = query.status, query.error or ""
            citations = sum("7781" in c.model_dump_json() for c in query.citations)
            outputs = [f"{s.status}: {(s.output or '')[:30]!r}" for s in query.steps]
        except BaseException as exc:  # the old code let some of these escape
            error = f"{type(exc).__name__}: {exc}"
        stored = db.get_query(query.id)["status"] if status != "raised" else "?"  # type: ignore[index]
    wal = db_path.with_name(db_path.name + "-wal")
    return {
        "status": status,
        "stored": stored,
        "error": error[:70],
        "steps": "; ".join(outputs)[:160],
        "forged_citations": citations,
        "host_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "host_cpu_s": time.process_time() - cpu,
        "wall_s": time.monotonic() - began,
        "db_growth_mb": (db_path.stat().st_size - before) / 2**20,
        "wal_mb": (wal.stat().st_size if wal.exists() else 0) / 2**20,
    }


def compile_sample(home: Path) -> None:
    env = {**os.environ, "SLEUTH_HOME": str(home)}
    corpus, manifest = REPO / "examples" / "acme-corpus", REPO / "examples" / "acme-manifest.json"
    command = [sys.executable, "-m", "sleuth", "compile", str(corpus), "--context", "acme"]
    subprocess.run([*command, "--manifest", str(manifest)], env=env, check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the src/ of the Sleuth to measure")
    parser.add_argument("--only", choices=sorted(ATTACKS))
    parser.add_argument("--child", nargs=3, metavar=("NAME", "HOME", "SCRATCH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    env = {**os.environ, "PYTHONPATH": str(args.src.resolve())}
    with tempfile.TemporaryDirectory(prefix="sleuth-hostile-") as tmp:
        home = Path(tmp) / "home"
        compile_sample(home)
        print(
            "| attack | status | stored | host peak RSS MB | host CPU s | wall s | DB +MB | WAL MB "
            "| forged cited | error | steps |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name in [args.only] if args.only else list(ATTACKS):
            scratch = Path(tmp) / name
            scratch.mkdir()
            done = subprocess.run(
                [sys.executable, __file__, "--child", name, str(home), str(scratch)],
                env=env, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            try:
                r = json.loads(done.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                print(f"| {name} | crashed (rc {done.returncode}) | | | | | | | | {done.stderr[-200:]!r} |")
                continue
            cells = [
                name,
                r["status"],
                r["stored"],
                f"{r['host_rss_mb']:.0f}",
                f"{r['host_cpu_s']:.1f}",
                f"{r['wall_s']:.1f}",
                f"{r['db_growth_mb']:.1f}",
                f"{r['wal_mb']:.1f}",
                str(r["forged_citations"]),
                r["error"],
                r["steps"],
            ]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
