"""Curation with a model (issue 13, spec/context.md §5.4) against a scripted curator: every kind and
scope, grouping and conflicts, the quality screen, prose rows, typed edges, the cache, resume and the
budget. Every claim that lands in a version must quote its page verbatim."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from sleuth.agent.evaluation.rag_baseline import RagBaseline
from sleuth.compile.extraction.cache import ExtractionCache
from sleuth.compile.extraction.client import parse_json
from sleuth.compile.extraction.extractor import ModelExtractor
from sleuth.compile.extraction.grouping import subject_key
from sleuth.compile.extraction.profile import current_pages, profile_curate
from sleuth.compile.extraction.quotes import QuoteLocator
from sleuth.compile.extraction.schemas import MapReply
from sleuth.compile.manifest import parse_manifest
from sleuth.compile.pages import Page
from sleuth.compile.pipeline import CompileReport, compile_context
from sleuth.compile.report import NullProgress
from sleuth.format.front_matter import read_front_matter
from sleuth.models.catalog import CatalogError
from sleuth.settings import current
from sleuth.store.contexts.home import ContextDir, Home
from sleuth.store.contexts.ledger import Ledger
from sleuth.store.version.search import VersionReader
from tests.compile.curator import MANIFEST, CuratorModel, write_corpus


def _compile(tmp_path: Path, model: CuratorModel, **kw: Any) -> tuple[ContextDir, CompileReport]:
    home = Home(tmp_path / "home")
    folder = tmp_path / "corpus"
    if not folder.exists():
        write_corpus(tmp_path)
    ctx, _ = home.find_or_create("deals")
    manifest = parse_manifest(json.loads((tmp_path / "manifest.json").read_text()))
    settings = current()  # read once, as `sleuth compile` does at its start
    extractor = ModelExtractor(
        model,
        manifest,
        ExtractionCache(ctx.extraction_cache),
        token_budget=kw.pop("budget", None),
        settings=settings,
    )
    report = compile_context(
        "deals", [folder], tmp_path / "manifest.json", home=home, extractor=extractor, settings=settings, **kw
    )
    return ctx, report


def _corpus_with_types(tmp_path: Path, *types: dict[str, Any]) -> None:
    """The sample corpus and a manifest declaring only `types`."""
    write_corpus(tmp_path)
    manifest = {"curate": {"artifacts": {"artifact_types": list(types)}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))


def _artifacts(ctx: ContextDir) -> dict[str, tuple[dict[str, Any], str]]:
    version = ctx.version_dir(ctx.live_version() or "")
    out = {}
    for path in sorted((version / "knowledge" / "artifacts").rglob("*.md")):
        text = path.read_text("utf-8")
        front = read_front_matter(text)
        out[f"{front['type']}/{front['name']}"] = (front, text.split("\n---\n", 1)[1])
    return out


def _page(ctx: ContextDir, source: str, page: int) -> str:
    version = ctx.version_dir(ctx.live_version() or "")
    for line in (version / "knowledge" / "pages" / f"{source}.jsonl").read_text("utf-8").splitlines():
        row = json.loads(line)
        if row["page"] == page:
            return str(row["text"])
    raise AssertionError(f"no page {page} of {source}")


def _rows(ctx: ContextDir, sql: str) -> list[tuple[Any, ...]]:
    version = ctx.version_dir(ctx.live_version() or "")
    db = sqlite3.connect(f"file:{version / 'tables.sqlite'}?mode=ro", uri=True)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def test_every_kind_is_built_with_verbatim_evidence(tmp_path: Path) -> None:
    model = CuratorModel()
    ctx, report = _compile(tmp_path, model)
    arts = _artifacts(ctx)
    # document scope: one summary per source; the notes' made-up quote is screened
    agreements = {k for k in arts if k.startswith("Agreement/")}
    assert agreements == {"Agreement/About acme-msa.md", "Agreement/About globex-memo.md"}
    extraction = report.counts["extraction"]
    assert extraction["types"]["Agreement"]["reasons"] == {"no verifiable quote": 1}
    # corpus scope: Acme Corp and ACME Corporation are one company (alias), Globex Inc/Inc. one too;
    # a tie between surface forms goes to the shorter one
    companies = {k: v for k, v in arts.items() if k.startswith("Company/")}
    assert set(companies) == {"Company/Acme Corp", "Company/Globex Inc"}
    acme_front, acme_body = companies["Company/Acme Corp"]
    assert acme_front["scope"] == "corpus" and acme_front["mentions"] == 2
    assert len(acme_front["sources"]) == 2 and acme_front["group_key"] == subject_key("Acme Corp")
    assert "ACME Corporation" in acme_front["fields"]["aliases"]
    # the sources disagree on the category: both sides are quoted in a Conflicts section
    assert "## Conflicts" in acme_body and "supplier" in acme_body and "vendor" in acme_body
    assert "Acme Corp is a supplier of industrial pumps." in acme_body
    # Hooli's quote is not in the memo: screened, never built
    assert extraction["types"]["Company"]["reasons"]["no verifiable quote"] == 1
    # every provenance quote is the page's own slice, even where the model's spacing differed
    for front, _body in arts.values():
        assert front["provenance"], front["name"]
        for p in front["provenance"]:
            assert _page(ctx, p["source"], p["page"])[p["start"] : p["end"]] == p["quote"]
    memo_quote = next(p for p in acme_front["provenance"] if "vendor" in p["quote"])
    assert memo_quote["quote"] == "ACME Corporation is a vendor of spare parts"
    # typed edge: Acme Corp → the agreement it was found in; the Initech edge has no artifact end
    edges = acme_front["edges"]
    assert [(e["type"], e["to_type"]) for e in edges] == [("party_to", "Agreement")]
    assert edges[0]["evidence"]["source"].endswith("acme-msa.md")
    assert extraction["types"]["edge:party_to"]["reasons"] == {"an end is not an artifact": 1}
    assert _rows(ctx, "SELECT type, COUNT(*) FROM _edges GROUP BY type") == [("party_to", 1)]
    # rows found in prose, merged by the natural key: the newer memo wins, the other value is kept
    [(payer, amount, due, conflicts)] = _rows(ctx, "SELECT payer, amount, due, _conflicts FROM payment")
    assert (payer, amount, due) == ("Globex Inc.", 13000.0, "2024-06-30")
    assert {c["value"] for c in json.loads(conflicts)} == {12500.0, "2024-03-31"}
    # the model wrote the sample queries; usage is counted per type and lands in the ledger
    assert ctx.info().sample_queries[0] == "Which companies are party to the Master Services Agreement?"
    assert extraction["calls"] == len(model.calls) and extraction["input_tokens"] > 0
    assert extraction["types"]["Company"]["calls"] == 5  # 3 maps, 2 reduces
    assert Ledger.load(ctx.ledger_file).extraction["calls"] == extraction["calls"]
    assert report.artifacts_skipped_no_model == {}


def test_unchanged_sources_cost_no_call_and_a_changed_type_redoes_only_itself(tmp_path: Path) -> None:
    _compile(tmp_path, CuratorModel())
    again = CuratorModel()
    _ctx, report = _compile(tmp_path, again)
    assert report.delta == "empty" and again.calls == []
    # a new description for Company: its maps and reduces are redone, nothing else
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["curate"]["artifacts"]["artifact_types"][1]["description"] = "Every company, with its role."
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    third = CuratorModel()
    _ctx, report = _compile(tmp_path, third)
    assert report.flipped and set(third.kinds()) == {"map", "reduce"}
    assert report.counts["extraction"]["types"]["Agreement"]["cached"] == 3


def test_a_run_that_failed_midway_resumes_from_the_cache(tmp_path: Path) -> None:
    first = CuratorModel(broken={"globex-memo.md": "down"})
    ctx, report = _compile(tmp_path, first)
    extraction = report.counts["extraction"]
    assert report.flipped  # a provider error is reported per source, never fails the run
    assert {e["source"] for e in extraction["errors"]} == {"uploads/corpus/globex-memo.md"}
    assert Ledger.load(ctx.ledger_file).leg_hashes["extractor"].endswith("+incomplete")
    second = CuratorModel()
    _ctx, report = _compile(tmp_path, second)
    assert report.flipped  # the incomplete extraction is redone ...
    made = [u for _s, u in second.calls if "Document:" in u]
    assert made and all("globex-memo.md" in u for u in made)  # ... calling only for what failed
    assert "Company/Acme Corp" in _artifacts(ctx)


def test_a_rate_limited_call_is_retried_after_its_retry_after(tmp_path: Path) -> None:
    model = CuratorModel(broken={"acme-msa.md": "busy"})
    _ctx, report = _compile(tmp_path, model)
    extraction = report.counts["extraction"]
    assert extraction["errors"] == [] and report.counts["artifacts_by_type"]["Agreement"] == 2
    acme = [call for call in model.calls if "Document: uploads/corpus/acme-msa.md" in call[1]]
    assert len(acme) == 2 * len(set(acme)) == 6  # 3 prompts, each sent twice: the 429, then the retry


def test_invalid_json_is_repaired_once_then_counted_as_errored(tmp_path: Path) -> None:
    model = CuratorModel(broken={"acme-msa.md": "once", "globex-memo.md": "json"})
    ctx, report = _compile(tmp_path, model)
    types = report.counts["extraction"]["types"]
    assert types["Agreement"]["repairs"] == 2 and types["Agreement"]["errored"] == 1
    assert [k for k in _artifacts(ctx) if k.startswith("Agreement/")] == ["Agreement/About acme-msa.md"]
    assert types["Agreement"]["calls"] == 2 + 2 + 1  # acme: bad then repaired; memo: bad twice; notes


def test_the_budget_stops_cleanly_with_what_was_built(tmp_path: Path) -> None:
    _ctx, report = _compile(tmp_path, CuratorModel(), budget=1_000)
    extraction = report.counts["extraction"]
    assert report.flipped and extraction["budget_exhausted"]
    assert extraction["input_tokens"] + extraction["output_tokens"] < 1_000 + 4 * 600  # calls in flight
    reasons = {r for t in extraction["types"].values() for r in t["reasons"]}
    assert "not extracted: the token budget was spent" in reasons
    assert any("token budget was spent" in w for w in report.warnings)
    ctx = Home(tmp_path / "home").find("deals")
    assert Ledger.load(ctx.ledger_file).leg_hashes["extractor"].endswith("+incomplete")
    rest = CuratorModel()
    _ctx, report = _compile(tmp_path, rest)
    assert report.flipped and not report.counts["extraction"]["budget_exhausted"]
    assert report.counts["extraction"]["cached"] >= 1  # what the first run paid for is not paid again
    assert not Ledger.load(ctx.ledger_file).leg_hashes["extractor"].endswith("+incomplete")


def test_past_the_budget_cached_replies_still_count(tmp_path: Path) -> None:
    """After a complete run, a changed source and a tiny budget must not drop what the cache holds."""
    ctx, _ = _compile(tmp_path, CuratorModel())
    before = set(_artifacts(ctx))
    memo = tmp_path / "corpus" / "globex-memo.md"
    memo.write_text(memo.read_text() + "\nGlobex Inc. thanked Acme Corp for the quick delivery.\n")
    model = CuratorModel()
    _ctx, report = _compile(tmp_path, model, budget=100)  # spent by the first paid call
    extraction = report.counts["extraction"]
    assert extraction["budget_exhausted"] and report.flipped
    after = set(_artifacts(ctx))
    assert "Agreement/About acme-msa.md" in after  # its reply came from the cache, free
    assert {k for k in before if "acme-msa" in k} <= after
    paid = [u.split("\n", 1)[0] for _s, u in model.calls if "Document:" in u]
    assert paid and all("globex-memo.md" in line for line in paid), paid


def test_a_permanent_provider_error_is_reported_but_not_retried_forever(tmp_path: Path) -> None:
    ctx, report = _compile(tmp_path, CuratorModel(broken={"globex-memo.md": "refused"}))
    errors = report.counts["extraction"]["errors"]
    assert errors and not any(e["transient"] for e in errors)
    assert not Ledger.load(ctx.ledger_file).leg_hashes["extractor"].endswith("+incomplete")
    again = CuratorModel(broken={"globex-memo.md": "refused"})
    _ctx, report = _compile(tmp_path, again)
    assert report.delta == "empty" and again.calls == []  # a 400 would only repeat


def test_sources_with_the_same_text_do_not_share_a_reply(tmp_path: Path) -> None:
    write_corpus(tmp_path)
    copy = tmp_path / "corpus" / "msa-copy.md"
    copy.write_text((tmp_path / "corpus" / "acme-msa.md").read_text())
    model = CuratorModel()
    ctx, report = _compile(tmp_path, model)
    sent = [u.split("\n", 1)[0] for system, u in model.calls if "Summarise" in system]
    assert "Document: uploads/corpus/msa-copy.md" in sent  # its own call, not the MSA's cached reply
    assert "Agreement/About acme-msa.md" in _artifacts(ctx)
    reasons = report.counts["extraction"]["types"]["Agreement"]["reasons"]
    assert reasons["duplicate body"] == 1  # the two summaries say the same: one is kept


def test_an_id_pointed_at_another_model_redoes_the_work(tmp_path: Path) -> None:
    _compile(tmp_path, CuratorModel(served="curator-1.5b"))
    bigger = CuratorModel(served="curator-7b")  # same catalog id, another model behind it
    _ctx, report = _compile(tmp_path, bigger)
    assert report.flipped and bigger.calls and report.counts["extraction"]["cached"] == 0


def test_a_cancel_stops_before_the_next_paid_call(tmp_path: Path) -> None:
    class Cancelled(Exception):
        pass

    class CancelAfter(NullProgress):
        def __init__(self, calls: int) -> None:
            self.left = calls

        def advance(self, phase: str, amount: int = 1) -> None:
            if phase == "extract" and amount == 0:
                if self.left == 0:
                    raise Cancelled
                self.left -= 1

    model = CuratorModel()
    with pytest.raises(Cancelled):
        _compile(tmp_path, model, progress=CancelAfter(2))
    assert 2 <= len(model.calls) <= 2 + 4  # the workers already past their checkpoint finish
    ctx = Home(tmp_path / "home").find("deals")
    assert ctx.live_version() is None  # nothing was flipped


def test_document_scope_duplicates_are_screened(tmp_path: Path) -> None:
    _corpus_with_types(
        tmp_path, {"name": "Agreement", "kind": "summary", "scope": "document", "description": "samebody"}
    )
    ctx, report = _compile(tmp_path, CuratorModel())
    assert report.counts["extraction"]["types"]["Agreement"]["reasons"]["duplicate body"] == 1
    assert len([k for k in _artifacts(ctx) if k.startswith("Agreement/")]) == 1


def test_force_discards_the_extraction_cache(tmp_path: Path) -> None:
    first = CuratorModel()
    ctx, _ = _compile(tmp_path, first)
    assert any(ctx.extraction_cache.iterdir())
    again = CuratorModel()
    _ctx, report = _compile(tmp_path, again, force=True)
    assert sorted(again.kinds()) == sorted(first.kinds()) and report.counts["extraction"]["cached"] == 0


def test_quotes_are_found_across_spacing_typography_and_case() -> None:
    page = Page(1, "The vendor\u2019s  fee is  due\non 1 May.\nACME shall deliver.")
    locate = QuoteLocator("a.md", [page]).locate
    found = locate("the vendor's fee is due on 1 May")
    assert found is not None and found.quote == "The vendor\u2019s  fee is  due\non 1 May"
    assert locate("Acme shall deliver") is not None  # case is the last resort
    ellipsis = locate("The vendor\u2019s fee … on 1 May.")
    assert ellipsis is not None and ellipsis.quote == "The vendor\u2019s  fee"  # its longest piece
    assert locate("shall") is None  # too short to be evidence
    assert locate("ACME shall never deliver") is None


def test_subject_keys_fold_case_punctuation_and_articles() -> None:
    assert subject_key("The ACME Corp.") == subject_key("acme corp") == "acme corp"
    assert subject_key("Globex, Inc.") == "globex inc"
    assert MANIFEST["curate"]["artifacts"]["artifact_types"][1]["name"] == "Company"


@pytest.mark.parametrize("kind", ["topic", "event"])
def test_other_corpus_kinds_share_map_group_reduce(tmp_path: Path, kind: str) -> None:
    _corpus_with_types(tmp_path, {"name": "Company", "kind": kind})

    class AsEntity(CuratorModel):
        def complete(self, messages: Any, tools: Any, params: Any) -> Any:
            messages[0].content = messages[0].content.replace(f"List every {kind}", "List every entity")
            return super().complete(messages, tools, params)

    ctx, report = _compile(tmp_path, AsEntity())
    names = {k for k in _artifacts(ctx) if k.startswith("Company/")}
    assert names == {"Company/Acme Corp", "Company/Globex Inc"}
    assert report.counts["artifacts_by_type"]["Company"] == 2


def test_the_profile_estimates_before_and_counts_the_cache_after(tmp_path: Path) -> None:
    write_corpus(tmp_path)
    home = Home(tmp_path / "home")
    ctx, _ = home.find_or_create("deals")
    ctx.sources.mkdir(parents=True, exist_ok=True)
    for path in (tmp_path / "corpus").iterdir():
        (ctx.sources / path.name).write_bytes(path.read_bytes())
    (ctx.manifest_file).write_text((tmp_path / "manifest.json").read_text())
    manifest = parse_manifest(json.loads((tmp_path / "manifest.json").read_text()))
    model = CuratorModel()
    before = profile_curate(manifest, current_pages(ctx), model.config, ExtractionCache(ctx.extraction_cache))
    by_type = {t.type: t for t in before.types}
    assert set(by_type) == {"Agreement", "Company", "Payment", "_sample_queries"}
    assert (by_type["Agreement"].calls.low, by_type["Agreement"].calls.high) == (3, 3)
    assert (by_type["Payment"].calls.low, by_type["Payment"].calls.high) == (3, 3)
    company = by_type["Company"]
    assert company.calls.low < company.calls.high  # the reduces are a band: subjects are not known yet
    assert before.total.cached_calls == 0 and before.total.seconds.high > before.total.seconds.low > 0

    settings = current()  # read once, as `sleuth compile` does at its start
    extractor = ModelExtractor(model, manifest, ExtractionCache(ctx.extraction_cache), settings=settings)
    report = compile_context("deals", home=home, extractor=extractor, settings=settings)
    actual = report.counts["extraction"]["types"]
    # the per-source input tokens are the prompts the extractor sent: the estimate is within 5 %
    assert (
        abs(by_type["Agreement"].input_tokens.low - actual["Agreement"]["input_tokens"])
        <= 0.05 * actual["Agreement"]["input_tokens"]
    )
    assert company.calls.low <= actual["Company"]["calls"] <= company.calls.high

    after = profile_curate(
        manifest,
        current_pages(ctx),
        model.config,
        ExtractionCache(ctx.extraction_cache),
        Ledger.load(ctx.ledger_file).extraction,
    )
    again = {t.type: t for t in after.types}
    assert again["Agreement"].cached_calls == 3 and again["Agreement"].calls.high == 0
    assert again["Company"].cached_calls == 3
    assert again["Company"].calls.low == again["Company"].calls.high or again["Company"].calls.high <= 3
    assert any("last run" in a for a in after.assumptions)


def test_the_rag_baseline_reads_model_made_artifacts_first(tmp_path: Path) -> None:
    """Issue 13 (8): a summary or an entity is a better first read than three chunks."""
    ctx, _ = _compile(tmp_path, CuratorModel())
    reader = VersionReader(ctx.version_dir(ctx.live_version() or ""))
    rag = RagBaseline(None, {"deals": reader}, top_k=3)
    found = rag.search("What kind of supplier is Acme Corp?")
    quoted = [s for s in found if s.via == "artifact"]
    assert quoted and found[: len(quoted)] == quoted  # the artifact quotes come first
    assert any(s.artifact_name == "Acme Corp" for s in quoted)
    for span in quoted:
        assert (reader.page_text(span.source_path, span.page) or "")[span.start : span.end] == span.text
    assert len(found) - len(quoted) == 3  # and the chunks as before


def test_without_model_artifacts_the_rag_baseline_is_chunks_only(tmp_path: Path) -> None:
    write_corpus(tmp_path)
    home = Home(tmp_path / "home")
    compile_context("plain", [tmp_path / "corpus"], home=home, settings=current())
    ctx = home.find("plain")
    reader = VersionReader(ctx.version_dir(ctx.live_version() or ""))
    rag = RagBaseline(None, {"plain": reader}, top_k=3)
    assert rag.search("What kind of supplier is Acme Corp?") == rag._chunks(
        "What kind of supplier is Acme Corp?"
    )


def test_a_model_that_does_not_resolve_leaves_no_trace(tmp_path: Path) -> None:
    write_corpus(tmp_path)
    home = Home(tmp_path / "home")
    with pytest.raises(CatalogError, match="unknown model"):
        compile_context(
            "deals",
            [tmp_path / "corpus"],
            tmp_path / "manifest.json",
            home=home,
            model="no-such-model",
            settings=current(),
        )
    assert home.contexts() == []


def test_document_scope_entities_and_a_corpus_summary(tmp_path: Path) -> None:
    _corpus_with_types(
        tmp_path,
        {"name": "Parties", "kind": "entity", "scope": "document"},
        {"name": "Overview", "kind": "summary", "scope": "corpus"},
    )
    ctx, report = _compile(tmp_path, CuratorModel())
    arts = _artifacts(ctx)
    parties = {k: v for k, v in arts.items() if k.startswith("Parties/")}
    assert set(parties) == {"Parties/Companies in acme-msa.md", "Parties/Companies in globex-memo.md"}
    assert all(front["scope"] == "document" and len(front["sources"]) == 1 for front, _ in parties.values())
    types = report.counts["extraction"]["types"]
    assert types["Parties"]["reasons"] == {"empty name or body": 1}  # the notes gave an empty body
    [(key, (front, body))] = [(k, v) for k, v in arts.items() if k.startswith("Overview/")]
    assert key == "Overview/The deals corpus" and front["scope"] == "corpus" and len(front["sources"]) == 2
    assert "Acme Corp" in body and front["provenance"]  # the per-source summaries' quotes


def test_values_copied_from_the_prompts_shape_are_screened(tmp_path: Path) -> None:
    """The 1.5B model answered `"body": "Markdown"`, the shape's own placeholder, for every source."""
    _corpus_with_types(
        tmp_path, {"name": "Agreement", "kind": "summary", "scope": "document", "description": "copycat"}
    )
    ctx, report = _compile(tmp_path, CuratorModel())
    reasons = report.counts["extraction"]["types"]["Agreement"]["reasons"]
    assert reasons == {"placeholder copied from the prompt": 2, "no verifiable quote": 1}
    assert not any(k.startswith("Agreement/") for k in _artifacts(ctx))


