"""`sleuth compile` for a new user (issue 39, items C and D): a context is curated again from its own
sources under a new manifest, and the summary says what happened: vectors counted in one unit, only
compiled sources counted as new, pypdf's complaints kept in the source's problem, and no note about
the `lite` tier when nothing is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.compile.extraction.choose import curation_model
from sleuth.compile.manifest import parse_manifest
from sleuth.compile.pages import ParseError
from sleuth.compile.parse import parse_source
from sleuth.models.catalog import Catalog
from sleuth.settings import DEFAULTS
from sleuth.store.contexts.home import Home

LONG = " ".join(
    f"Clause {n}: the supplier delivers batch {n} of the sensor housings to the Lyon plant within "
    f"{n + 3} working days, and the buyer inspects each batch before payment is released."
    for n in range(40)
)


def _docs(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "contract.md").write_text(f"# Supply contract\n\n## Delivery\n\n{LONG}\n", encoding="utf-8")
    (root / "leave.md").write_text("# Leave\n\nEmployees take 25 days of leave a year.\n", encoding="utf-8")
    return root


def test_vectors_embedded_and_from_cache_are_counted_in_one_unit(tmp_path: Path, home: Home) -> None:
    runner = CliRunner()
    docs = _docs(tmp_path / "docs")
    manifest = tmp_path / "manifest.json"  # 512-token chunks: the long section's are two windows each
    manifest.write_text(json.dumps({"curate": {"chunks": {"chunking": {"target_size": 512}}}}))
    first = runner.invoke(app, ["compile", str(docs), "-c", "one", "--json", "--manifest", str(manifest)])
    assert first.exit_code == 0, first.output
    counts = json.loads(first.stdout)["counts"]
    # a chunk longer than the embedder's window has several vectors: more vectors than chunks
    assert counts["embedded"] > counts["chunks"] + counts["artifacts"], counts
    assert counts["embedded_from_cache"] == 0  # was chunks + artifacts - vectors: below zero
    meta = json.loads(
        next((home.find("one").root / "versions").glob("v*/index/dense/meta.json")).read_text("utf-8")
    )
    assert counts["embedded"] == meta["count"]["chunk_vectors"] + meta["count"]["artifacts"]

    again = runner.invoke(app, ["compile", str(docs), "-c", "two", "--manifest", str(manifest)])  # all cached
    assert again.exit_code == 0, again.output
    assert f"vectors: 0 embedded, {counts['embedded']} from cache" in again.output
    assert "-" not in again.output.split("vectors:", 1)[1].split(";", 1)[0]


def test_only_compiled_sources_count_and_pypdf_says_nothing_on_stderr(tmp_path: Path, home: Home) -> None:
    runner = CliRunner()
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "policy.md").write_text("# Leave\n\nEmployees take 25 days of leave a year.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\ngarbage")
    (docs / "broken-too.pdf").write_bytes(b"%PDF-1.7\n%%EOF")
    partial = runner.invoke(app, ["compile", str(docs), "-c", "notes"])
    assert partial.exit_code == 1, partial.output
    assert "1 of 3 sources compiled (1 new, 0 changed, 0 deleted)" in partial.stdout
    assert "EOF marker not found" not in partial.stderr  # pypdf's log line does not leak …
    assert "broken.pdf: corrupt:" in partial.stdout and "(pypdf: EOF marker not found" in partial.stdout

    (docs / "policy.md").write_text("# Leave\n\nEmployees take 30 days of leave a year.\n")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 still not a PDF")
    changed = runner.invoke(app, ["compile", str(docs), "-c", "notes"])
    assert changed.exit_code == 1, changed.output
    assert "1 of 3 sources compiled (0 new, 1 changed, 0 deleted)" in changed.stdout


def test_pypdf_complaints_become_the_sources_problem(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\n1 0 obj\n<<>>\nendobj\ngarbage")
    with pytest.raises(ParseError) as caught:
        parse_source(broken, max_text_bytes=DEFAULTS.max_text_bytes)
    assert caught.value.status == "failed" and "pypdf: EOF marker not found" in caught.value.reason
    assert capfd.readouterr().err == ""


def test_the_lite_tier_note_only_when_a_model_is_configured(tmp_path: Path) -> None:
    manifest = parse_manifest(
        {
            "curate": {
                "artifacts": {"artifact_types": [{"name": "Person", "kind": "entity", "description": "x"}]}
            }
        }
    )
    assert curation_model(manifest, Catalog.from_dict({}, env={})) == (None, None)  # nothing is wrong
    (tmp_path / "config.toml").write_text(
        '[models."local/qwen"]\nprovider = "openai-compatible"\nbase_url = "http://127.0.0.1:8080/v1"\n'
        'model = "qwen"\n',
        encoding="utf-8",
    )
    config, note = curation_model(manifest, Catalog.load(tmp_path, env={}))
    assert config is None and note is not None
    assert f"which {tmp_path / 'config.toml'} does not map" in note  # the file to edit …
    assert '`lite = "<model id>"` under [tiers]' in note and "local/qwen" in note  # … what to write
    assert "sleuth compile --model" in note


def test_compile_without_sources_curates_the_context_again(tmp_path: Path, home: Home) -> None:
    runner = CliRunner()
    docs = _docs(tmp_path / "docs")
    assert runner.invoke(app, ["compile", str(docs), "-c", "kb"]).exit_code == 0
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"curate": {"chunks": {"chunking": {"target_size": 128}}}}))
    before = json.loads(runner.invoke(app, ["inspect", "kb", "--json"]).stdout)["counts"]["chunks"]

    again = runner.invoke(app, ["compile", "--context", "kb", "--manifest", str(manifest)])
    assert again.exit_code == 0, again.output
    assert (
        "kb: version v000002 is live — 2 of 2 sources compiled (0 new, 0 changed, 0 deleted)" in again.output
    )
    data = json.loads(runner.invoke(app, ["inspect", "kb", "--json"]).stdout)
    assert data["manifest"]["curate"]["chunks"]["chunking"]["target_size"] == 128  # the new one, pinned
    assert data["counts"]["chunks"] > before and len(data["sources"]) == 2  # re-chunked, sources kept

    missing = runner.invoke(app, ["compile", "--context", "nope", "--manifest", str(manifest)])
    assert missing.exit_code == 2, missing.output
    assert "no sources to compile: name the files or folders to compile into 'nope'" in missing.stderr
    assert home.contexts()[0][1].slug == "kb" and len(home.contexts()) == 1  # nothing made
