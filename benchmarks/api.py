"""Concurrent turns through the HTTP API, next to the same turns run in-process, in one run.

    .venv/bin/python benchmarks/api.py [--turns 50] [--concurrency 4]

Compiles the sample corpus into a scratch home, starts a real `sleuth serve` on 127.0.0.1, sends
`--turns` offline-planner questions at once, synchronously and then again as `background: true` with
polling every 0.2 s (the queue is sized so that all are admitted), and reports p50/p99
latency, errors and the server's peak RSS. Then it runs the same questions in-process through
`Runtime` on a pool of the same size, so the table shows what the HTTP layer adds.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
POLL_S = 0.2  # how often a client polls its background turn
QUESTIONS = [
    "What is the hotel limit per night when travelling?",
    "How many products are in the catalog?",
    "What does ERR-4012 mean?",
    "How many days a week can employees work remotely?",
    "List all products",
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (the sandbox zygote and its turns)."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if status.parent.name == str(pid) or fields.get("PPid", "").strip() == str(pid):
            total += int(fields.get("VmRSS", "0 kB").split()[0])
    return total / 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (its sandboxes are the zygote's children, not its)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    latencies: list[float]
    errors: int
    wall: float
    cpu: float  # CPU seconds of the process that ran the turns (the server, or this one)
    peak_rss: float | None = None
    requests: int = 0


def over_http(home: Path, turns: int, concurrency: int, background: bool) -> Run:
    port = free_port()
    env = {**os.environ, "SLEUTH_HOME": str(home)}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sleuth",
            "serve",
            "--port",
            str(port),
            "--max-concurrent-turns",
            str(concurrency),
            "--max-queued-turns",
            str(max(0, turns - concurrency)),  # every turn is admitted, as in-process
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    peak = 0.0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, rss_mb(server.pid))
            time.sleep(0.2)

    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.2)
        threading.Thread(target=sample, daemon=True).start()
        latencies: list[float] = []
        errors = 0
        refused = [0]
        requests = [0]
        lock = threading.Lock()

        def one(i: int) -> None:
            nonlocal errors
            began = time.perf_counter()
            with httpx.Client(base_url=url, timeout=120) as client:
                body = {"ask": QUESTIONS[i % len(QUESTIONS)], "scope": ["acme"], "background": background}
                created = client.post("/api/query", json=body)
                while created.status_code == 429:  # the queue is full: come back when told to
                    with lock:
                        refused[0] += 1
                    time.sleep(float(created.headers.get("Retry-After", "1")))
                    created = client.post("/api/query", json=body)
                if created.status_code != (202 if background else 200):
                    with lock:
                        errors += 1
                    return
                query = created.json()
                polls = 0
                while query["status"] == "in_progress":
                    time.sleep(POLL_S)
                    query = client.get(f"/api/queries/{query['id']}").json()
                    polls += 1
            with lock:
                requests[0] += 1 + polls
                if query["status"] == "completed":
                    latencies.append(time.perf_counter() - began)
                else:
                    errors += 1

        cpu_before = cpu_s(server.pid)
        began = time.perf_counter()
        with ThreadPoolExecutor(max_workers=turns) as pool:
            list(pool.map(one, range(turns)))
        wall = time.perf_counter() - began
        cpu = cpu_s(server.pid) - cpu_before
        if refused[0]:
            print(f"http: {refused[0]} submissions answered 429 (queue full) and retried after Retry-After")
        return Run(latencies, errors, wall, cpu, peak, requests[0])
    finally:
        stop.set()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def in_process(home: Path, turns: int, concurrency: int) -> Run:
    from sleuth.agent.turn import Runtime, TurnRequest
    from sleuth.store.contexts.home import Home

    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    with Runtime(Home(home)) as runtime:

        def one(i: int, submitted: float) -> None:
            nonlocal errors
            query = runtime.ask(TurnRequest(ask=QUESTIONS[i % len(QUESTIONS)], scope=["acme"]))
            with lock:  # latency from submission, so queueing counts as it does over HTTP
                if query.status == "completed":
                    latencies.append(time.perf_counter() - submitted)
                else:
                    errors += 1

        cpu_before = cpu_s(os.getpid())
        began = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for i in range(turns):
                pool.submit(one, i, time.perf_counter())
        return Run(latencies, errors, time.perf_counter() - began, cpu_s(os.getpid()) - cpu_before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()

    from sleuth.compile.pipeline import compile_context
    from sleuth.settings import current
    from sleuth.store.contexts.home import Home

    home = Path(tempfile.mkdtemp(prefix="sleuth-bench-api-"))
    compile_context(
        "acme",
        [REPO / "examples" / "acme-corpus"],
        REPO / "examples" / "acme-manifest.json",
        home=Home(home),
        settings=current(),
    )

    runs = {
        "http sync": over_http(home, args.turns, args.concurrency, background=False),
        "http background+poll": over_http(home, args.turns, args.concurrency, background=True),
        "in-process": in_process(home, args.turns, args.concurrency),
    }
    base = runs["in-process"]
    print(f"{args.turns} offline-planner turns, {args.concurrency} running at once, sample corpus")
    print(
        f"{'':<22}{'p50 s':>7}{'p99 s':>7}{'wall s':>8}{'errors':>7}{'requests':>9}{'peak RSS MB':>12}"
        f"{'CPU s/turn':>11}{'throughput':>11}"
    )
    for name, run in runs.items():
        rss = "-" if run.peak_rss is None else f"{run.peak_rss:.0f}"
        requests = "-" if not run.requests else str(run.requests)
        print(
            f"{name:<22}{pct(run.latencies, 0.5):>7.2f}{pct(run.latencies, 0.99):>7.2f}{run.wall:>8.1f}"
            f"{run.errors:>7}{requests:>9}{rss:>12}{run.cpu / args.turns:>11.3f}"
            f"{base.wall / run.wall:>10.2f}x"
        )
    print(
        f"(throughput: in-process wall / wall; CPU: the serving process only, its sandboxes excluded; "
        f"background clients poll every {POLL_S} s)"
    )


if __name__ == "__main__":
    main()