def test_a_reply_cut_off_by_its_token_limit_keeps_its_complete_items() -> None:
    cut = (
        '{"mentions": [{"subject": "Acme", "quotes": ["a \\" b"]}, '
        '{"subject": "Globex", "quotes": ["q"]}, {"sub'
    )
    assert parse_json(cut) == {
        "mentions": [{"subject": "Acme", "quotes": ['a " b']}, {"subject": "Globex", "quotes": ["q"]}]
    }
    assert parse_json('```json\n{"a": 1}\n```') == {"a": 1}
    with pytest.raises(ValueError):
        parse_json("no JSON here at all")


def test_replies_are_read_leniently_where_a_slip_loses_nothing() -> None:
    reply = MapReply.model_validate(
        {
            "mentions": [
                {"subject": "Acme", "aliases": "ACME", "quotes": "x" * 500, "fields": None, "text": None}
            ]
        }
    )
    [mention] = reply.mentions
    assert (
        mention.aliases == ["ACME"]
        and mention.quotes == ["x" * 300]
        and mention.fields == {}
        and mention.text == ""
    )


def test_made_up_row_values_beside_real_quotes_are_screened(tmp_path: Path) -> None:
    """A model copied the real sentence as its quote and invented the figures: the quote verifies,
    the values do not, so the rows are screened and counted (issue 22, item 2)."""
    made_up = {"acme-msa.md": "made_up", "globex-memo.md": "made_up"}
    ctx, report = _compile(tmp_path, CuratorModel(broken=made_up))
    assert _rows(ctx, "SELECT payer, amount, due FROM payment") == []
    payment = report.counts["extraction"]["types"]["Payment"]
    assert payment["reasons"]["value not in its quote"] == 2 and payment["values_rejected"] == 2
    assert payment["quotes_verified"] == 2  # the quotes were real: only the values were not
