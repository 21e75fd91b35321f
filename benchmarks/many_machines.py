"""Many machines on one: 2 API servers + 2 workers on a throwaway PostgreSQL against one SQLite process.

    .venv/bin/python benchmarks/many_machines.py [--turns 50] [--pdfs DIR] [--skip-compile] [--storage]

Every figure has its baseline from the same run, on the same machine:
  1. admission → first step event seen on *another* server (p50/p95 over --turns sequential turns),
     against admission → first step event on the one SQLite process;
  2. --turns turns asked at once, split over the 2 servers and run by 2 workers, against the same on
     the one process: completed/s, errors, p95 latency, turns per worker;
  3. compiles: 1 worker vs 2 workers over the same filings, and one curate whose worker is killed
     (SIGKILL) halfway: completed, nothing lost.

With --storage every many-machine row is run a second time with each process on a home of its own,
sharing contexts through a `file://` storage directory (`SLEUTH_STORAGE_URL`) instead of one home.

The offline planner answers (no model), so turns cost what Sleuth itself costs. Processes share the
machine's cores with each other and with PostgreSQL: on a 2-core machine the ratios cannot show a
speed-up; they show what the shape costs, that nothing is lost, and how the work is shared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DEFAULT_PDFS = REPO.parent / "shared" / "data" / "financebench" / "pdfs"
FILINGS = (  # six small filings, 120 pages in all
    "ULTABEAUTY_2023Q4_EARNINGS.pdf",
    "AMCOR_2022_8K_dated-2022-07-01.pdf",
    "AMCOR_2023Q4_EARNINGS.pdf",
    "FOOTLOCKER_2022_8K_dated_2022-08-19.pdf",
    "BESTBUY_2024Q2_10Q.pdf",
    "JOHNSON_JOHNSON_2023_8K_dated-2023-08-30.pdf",
)
QUESTION = "How many days a week can employees work remotely?"

from tests.cluster import Cluster  # noqa: E402
from tests.postgres import Postgres, throwaway_postgres  # noqa: E402

from sleuth.compile.pipeline import compile_context  # noqa: E402
from sleuth.settings import current  # noqa: E402
from sleuth.store.contexts.home import Home  # noqa: E402
from sleuth.store.records.server_db import ServerDB  # noqa: E402
from sleuth.store.records.tasks import TaskStore  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def base_env(home: Path, database_url: str | None, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env["SLEUTH_HOME"] = str(home)
    if database_url:
        env["SLEUTH_DATABASE_URL"] = database_url
    env.update({f"SLEUTH_{k.upper()}": v for k, v in settings.items()})
    return env


@contextmanager
def deployment(
    pg: Postgres | None,
    home: Path,
    logs: Path,
    servers: int,
    workers: int,
    storage: Path | None = None,
    **settings: str,
) -> Iterator[Cluster]:
    """`storage`: a `file://` shared directory; each process then has a home of its own, and `home`'s
    contexts are moved there first (`sleuth share`)."""
    url = pg.create_database("bench") if pg is not None else None
    logs.mkdir(parents=True, exist_ok=True)
    env = base_env(home, url, **settings)
    if storage is not None:
        storage.mkdir(parents=True, exist_ok=True)  # the storage, as a volume mounted there
        env["SLEUTH_STORAGE_URL"] = storage.as_uri()
        subprocess.run([sys.executable, "-m", "sleuth", "share"], env=env, check=True, capture_output=True)
    cluster = Cluster(url or "", home, env, logs=logs)
    try:
        for _ in range(servers):
            cluster.start_server()
        for _ in range(workers):
            cluster.start_worker()
        yield cluster
    finally:
        cluster.close()


def first_step_latency(ask_on: str, stream_on: str) -> float:
    """Seconds from sending the question to seeing its first step event on `stream_on`."""
    began = time.perf_counter()
    response = httpx.post(
        f"{ask_on}/api/query", json={"ask": QUESTION, "scope": ["acme"], "background": True}, timeout=60
    )
    response.raise_for_status()
    query_id = response.json()["id"]
    took: float | None = None
    with httpx.stream("GET", f"{stream_on}/api/queries/{query_id}/events", timeout=120) as stream:
        for line in stream.iter_lines():  # to its end, so turns do not pile up
            if took is None and line == "event: response.step":
                took = time.perf_counter() - began
    if took is None:
        raise RuntimeError(f"{query_id}: no step event")
    return took


def burst(bases: list[str], turns: int) -> dict[str, Any]:
    """`turns` sync questions at once, spread over `bases`; completed/s, errors, latencies."""
    latencies: list[float] = []
    errors: list[str] = []
    ids: list[str] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        began = time.perf_counter()
        try:
            response = httpx.post(
                f"{bases[i % len(bases)]}/api/query", json={"ask": QUESTION, "scope": ["acme"]}, timeout=600
            )
            body = response.json()
            ok = response.status_code == 200 and body.get("status") == "completed"
            with lock:
                if ok:
                    latencies.append(time.perf_counter() - began)
                    ids.append(body["id"])
                else:
                    errors.append(f"{response.status_code} {body.get('code') or body.get('error')}")
        except httpx.HTTPError as exc:
            with lock:
                errors.append(type(exc).__name__)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(turns)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    return {
        "completed": len(latencies),
        "errors": errors,
        "per_s": len(latencies) / wall,
        "p50": pct(latencies, 0.5) if latencies else float("nan"),
        "p95": pct(latencies, 0.95) if latencies else float("nan"),
        "wall": wall,
        "ids": ids,
    }


def per_worker(cluster: Cluster, ids: list[str]) -> str:
    with ServerDB(cluster.database_url, replay_root=cluster.home) as db:
        holders = Counter(str(db.holder(query_id)[0]).split(":")[2] for query_id in ids)
    return ", ".join(f"pid {pid}: {n}" for pid, n in sorted(holders.items()))


def curate(cluster: Cluster, slug: str, files: list[Path], kill_halfway: bool = False) -> dict[str, Any]:
    base = cluster.servers[0]
    with httpx.Client(base_url=base, timeout=120) as client:
        client.post("/api/contexts", json={"slug": slug, "name": slug}).raise_for_status()
        for path in files:
            client.post(
                f"/api/contexts/{slug}/import/upload", files={"file": (path.name, path.read_bytes())}
            ).raise_for_status()
        began = time.perf_counter()
        task_id = client.post(f"/api/contexts/{slug}/curate", json={}).json()["task_id"]
        killed = None
        while True:
            task = client.get(f"/api/tasks/{task_id}").json()
            if kill_halfway and killed is None and (task.get("progress") or {}).get("pct", 0) >= 40:
                with TaskStore(cluster.database_url) as store:
                    holder = (store.get(task_id) or {}).get("worker")
                if holder:
                    killed = int(str(holder).split(":")[2])
                    cluster.kill(killed)
            if task["state"] in ("completed", "failed", "cancelled"):
                break
            time.sleep(0.2)
        took = time.perf_counter() - began
        with TaskStore(cluster.database_url) as store:
            row = store.get(task_id) or {}
        pages = int(((task.get("output") or {}).get("counts") or {}).get("pages") or 0)
    return {
        "state": task["state"],
        "s": took,
        "pages": pages,
        "attempts": row.get("attempts"),
        "killed": killed,
    }


def sample_home(root: Path) -> Path:
    home = root / "sample-home"
    compile_context(
        "acme",
        [REPO / "examples" / "acme-corpus"],
        manifest_file=REPO / "examples" / "acme-manifest.json",
        home=Home(home),
        settings=current(),
    )
    return home


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--pdfs", type=Path, default=DEFAULT_PDFS)
    parser.add_argument("--skip-compile", action="store_true")
    parser.add_argument("--only-compile", action="store_true")
    parser.add_argument("--storage", action="store_true", help="also: homes of their own + file:// storage")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="sleuth-many-"))
    try:
        compiled = sample_home(root)
        settings = {"max_concurrent_turns": "2", "max_queued_turns": "200", "worker_concurrency": "1"}
        with throwaway_postgres() as pg:
            if not args.only_compile:
                turn_tables(pg, compiled, root, settings, args.turns, args.storage)
            if args.skip_compile:
                return
            compile_table(pg, compiled, root, settings, args.pdfs, args.storage)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def turn_tables(
    pg: Postgres, compiled: Path, root: Path, settings: dict[str, str], turns: int, storage: bool = False
) -> None:
    home = root / "sqlite-home"
    shutil.copytree(compiled, home)
    with deployment(None, home, root / "logs-sqlite", 1, 0, **settings) as one:
        for _ in range(3):
            first_step_latency(one.servers[0], one.servers[0])  # warm: sandbox zygote, embedder
        alone = [first_step_latency(one.servers[0], one.servers[0]) for _ in range(turns)]
        single = burst(one.servers, turns)
    latencies = [("1 process, SQLite, same server", alone)]
    bursts = [("1 process, SQLite, 2 turn threads", single)]
    shares = []
    setups = [("one home", None)] + ([("4 homes + file:// storage", root / "shared")] if storage else [])
    for label, shared_dir in setups:
        home = root / f"pg-home-{len(bursts)}"
        shutil.copytree(compiled, home)
        logs = root / f"logs-pg-{len(bursts)}"
        with deployment(pg, home, logs, 2, 2, shared_dir, **settings) as many:
            a, b = many.servers
            for _ in range(3):
                first_step_latency(a, b)
            across = [first_step_latency(a, b) for _ in range(turns)]
            shared = burst(many.servers, turns)
            shares.append(f"{label}: {per_worker(many, shared['ids'])}")
        latencies.append((f"2 servers + 2 workers, PostgreSQL, {label}, asked on A, streamed on B", across))
        bursts.append((f"2 servers + 2 workers × 1, {label}", shared))
    print(f"\n## Admission → first step event ({turns} turns, one at a time)\n")
    print("| setup | p50 ms | p95 ms | p50 added ms |\n|---|---:|---:|---:|")
    for name, values in latencies:
        added = statistics.median(values) - statistics.median(alone)
        p50, p95 = 1000 * pct(values, 0.5), 1000 * pct(values, 0.95)
        print(f"| {name} | {p50:.0f} | {p95:.0f} | {1000 * added:.0f} |")
    print("\np50 added target: ≤ 250 ms")
    print(f"\n## {turns} turns at once\n")
    print("| setup | completed | errors | completed/s | p50 s | p95 s | wall s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in bursts:
        print(
            f"| {name} | {r['completed']} | {len(r['errors'])} | {r['per_s']:.2f} | {r['p50']:.2f} |"
            f" {r['p95']:.2f} | {r['wall']:.1f} |"
        )
    print("\nturns per worker: " + "; ".join(shares))
    errors = [e for _name, r in bursts for e in r["errors"]]
    if errors:
        print(f"errors: {Counter(errors)}")


def compile_table(
    pg: Postgres, compiled: Path, root: Path, settings: dict[str, str], pdfs: Path, storage: bool = False
) -> None:
    files = [pdfs / name for name in FILINGS if (pdfs / name).is_file()]
    print(f"\n## Compile: {len(files)} filings\n")
    print("| setup | state | seconds | pages | pages/s | attempts |\n|---|---|---:|---:|---:|---:|")
    one_thread = {**settings, "worker_concurrency": "1", "embed_threads": "1"}
    rates: list[float] = []
    runs = [(1, False, False), (2, False, False), (2, True, False)]
    if storage:
        runs += [(1, False, True), (2, False, True), (2, True, True)]
    for workers, kill, separate in runs:
        home = root / f"compile-{workers}-{kill}-{separate}"
        shutil.copytree(compiled, home)
        shared_dir = root / f"compile-shared-{workers}-{kill}" if separate else None
        logs = root / f"logs-compile-{workers}-{kill}-{separate}"
        with deployment(pg, home, logs, 1, workers, shared_dir, **one_thread) as c:
            r = curate(c, f"filings-{workers}", files, kill_halfway=kill)
        name = f"{workers} worker(s) × 1 thread" + (", one killed halfway" if kill else "")
        name += ", homes of their own + file:// storage" if separate else ""
        rate = r["pages"] / r["s"] if r["s"] else 0.0
        rates.append(rate)
        print(f"| {name} | {r['state']} | {r['s']:.1f} | {r['pages']} | {rate:.2f} | {r['attempts']} |")
    print(f"\n2 workers / 1 worker: {rates[1] / rates[0]:.2f}× (target ≥ 1.7×)")
    if storage:
        print(f"2 workers / 1 worker, homes of their own: {rates[4] / rates[3]:.2f}×")


if __name__ == "__main__":
    main()
