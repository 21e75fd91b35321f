"""What shared storage costs: contexts on this disk alone against contexts shared through a directory
(`file://`) and through S3 (moto's server on loopback: no network latency, so S3 figures are a floor).

    .venv/bin/python benchmarks/shared_storage.py [--pdfs DIR]

Every figure has its baseline from the same run, on the same machine, in one process:
  1. compile of six FinanceBench filings on node A: seconds and pages/s, local vs shared (the shared
     runs also publish the version and move the head);
  2. first read of that version on node B (a fetch into B's cache), and a second read (cached);
  3. an incremental curate (one source added): bytes uploaded against the version's size;
  4. a context lookup (`Home.find`, which pulls the head): p50/p95 µs, local vs shared.

The database is SQLite here (one process); on PostgreSQL a lookup adds one round trip.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
EXTRA = "JOHNSON_JOHNSON_2023_8K_dated-2023-08-30.pdf"  # added last, for the incremental curate

from many_machines import DEFAULT_PDFS, FILINGS  # noqa: E402  (beside this file: the same six filings)
from tests.s3 import moto_s3  # noqa: E402

from sleuth.compile.pipeline import compile_context  # noqa: E402
from sleuth.settings import current  # noqa: E402
from sleuth.store.contexts.home import Home  # noqa: E402
from sleuth.store.contexts.replica import Replica  # noqa: E402
from sleuth.store.database import open_database  # noqa: E402
from sleuth.store.storage import DirectoryStorage, S3Storage, Storage  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def size_of(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def stored_bytes(storage: Storage | None, root: Path) -> int:
    if storage is None:
        return 0
    if isinstance(storage, DirectoryStorage):
        return size_of(storage.root / "blobs") if (storage.root / "blobs").is_dir() else 0
    client = storage.client  # type: ignore[attr-defined]
    total = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=storage.bucket):  # type: ignore[attr-defined]
        total += sum(int(item["Size"]) for item in page.get("Contents", []) if "/blobs/" in f"/{item['Key']}")
    return total


def timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def run(name: str, root: Path, storage: Storage | None, files: list[Path], extra: Path) -> dict[str, object]:
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    for path in files:
        shutil.copy(path, corpus / path.name)
    if storage is None:
        a = b = Home(root / "node-a")
    else:
        database = open_database(root / "server.sqlite")
        a = Home(root / "node-a", Replica(database, storage))
        b = Home(root / "node-b", Replica(database, storage))
    settings = current()  # read once, as a command does at its start
    began = time.perf_counter()
    report = compile_context("filings", [corpus], home=a, settings=settings)
    compile_s = time.perf_counter() - began
    pages = int(report.counts.get("pages") or 0)
    version = a.find("filings").version_dir(report.version or "")
    ctx_b = b.find("filings")
    first = timed(lambda: ctx_b.version_dir(ctx_b.live_version() or ""))
    second = timed(lambda: ctx_b.version_dir(ctx_b.live_version() or ""))
    before = stored_bytes(storage, root)
    extra_dir = root / "extra"
    extra_dir.mkdir()
    shutil.copy(extra, extra_dir / ("copy-" + extra.name))
    began = time.perf_counter()
    again = compile_context("filings", [extra_dir], home=a, settings=settings)
    incremental_s = time.perf_counter() - began
    uploaded = stored_bytes(storage, root) - before - (extra.stat().st_size if storage is not None else 0)
    new_version = a.find("filings").version_dir(again.version or "")
    lookups = []
    for _ in range(300):
        lookups.append(timed(lambda: b.find("filings")))
    return {
        "name": name,
        "compile_s": compile_s,
        "pages": pages,
        "first_read_s": first,
        "cached_read_s": second,
        "version_mb": size_of(version) / 1e6,
        "incremental_s": incremental_s,
        "uploaded_mb": uploaded / 1e6,  # the new version's files, not the new source itself
        "files": sum(1 for p in new_version.rglob("*") if p.is_file()),
        "new_version_mb": size_of(new_version) / 1e6,
        "lookup_p50_us": 1e6 * statistics.median(lookups),
        "lookup_p95_us": 1e6 * pct(lookups, 0.95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--pdfs", type=Path, default=DEFAULT_PDFS)
    args = parser.parse_args()
    files = [args.pdfs / name for name in FILINGS[:-1] if (args.pdfs / name).is_file()]
    extra = args.pdfs / EXTRA
    if not files or not extra.is_file():
        raise SystemExit(f"the filings are not in {args.pdfs}")
    root = Path(tempfile.mkdtemp(prefix="sleuth-storage-"))
    rows = []
    try:
        # A warm-up compile, so the embedder's load and first-run costs fall on no row.
        run("warm-up", root / "warm", None, files[:1], extra)
        rows.append(run("local home (baseline)", root / "local", None, files, extra))
        rows.append(run("file:// storage", root / "dir", DirectoryStorage(root / "dir-shared"), files, extra))
        with moto_s3() as s3:
            storage = S3Storage(s3.new_bucket(), "bench", client=s3.client())
            rows.append(run("s3:// (moto, loopback)", root / "s3", storage, files, extra))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n## Shared storage: {len(files)} filings, then one more\n")
    print(
        "| setup | compile s | pages/s | first read on B s | cached read ms | version MB |"
        " incremental s | version MB uploaded (of, files) | lookup p50 µs | p95 µs |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['name']} | {r['compile_s']:.1f} | {float(r['pages']) / float(r['compile_s']):.2f} |"  # type: ignore[arg-type]
            f" {r['first_read_s']:.2f} | {1000 * float(r['cached_read_s']):.1f} | {r['version_mb']:.1f} |"  # type: ignore[arg-type]
            f" {r['incremental_s']:.1f} | {r['uploaded_mb']:.2f} ({r['new_version_mb']:.1f}, {r['files']}) |"
            f" {r['lookup_p50_us']:.0f} | {r['lookup_p95_us']:.0f} |"
        )
    print("\nlocal: node B is node A (one home), so its first read is a local one and nothing is uploaded.")


if __name__ == "__main__":
    main()
