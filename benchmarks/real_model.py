"""A real model in the loop against the RAG baseline, same model, same run (issue 46).

    .venv/bin/python benchmarks/real_model.py --base-url http://127.0.0.1:8080/v1 [--model-name NAME]
    .venv/bin/python benchmarks/real_model.py --llama-server PATH --gguf PATH      # starts it itself
        [--questions FILE.jsonl --context SLUG --home DIR] [--limit N | --ids a,b] [--context-window 8192]
        [--tool-protocol native|text] [--prompt-profile standard|small] [--temperature 0 --seed 1]
        [--out DIR]

Any OpenAI-compatible server works (llama.cpp's `llama-server`, Ollama's `/v1`, vLLM); the local
Qwen2.5-Coder-1.5B of `docs/spec/local-llm.md` is the one this was written for. Without `--questions` it
compiles the sample corpus into a scratch home and asks `real_model_questions.jsonl` (12 questions,
gold checked by hand against `examples/acme-corpus`); with `--questions`, over `--context` in `--home`
(for instance the FinanceBench filings and `analyst_questions.jsonl`).

It runs `sleuth eval` with the model for both systems (Sleuth's default workflow, where the model writes
code, and `--baseline rag`, one `search` tool) and prints, per system: questions completed, right (the
eval matcher; no judge: the model under test would judge itself), unsupported sentences caught
(spec/runtime.md §8.4.1), steps, input and output tokens per completed question, and wall seconds per
question. Not in `make test`: a 1.1 GB model and a 14-minute build.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "benchmarks" / "real_model_questions.jsonl"
MODEL_ID = "local/bench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_llama(
    server: Path, gguf: Path, context_window: int, threads: int
) -> tuple[subprocess.Popen[bytes], str]:
    """`llama-server` on loopback with one slot (`docs/spec/local-llm.md` §4), ready. More than one
    thread only on an idle machine: under contention OpenMP's busy-waiting collapses generation."""
    port = _free_port()
    command = [str(server), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        [*command, "-c", str(context_window), "-np", "1", "-t", str(threads)],
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, f"{url}/v1"
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("llama-server did not become ready in 300 s")


def _served_name(base_url: str) -> str:
    """The first model the server lists (llama-server serves one)."""
    models = httpx.get(f"{base_url}/models", timeout=30).json().get("data") or []
    if not models:
        raise SystemExit(f"{base_url}/models lists no model: pass --model-name")
    return str(models[0]["id"])


def _sleuth(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLEUTH_HOME": str(home)}
    env.pop("SLEUTH_MODEL", None)
    return subprocess.run([sys.executable, "-m", "sleuth", *args], env=env, text=True, capture_output=True)


def _config(home: Path, base_url: str, name: str, args: argparse.Namespace) -> str | None:
    """The model as this home's catalog entry `local/bench`, added to its config.toml; returns what the
    file held before (None: no file), for `main` to put back."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    before = path.read_text(encoding="utf-8") if path.exists() else None
    entry = (
        f'[models."{MODEL_ID}"]\nprovider = "openai-compatible"\nmodel = "{name}"\nbase_url = "{base_url}"\n'
        f'api_key = "sk-local"\ncontext_window = {args.context_window}\n'
        f'tool_protocol = "{args.tool_protocol}"\n'
    )
    if args.prompt_profile:  # unset: Sleuth's default for the window (small under 16,384 tokens)
        entry += f'prompt_profile = "{args.prompt_profile}"\n'
    if args.temperature is not None:  # unset: the server's own default (llama-server samples at 0.8)
        entry += f"temperature = {args.temperature}\nseed = {args.seed}\n"
    path.write_text((before + "\n\n" if before else "") + entry, encoding="utf-8")
    return before


def _rows(out: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    summary = json.loads((out / "report.json").read_text(encoding="utf-8"))
    records = [json.loads(line) for line in (out / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    for system in [s["system"] for s in summary["summary"]]:
        mine = [r for r in records if r["system"] == system]
        done = [r for r in mine if r["status"] == "completed" and r["answer"]]
        per = max(1, len(done))
        rows.append(
            {
                "system": system,
                "n": len(mine),
                "completed": len(done),
                "right": sum(1 for r in mine if r["correct"]),
                "unsupported caught": sum(r.get("unsupported", 0) for r in mine),
                "steps": round(sum(r["steps"] for r in mine) / max(1, len(mine)), 1),
                "in tokens / completed": round(sum(r["input_tokens"] for r in done) / per),
                "out tokens / completed": round(sum(r["output_tokens"] for r in done) / per),
                "s / question": round(sum(r["latency_s"] for r in mine) / max(1, len(mine)), 1),
            }
        )
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(row[k]) for k in keys) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", help="an OpenAI-compatible server's /v1 URL")
    parser.add_argument("--model-name", help="the served model's name (default: the first it lists)")
    parser.add_argument("--llama-server", type=Path, help="start this llama-server binary")
    parser.add_argument("--gguf", type=Path, help="the model file for --llama-server")
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--context", default="acme")
    parser.add_argument("--home", type=Path, help="a home that holds --context (default: sample, scratch)")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--context-window", type=int, default=8192)
    parser.add_argument("--tool-protocol", choices=["native", "text"], default="native")
    parser.add_argument("--prompt-profile", choices=["standard", "small"])
    parser.add_argument("--temperature", type=float, help="e.g. 0 for repeatable runs (with --seed)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ids", help="only these question ids, comma-separated")
    parser.add_argument("--threads", type=int, default=1, help="llama-server threads (1 under load)")
    parser.add_argument("--out", type=Path, help="where the eval report goes (default: a scratch folder)")
    args = parser.parse_args()
    server: subprocess.Popen[bytes] | None = None
    if args.llama_server is not None:
        if args.gguf is None:
            parser.error("--llama-server needs --gguf")
        server, base_url = _start_llama(args.llama_server, args.gguf, args.context_window, args.threads)
    elif args.base_url:
        base_url = args.base_url.rstrip("/")
    else:
        parser.error("name a server: --base-url URL, or --llama-server PATH --gguf PATH")
    scratch = Path(tempfile.mkdtemp(prefix="sleuth-real-model-"))
    try:
        name = args.model_name or _served_name(base_url)
        home = args.home or scratch / "home"
        if args.home is None:
            made = _sleuth(
                home,
                "compile",
                str(REPO / "examples" / "acme-corpus"),
                "--context",
                "acme",
                "--manifest",
                str(REPO / "examples" / "acme-manifest.json"),
            )
            if made.returncode != 0:
                raise SystemExit(made.stdout + made.stderr)
        before = _config(home, base_url, name, args)
        out = args.out or scratch / "eval"
        command = ["eval", str(args.questions), "-c", args.context, "--model", MODEL_ID, "--baseline", "rag"]
        command += ["--no-judge", "--out", str(out)] + (["--limit", str(args.limit)] if args.limit else [])
        command += ["--ids", args.ids] if args.ids else []
        began = time.monotonic()
        try:
            ran = _sleuth(home, *command)
        finally:  # a home of the caller's keeps its own config.toml
            if before is None:
                (home / "config.toml").unlink()
            else:
                (home / "config.toml").write_text(before, encoding="utf-8")
        if ran.returncode != 0:
            raise SystemExit(ran.stdout + ran.stderr)
        print(
            f"{name} at {base_url} · {args.questions.name} over {args.context} · "
            f"{time.monotonic() - began:.0f} s"
        )
        print(_table(_rows(out)))
        print(f"report: {out / 'report.md'}")
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
