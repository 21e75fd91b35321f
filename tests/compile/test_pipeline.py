"""The compiler end to end on small corpora: layout, failures, incremental runs and crashes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from sleuth.compile import pipeline
from sleuth.compile.manifest import ManifestError
from sleuth.compile.pipeline import compile_context
from sleuth.settings import current
from sleuth.store.contexts.home import Home
from sleuth.store.version import keyword
from sleuth.store.version.keyword import TantivyIndex
from sleuth.store.version.search import VersionReader
from tests.models.slow import NOTES_MANIFEST, SlowModel, catalog_entry, notes
from tests.models.wire import Canned, wire_server
from tests.support import make_pdf


def live_dir(home: Home, slug: str) -> Path:
    ctx = home.find(slug)
    version = ctx.live_version()
    assert version is not None
    return ctx.version_dir(version)


def table(version_dir: Path, sql: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(f"file:{version_dir / 'tables.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def indexed_sources(version_dir: Path) -> set[str]:
    """Sources present in every index: chunk files, keyword index, dense ids, _chunks table."""
    reader = VersionReader(version_dir)
    from_chunks = {c.source_path for c in reader.chunks.values()}
    dense_ids = set(json.loads((version_dir / "index/dense/chunks.ids.json").read_text()))
    assert dense_ids == set(reader.chunks)
    from_keyword = TantivyIndex(version_dir / "index" / "keyword").sources()
    from_table = {r[0] for r in table(version_dir, "SELECT DISTINCT source FROM _chunks")}
    assert from_chunks == from_keyword == from_table
    return from_chunks


def test_first_compile_writes_the_documented_layout(home: Home, corpus: Path) -> None:
    report = compile_context("docs", [corpus], home=home, settings=current())
    assert report.flipped and report.version == "v000001" and report.delta == "changed"
    ctx = home.find("docs")
    assert ctx.live_version() == "v000001"
    root = live_dir(home, "docs")
    for rel in (
        "version.json",
        "tables.sqlite",
        "index/keyword/chunks/meta.json",
        "index/keyword/artifacts/meta.json",
        "index/dense/meta.json",
        "index/dense/chunks.npy",
        "index/dense/chunks.ids.json",
        "index/dense/artifacts.npy",
        "knowledge/rosters/_sources.md",
        "knowledge/outline.json",
        "knowledge/pages/uploads/corpus/report.pdf.jsonl",
        "knowledge/chunks/uploads/corpus/notes/alpha.md.jsonl",
    ):
        assert (root / rel).exists(), rel
    assert (ctx.root / "ledger.json").exists() and (ctx.root / "context.json").exists()
    assert sorted(report.new) == [
        "uploads/corpus/notes/alpha.md",
        "uploads/corpus/notes/beta.txt",
        "uploads/corpus/report.pdf",
        "uploads/corpus/web.html",
    ]
    pages = [
        json.loads(line)
        for line in (root / "knowledge/pages/uploads/corpus/report.pdf.jsonl").read_text().splitlines()
    ]
    assert [p["page"] for p in pages] == [1, 2]
    meta = json.loads((root / "index/dense/meta.json").read_text())
    matrix = np.load(root / "index/dense/chunks.npy")
    assert matrix.shape == (meta["count"]["chunks"], 384) and meta["normalized"]
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-3)
    assert table(root, "SELECT path, title, pages FROM _sources WHERE format = 'pdf'") == [
        ("uploads/corpus/report.pdf", "Delta Report", 2)
    ]
    # The sqlite file is finished in rollback-journal mode, readable from a read-only mount.
    for name in ("tables.sqlite",):
        db = sqlite3.connect(root / name)
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        db.close()
    roster = (root / "knowledge/rosters/_sources.md").read_text()
    assert (
        "name: All Sources" in roster
        and "| uploads/corpus/web.html | Gamma Guide |  |  | html | 1 |" in roster
    )  # no period: none said


def test_second_compile_of_unchanged_corpus_does_no_work(home: Home, corpus: Path) -> None:
    compile_context("docs", [corpus], home=home, settings=current())
    report = compile_context("docs", [corpus], home=home, settings=current())
    assert report.delta == "empty" and not report.flipped and report.version is None
    assert home.find("docs").live_version() == "v000001"
    assert sorted(p.name for p in home.find("docs").versions.iterdir()) == ["v000001"]
    assert "parse" not in report.timings and "embed" not in report.timings


def test_changed_file_is_reprocessed_alone(home: Home, corpus: Path) -> None:
    first = compile_context("docs", [corpus], home=home, settings=current())
    (corpus / "notes" / "beta.txt").write_text("Beta release notes.\nVersion 2.5 adds ZETA-9 export.\n")
    report = compile_context("docs", [corpus], home=home, settings=current())
    assert report.changed == ["uploads/corpus/notes/beta.txt"] and report.version == "v000002"
    assert report.counts["sources_parsed"] == 1
    assert 0 < report.counts["embedded"] < first.counts["embedded"]
    v1, v2 = home.find("docs").version_dir("v000001"), live_dir(home, "docs")
    # Unchanged sources share their page files with the parent version (hard links).
    same = "knowledge/pages/uploads/corpus/report.pdf.jsonl"
    assert os.stat(v1 / same).st_ino == os.stat(v2 / same).st_ino
    hits = VersionReader(v2).search("ZETA-9", mode="keyword")
    assert hits and hits[0].source_path == "uploads/corpus/notes/beta.txt"
    assert not VersionReader(v2).search("BUG-88", mode="keyword")
    # The old version is untouched and still answers the old text.
    assert VersionReader(v1).search("BUG-88", mode="keyword")


def test_deleted_file_leaves_every_index_and_table(home: Home, corpus: Path) -> None:
    compile_context("docs", [corpus], home=home, settings=current())
    assert "uploads/corpus/web.html" in indexed_sources(live_dir(home, "docs"))
    (corpus / "web.html").unlink()
    report = compile_context("docs", [corpus], home=home, settings=current())
    assert report.deleted == ["uploads/corpus/web.html"]
    root = live_dir(home, "docs")
    assert "uploads/corpus/web.html" not in indexed_sources(root)
    assert table(root, "SELECT count(*) FROM _sources WHERE path LIKE '%web.html'") == [(0,)]
    assert not (home.find("docs").sources / "uploads/corpus/web.html").exists()
    assert not VersionReader(root).search("refund process", mode="keyword")
    ledger = json.loads(home.find("docs").ledger_file.read_text())
    assert "uploads/corpus/web.html" not in ledger["manifest"]
    assert ledger["source_removed"]["uploads/corpus/web.html"]["removed_version"] == "v000002"


def test_bad_files_are_recorded_and_the_rest_compiles(home: Home, corpus: Path) -> None:
    (corpus / "bad.pdf").write_bytes(b"%PDF-1.7 not really")
    (corpus / "empty.md").write_bytes(b"")
    (corpus / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0 jpeg")
    (corpus / "legacy.txt").write_bytes("na\u00efve".encode("latin-1"))
    make_pdf(corpus / "locked.pdf", ["top secret"], password="pw")
    report = compile_context("docs", [corpus], home=home, settings=current())
    assert report.flipped
    got = {p.rsplit("/", 1)[-1]: (f["status"], f["reason"].split(":")[0]) for p, f in report.failures.items()}
    assert got == {
        "bad.pdf": ("failed", "corrupt"),
        "empty.md": ("skipped", "empty"),
        "photo.jpg": ("skipped", "unsupported format"),
        "legacy.txt": ("failed", "bad encoding"),
        "locked.pdf": ("failed", "encrypted"),
    }
    assert report.counts["sources_compiled"] == 4
    ledger = json.loads(home.find("docs").ledger_file.read_text())
    assert ledger["failures"]["uploads/corpus/locked.pdf"]["reason"] == "encrypted"
    # Fixing a file lets it compile next time; its failure entry goes away.
    (corpus / "legacy.txt").write_text("now in utf-8: naïve")
    again = compile_context("docs", [corpus], home=home, settings=current())
    assert "uploads/corpus/legacy.txt" not in again.failures
    assert "uploads/corpus/legacy.txt" in indexed_sources(live_dir(home, "docs"))


def test_a_changed_file_that_breaks_keeps_its_previous_outputs(home: Home, corpus: Path) -> None:
    compile_context("docs", [corpus], home=home, settings=current())
    (corpus / "report.pdf").write_bytes(b"%PDF-1.7 truncated")
    report = compile_context("docs", [corpus], home=home, settings=current())
    assert report.failures["uploads/corpus/report.pdf"]["status"] == "failed"
    assert "uploads/corpus/report.pdf" in indexed_sources(live_dir(home, "docs"))


def test_crash_mid_compile_leaves_previous_version_live(
    home: Home, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compile_context("docs", [corpus], home=home, settings=current())
    (corpus / "notes" / "alpha.md").write_text("# Alpha\n\nRewritten: laptops ship by courier.\n")

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(keyword, "build", boom)
    with pytest.raises(OSError, match="disk full"):
        compile_context("docs", [corpus], home=home, settings=current())
    ctx = home.find("docs")
    assert ctx.live_version() == "v000001"
    assert (ctx.versions / "v000002.building").is_dir()
    hits = VersionReader.live(ctx).search("laptop on day one", mode="keyword")
    assert hits and hits[0].source_path.endswith("alpha.md")
    monkeypatch.undo()
    report = compile_context("docs", [corpus], home=home, settings=current())
    assert report.flipped and report.changed == ["uploads/corpus/notes/alpha.md"]
    assert not any(p.name.endswith(".building") for p in ctx.versions.iterdir())
    assert VersionReader.live(ctx).search("courier", mode="keyword")


def test_killed_compile_process_leaves_previous_version_live(
    home: Home, corpus: Path, tmp_path: Path
) -> None:
    """The compile is killed while it waits on its model (3 s a call, `tests/models/slow.py`)."""
    compile_context("docs", [corpus], home=home, settings=current())
    for name, text in notes(4, seed=3).items():
        (corpus / name).write_text(text)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(NOTES_MANIFEST))
    model = SlowModel(step_s=1.0, extraction_s=3.0)
    with wire_server(Canned(500, {}), "/v1", model) as llm:
        (home.root / "config.toml").write_text(
            catalog_entry(llm.url),
            encoding="utf-8",
        )
        env = {**os.environ, "SLEUTH_HOME": str(home.root)}
        argv = [
            "compile",
            str(corpus),
            "--context",
            "docs",
            "--manifest",
            str(manifest),
            "--model",
            "test/slow",
        ]
        proc = subprocess.Popen(
            [sys.executable, "-m", "sleuth", *argv],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        ctx = home.find("docs")
        deadline = time.time() + 60
        while time.time() < deadline and not (llm.requests and (ctx.versions / "v000002.building").exists()):
            time.sleep(0.05)
        assert proc.poll() is None, "the compile finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert ctx.live_version() == "v000001"
        assert VersionReader.live(ctx).search("laptop", mode="keyword")
        model.extraction_s = 0.0
        report = compile_context("docs", [corpus], manifest, home=home, model="test/slow", settings=current())
    assert report.flipped and len(report.new) == 4
    assert ctx.live_version() == report.version


def test_force_rebuilds_everything_but_reuses_vectors(home: Home, corpus: Path) -> None:
    compile_context("docs", [corpus], home=home, settings=current())
    report = compile_context("docs", [corpus], home=home, force=True, settings=current())
    assert report.flipped and report.counts["sources_parsed"] == 4
    assert report.counts["embedded"] == 0 and report.counts["embedded_from_cache"] > 0


def test_manifest_change_rechunks_without_reembedding_unchanged_text(
    home: Home, corpus: Path, tmp_path: Path
) -> None:
    compile_context("docs", [corpus], home=home, settings=current())
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"search": {"instructions": "Be terse."}}))
    report = compile_context("docs", [corpus], manifest, home=home, settings=current())
    assert report.delta == "empty"  # search-only changes trigger no work
    manifest.write_text(json.dumps({"curate": {"chunks": {"chunking": {"target_size": 64, "overlap": 0}}}}))
    report = compile_context("docs", [corpus], manifest, home=home, settings=current())
    assert report.flipped and report.counts["sources_parsed"] == 0
    chunks = VersionReader(live_dir(home, "docs")).chunks.values()
    assert max(c.tokens for c in chunks) <= 64


def test_invalid_manifest_is_rejected_before_anything_is_written(
    home: Home, corpus: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"curate": {"chunks": {"chunking": {"overlap": 9999}}}}))
    with pytest.raises(ManifestError, match=r"curate\.chunks\.chunking\.overlap"):
        compile_context("docs", [corpus], bad, home=home, settings=current())
    assert home.contexts() == []


def test_sources_are_mirrored_and_archives_checked(home: Home, tmp_path: Path) -> None:
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("good/readme.md", "# Readme\n\nSafe content HELLO-1.\n")
        z.writestr("../escape.md", "# Escape\n")
        z.writestr("/abs.md", "# Abs\n")
    tarball = tmp_path / "more.tar.gz"
    link_target = tmp_path / "plain.txt"
    link_target.write_text("linked")
    with tarfile.open(tarball, "w:gz") as t:
        t.add(link_target, arcname="plain.txt")
        info = tarfile.TarInfo("evil-link")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        t.addfile(info)
    report = compile_context("bundle", [archive, tarball], home=home, settings=current())
    ctx = home.find("bundle")
    stored = sorted(p.relative_to(ctx.sources).as_posix() for p in ctx.sources.rglob("*") if p.is_file())
    assert stored == ["uploads/bundle/good/readme.md", "uploads/more/plain.txt"]
    skipped = {s["path"] for s in report.imported["skipped"]}
    assert skipped == {"../escape.md", "/abs.md", "evil-link"}
    assert not (ctx.root / "escape.md").exists() and not (ctx.sources / "escape.md").exists()


def test_oversized_sources_are_counted_as_skipped(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file over `max_file_bytes` is left out at import, and the report says so as for any skipped
    source: in `failures` with its reason and in `counts.sources_skipped` (it was only in `imported`)."""
    monkeypatch.setenv("SLEUTH_MAX_FILE_BYTES", "1000")
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "small.md").write_text("# Small\n\nA short note about laptops.\n")
    (drop / "big.txt").write_text("laptop " * 300)  # 2,100 bytes
    (drop / "empty.txt").write_text("")  # skipped by the parser: counted the same way
    bundle = tmp_path / "bundle.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr("note.md", "# Note\n\nA second note.\n")
        z.writestr("huge.md", "x" * 5000)
    report = compile_context("drop", [drop, bundle], home=home, settings=current())
    assert report.failures["uploads/drop/big.txt"] == {
        "version": report.version,
        "status": "skipped",
        "reason": "file too large (2100 bytes > 1000)",
    }
    assert report.failures["huge.md"]["reason"] == "file too large (5000 bytes > 1000)"
    assert report.failures["uploads/drop/empty.txt"]["status"] == "skipped"
    assert report.counts["sources_skipped"] == 3 and report.counts["sources_compiled"] == 2
    stored = sorted(p.name for p in home.find("drop").sources.rglob("*") if p.is_file())
    assert stored == ["empty.txt", "note.md", "small.md"]

    # nothing changed: the skip is still reported
    again = compile_context("drop", [drop], home=home, settings=current())
    assert again.delta == "empty" and again.counts["sources_skipped"] == 2  # big.txt and empty.txt
    assert again.failures["uploads/drop/big.txt"]["status"] == "skipped"


