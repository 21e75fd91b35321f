"""Curation with a model on the sample corpus: what it built, what it cost, what the profile said.

    .venv/bin/python benchmarks/curation.py --model local/qwen2.5-coder-1.5b [--home DIR] [--skip-eval]

Run by hand, never in CI: it needs a model (for the local one, spec/local-llm.md). In one run:
  1. compile the minutes and policies of examples/acme-corpus without a model (context `plain`),
  2. profile a curate of the same sources with the model (nothing spent),
  3. compile them with the model (context `curated`), timing the run,
  4. print per type: built, screened (and why), errored, quotes verified and rejected, calls, tokens,
     seconds, next to the profile's low–high estimate,
  5. unless --skip-eval, `sleuth eval benchmarks/curation/questions.jsonl` on both contexts with the
     offline planner (the same planner for both): accuracy, steps, evidence tokens shown.
The model's entry comes from `$HOME_DIR/config.toml`; --config copies one there first.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HERE = REPO / "benchmarks" / "curation"
SUBSET = ("minutes", "policies")


def corpus(into: Path) -> Path:
    folder = into / "acme-subset"
    for part in SUBSET:
        shutil.copytree(REPO / "examples" / "acme-corpus" / part, folder / part, dirs_exist_ok=True)
    return folder


def band(b: Any) -> str:
    """A profile band as `low-high` (or one number)."""
    if b is None:
        return ""
    return f"{b.low:,.0f}" if b.low == b.high else f"{b.low:,.0f}-{b.high:,.0f}"


def run_eval(home: Path, context: str) -> dict[str, Any]:
    env = {**os.environ, "SLEUTH_HOME": str(home), "SLEUTH_MODEL": "sleuth/offline"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sleuth",
            "eval",
            str(HERE / "questions.jsonl"),
            "-c",
            context,
            "--json",
            "--out",
            str(home / "eval" / context),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(out.stdout[out.stdout.index("[") :])
    return next(r for r in rows if r.get("system") == "sleuth")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--model", required=True, help="catalog id, tier or spec of the extraction model")
    parser.add_argument("--home", type=Path, default=None, help="SLEUTH_HOME to use (default: a fresh one)")
    parser.add_argument("--config", type=Path, default=None, help="a config.toml to copy into the home")
    parser.add_argument("--skip-eval", action="store_true")
    args = parser.parse_args()
    home_dir = args.home or Path(tempfile.mkdtemp(prefix="sleuth-curation-"))
    home_dir.mkdir(parents=True, exist_ok=True)
    if args.config is not None:
        shutil.copy(args.config, home_dir / "config.toml")
    os.environ["SLEUTH_HOME"] = str(home_dir)

    from sleuth.compile.archives import SourceLimits
    from sleuth.compile.extract import NoModelExtractor
    from sleuth.compile.extraction.cache import ExtractionCache
    from sleuth.compile.extraction.choose import choose_extractor, curation_model
    from sleuth.compile.extraction.profile import current_pages, profile_curate
    from sleuth.compile.manifest import parse_manifest
    from sleuth.compile.pipeline import compile_context
    from sleuth.compile.sources import import_sources
    from sleuth.models.catalog import Catalog
    from sleuth.settings import current
    from sleuth.store.contexts.home import Home

    settings = current()  # read once, at the benchmark's start, as a command does
    home = Home(home_dir)
    folder = corpus(home_dir / "input")
    manifest_file = HERE / "manifest.json"
    began = time.perf_counter()
    plain = compile_context(
        "plain", [folder], manifest_file, home=home, extractor=NoModelExtractor(), settings=settings
    )
    plain_s = time.perf_counter() - began

    catalog = Catalog.load(home.root)
    ctx, _ = home.find_or_create("curated")
    ctx.manifest_file.write_text(manifest_file.read_text())
    import_sources(ctx.sources, [folder], SourceLimits.of_settings(settings))
    manifest = parse_manifest(json.loads(manifest_file.read_text()))
    config, note = curation_model(manifest, catalog, args.model)
    assert config is not None, note
    estimate = profile_curate(
        manifest,
        current_pages(ctx, max_text_bytes=settings.max_text_bytes),
        config,
        ExtractionCache(ctx.extraction_cache),
        concurrency=settings.curate_concurrency,
    )
    choice = choose_extractor(ctx, manifest, catalog, settings=settings, model=args.model)
    began = time.perf_counter()
    report = compile_context("curated", home=home, extractor=choice.extractor, settings=settings)
    curated_s = time.perf_counter() - began
    extraction = report.counts["extraction"]

    print(f"model {extraction['model']}; {report.counts['sources_compiled']} sources; home {home_dir}")
    print(f"compile without a model: {plain_s:.1f} s; with the model: {curated_s:.1f} s")
    est = {t.type: t for t in estimate.types}
    header = ("type", "built", "screened", "errored", "quotes ok", "rejected", "calls", "est. calls")
    header += ("tokens in", "est. in", "tokens out", "est. out", "s", "est. s")
    print(" | ".join(header))
    for name, t in extraction["types"].items():
        e = est.get(name)
        row = [name, t["built"], t["screened"], t["errored"], t["quotes_verified"], t["quotes_rejected"]]
        row += [
            t["calls"],
            band(e.calls if e else None),
            t["input_tokens"],
            band(e.input_tokens if e else None),
        ]
        row += [t["output_tokens"], band(e.output_tokens if e else None), round(t["seconds"])]
        row += [band(e.seconds if e else None)]
        print(" | ".join(str(v) for v in row))
        if t.get("reasons"):
            print(f"    screened: {t['reasons']}")
    total = estimate.total
    print(
        f"total: {extraction['calls']} calls, {extraction['input_tokens']} in, "
        f"{extraction['output_tokens']} out; estimate {band(total.calls)} calls, {band(total.seconds)} s"
    )
    for error in extraction["errors"]:
        print(f"error: {error}")
    print(
        "sample queries:", report.counts.get("sample_queries") or home.find("curated").info().sample_queries
    )
    print("artifacts by type:", report.counts["artifacts_by_type"], "rows:", report.counts["rows_by_table"])
    if not args.skip_eval:
        for context in ("plain", "curated"):
            row = run_eval(home_dir, context)
            print(f"eval {context}: {json.dumps(row)}")
    print("plain artifacts:", plain.counts["artifacts_by_type"])


if __name__ == "__main__":
    main()
