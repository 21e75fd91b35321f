"""Sandbox start-up, step round trip and memory, next to a fresh interpreter in the same run.

    sudo .venv/bin/python benchmarks/sandbox.py [--starts 60] [--steps 300]

Prints p50/p90 of (a) a turn start from the zygote until the sandbox reports ready with every
layer applied, (b) a fresh `python -c 'import sleuth.sdk.knowledge'` interpreter, (c) the round
trip of `exec("pass")`, and the proportional memory (Pss) of live sandboxes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pss_kb(pid: int) -> int:
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
        if fields.get("PPid", "").strip() == str(pid) or status.parent.name == str(pid):
            try:
                rollup = (status.parent / "smaps_rollup").read_text()
            except OSError:
                continue
            for line in rollup.splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--starts", type=int, default=60)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--live", type=int, default=10)
    args = parser.parse_args()

    from sleuth.sandbox import SandboxHost

    version = Path(tempfile.mkdtemp(prefix="sleuth-bench-ctx-"))  # an empty context version is enough here
    version.chmod(0o755)
    (version / "version.json").write_text('{"embedder": {"id": "minilm-l6-v2-int8"}}')
    with SandboxHost() as host:
        began = time.perf_counter()
        with host.start_turn({"bench": version}) as first:
            mode = first.ready
        zygote_first = (time.perf_counter() - began) * 1000

        starts: list[float] = []
        for _ in range(args.starts):
            began = time.perf_counter()
            sandbox = host.start_turn({"bench": version})
            starts.append((time.perf_counter() - began) * 1000)
            sandbox.close()

        fresh: list[float] = []
        for _ in range(max(10, args.starts // 5)):
            began = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import sleuth.sdk.knowledge"], check=True)
            fresh.append((time.perf_counter() - began) * 1000)

        with host.start_turn({"bench": version}) as sandbox:
            for _ in range(20):
                sandbox.exec("pass")
            trips = [sandbox.exec("pass").round_trip_ms for _ in range(args.steps)]
            prints = [sandbox.exec("print('x' * 9000)").round_trip_ms for _ in range(50)]

        live = [host.start_turn({"bench": version}) for _ in range(args.live)]
        for sandbox in live:
            sandbox.exec("import numpy as np\nx = np.arange(1000).sum()")
        zygote_pid = int(host.info["pid"])
        per_sandbox = [pss_kb(s.pid) for s in live]
        for sandbox in live:
            sandbox.close()

    p50_start, p50_fresh = statistics.median(starts), statistics.median(fresh)
    layers = ", ".join(mode["layers"])
    print(f"\nsandbox mode: {mode['mode']}; layers: {layers}; landlock ABI {mode['landlock_abi']}")
    print(f"zygote start + first turn: {zygote_first:.0f} ms (once per server)\n")
    print("| measure | p50 | p90 | n |")
    print("|---|---|---|---|")
    print(
        f"| turn start (fork → all layers → ready) | {p50_start:.1f} ms | {pct(starts, 0.9):.1f} ms "
        f"| {len(starts)} |"
    )
    print(
        f"| fresh `python -c 'import sleuth.sdk.knowledge'` | {p50_fresh:.1f} ms | {pct(fresh, 0.9):.1f} ms "
        f"| {len(fresh)} |"
    )
    print(f"| speed-up of the zygote | {p50_fresh / p50_start:.1f}× | | |")
    print(
        f"| step round trip `exec('pass')` | {statistics.median(trips):.3f} ms "
        f"| {pct(trips, 0.9):.3f} ms | {len(trips)} |"
    )
    print(
        f"| step printing 9 kB | {statistics.median(prints):.3f} ms | {pct(prints, 0.9):.3f} ms "
        f"| {len(prints)} |"
    )
    print(
        f"| Pss per live sandbox ({args.live} live, numpy used) "
        f"| {statistics.median(per_sandbox) / 1024:.1f} MiB | {max(per_sandbox) / 1024:.1f} MiB (max) "
        f"| {args.live} |"
    )
    print(f"\n(zygote pid {zygote_pid})")


if __name__ == "__main__":
    main()
