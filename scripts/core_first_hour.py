"""The README's first hour, run as a user installs Sleuth: the core package, no extras (issue 39).

`make test` installs every extra for the suite, so the suite cannot see a command that needs one.
`make core-check` builds `.venv-core` with `pip install -e .` alone and runs this script with its
Python: compile the sample corpus, ask, serve (health, the console page, one query through the API),
and `sleuth mcp` over stdio (initialize, list the tools, one call). Each step prints one line; the
first that fails stops the run with exit 1 and what it saw.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import TextContent

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SLEUTH = str(BIN / "sleuth")
QUESTION = "How many days a week can employees work remotely?"
EXTRAS = ("procrastinate", "psycopg", "boto3", "usearch", "trafilatura", "openai", "anthropic", "pytest")


class StepFailed(Exception):
    pass


def check(ok: bool, what: str) -> None:
    if not ok:
        raise StepFailed(what)


def run(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [SLEUTH, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT
    )
    check(done.returncode == 0, f"sleuth {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def step_core_only(_env: dict[str, str]) -> str:
    import importlib.util

    present = [name for name in EXTRAS if importlib.util.find_spec(name) is not None]
    check(not present, f"this environment is not core-only: {present} installed")
    return "no optional package installed"


def step_compile(env: dict[str, str]) -> str:
    run(
        [
            "compile",
            "examples/acme-corpus",
            "--context",
            "acme",
            "--manifest",
            "examples/acme-manifest.json",
        ],
        env,
    )
    return "examples/acme-corpus compiled"


def step_ask(env: dict[str, str]) -> str:
    done = run(["ask", "--context", "acme", QUESTION], env)
    check("[1]" in done.stdout and "three" in done.stdout.lower(), f"no cited answer:\n{done.stdout[-2000:]}")
    return "answered with a citation"


def step_serve(env: dict[str, str]) -> str:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [SLEUTH, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                output = server.stdout.read() if server.stdout else ""
                raise StepFailed(f"sleuth serve exited {server.returncode}:\n{output[-3000:]}")
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            check(time.monotonic() < deadline, "sleuth serve did not answer /healthz within 120 s")
            time.sleep(0.3)
        page = httpx.get(f"{base}/", timeout=30)
        check(page.status_code == 200 and "<html" in page.text.lower(), f"console page: {page.status_code}")
        answer = httpx.post(f"{base}/api/query", json={"ask": QUESTION, "scope": ["acme"]}, timeout=300)
        check(answer.status_code == 200, f"POST /api/query: {answer.status_code} {answer.text[:500]}")
        body = answer.json()
        check(body["status"] == "completed" and body["citations"], f"the turn: {json.dumps(body)[:1000]}")
        return f"health, console page, one query ({len(body['citations'])} citations)"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def step_mcp(env: dict[str, str]) -> str:
    params = StdioServerParameters(command=SLEUTH, args=["mcp"], env=env, cwd=str(ROOT))
    seen: dict[str, object] = {}

    async def main() -> None:
        with anyio.fail_after(180):
            async with Client(params) as client:
                seen["tools"] = len((await client.list_tools()).tools)
                result = await client.call_tool("list_contexts", {})
                check(not result.is_error, f"list_contexts failed: {result.content}")
                block = result.content[0]
                check(isinstance(block, TextContent), f"list_contexts returned {block!r}")
                assert isinstance(block, TextContent)
                seen["contexts"] = [c["slug"] for c in json.loads(block.text)]

    anyio.run(main)
    check(seen.get("contexts") == ["acme"], f"list_contexts: {seen}")
    return f"initialize, {seen['tools']} tools listed, list_contexts -> {seen['contexts']}"


STEPS: list[tuple[str, Callable[[dict[str, str]], str]]] = [
    ("core only", step_core_only),
    ("compile", step_compile),
    ("ask", step_ask),
    ("serve", step_serve),
    ("mcp", step_mcp),
]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="sleuth-core-") as home:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("SLEUTH_", "OPENAI_", "ANTHROPIC_"))
        }
        env["SLEUTH_HOME"] = home
        for name, step in STEPS:
            began = time.monotonic()
            try:
                said = step(env)
            except (StepFailed, subprocess.TimeoutExpired, httpx.HTTPError, TimeoutError) as exc:
                print(f"core first hour: {name}: FAILED: {exc}", flush=True)
                return 1
            print(f"core first hour: {name}: ok ({said}; {time.monotonic() - began:.1f} s)", flush=True)
    print("core first hour: every step passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