def test_a_compile_runs_on_the_settings_handed_in_not_the_environment(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41 (5): the settings are read once, where the command or server starts; a compile never
    reads the environment again, so a variable changed later does not change what it does."""
    monkeypatch.setenv("SLEUTH_MAX_FILE_BYTES", "1000")
    settings = current()
    monkeypatch.setenv("SLEUTH_MAX_FILE_BYTES", "10")  # too late for this compile
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "note.md").write_text("# Note\n\nA short note about laptops.\n")
    (drop / "big.txt").write_text("laptop " * 300)  # 2,100 bytes
    report = compile_context("drop", [drop], home=home, settings=settings)
    assert report.failures["uploads/drop/big.txt"]["reason"] == "file too large (2100 bytes > 1000)"
    assert report.counts["sources_compiled"] == 1  # note.md: under 1,000 bytes, over 10


def test_collect_keeps_live_and_predecessor(
    home: Home, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "TURN_CAP_SECONDS", -1)
    for i in range(4):
        (corpus / "notes" / "beta.txt").write_text(f"Beta notes revision {i}.\n")
        compile_context("docs", [corpus], home=home, settings=current())
    names = sorted(p.name for p in home.find("docs").versions.iterdir())
    assert names == ["v000003", "v000004"]


def test_cli_compile_inspect_contexts_and_search(home: Home, corpus: Path) -> None:
    env = {**os.environ, "SLEUTH_HOME": str(home.root)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sleuth", *args], env=env, capture_output=True, text=True, timeout=300
        )

    done = run("compile", str(corpus), "--context", "cli-docs", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["version"] == "v000001"
    listing = run("contexts", "--json")
    assert json.loads(listing.stdout)[0]["slug"] == "cli-docs"
    inspected = json.loads(run("inspect", "cli-docs", "--json").stdout)
    assert inspected["live_version"] == "v000001" and inspected["index_bytes"]["dense"] > 0
    assert {s["path"] for s in inspected["sources"]} >= {"uploads/corpus/report.pdf"}
    found = run("search", "--context", "cli-docs", "--mode", "keyword", "HW-1107")
    assert "alpha.md" in found.stdout
    missing = run("inspect", "nope")
    assert missing.returncode == 1 and "no context 'nope' in " in missing.stderr
    bad_name = run("compile", str(corpus), "--context", "Bad Name!")
    assert bad_name.returncode == 2 and "invalid context name" in bad_name.stderr


def test_one_compile_per_context_at_a_time(home: Home, corpus: Path) -> None:
    from sleuth.store.contexts.lock import CurateInFlight, curate_lock

    compile_context("docs", [corpus], home=home, settings=current())
    ctx = home.find("docs")
    with curate_lock(ctx.lock_file), pytest.raises(CurateInFlight):
        compile_context("docs", [corpus], home=home, settings=current())
    assert compile_context("docs", [corpus], home=home, settings=current()).delta == "empty"


def test_a_new_text_normaliser_reparses_every_source(home: Home, corpus: Path) -> None:
    """Page text stored under older normalising rules is re-parsed once (`pages.TEXT_VERSION`), so it
    agrees with new chunks; a compile after that does no work again."""
    from sleuth.compile.pages import TEXT_VERSION
    from sleuth.store.contexts.ledger import Ledger

    compile_context("docs", [corpus], home=home, settings=current())
    ledger_file = home.find("docs").ledger_file
    ledger = Ledger.load(ledger_file)
    assert ledger.leg_hashes["text"] == TEXT_VERSION
    ledger.leg_hashes["text"] = TEXT_VERSION - 1  # as an older Sleuth left it
    ledger.save(ledger_file)
    report = compile_context("docs", [corpus], home=home, settings=current())
    assert report.flipped and not report.unchanged and sorted(report.changed) == sorted(ledger.manifest)
    assert compile_context("docs", [corpus], home=home, settings=current()).delta == "empty"
