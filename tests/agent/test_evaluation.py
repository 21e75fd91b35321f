"""`sleuth eval`: question loading (generic and FinanceBench), the matching rules, the judge, scoring and
aggregation, and the command end to end on the compiled sample corpus with the offline planner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sleuth.agent.evaluation import (
    AnswerRecord,
    EvalDataError,
    EvalQuestion,
    EvidencePage,
    PageLookup,
    QuestionResult,
    citation_verifies,
    doc_key,
    extract_numbers,
    judge,
    load_questions,
    numeric_match,
    record_from_query,
    rich_table,
    run_eval,
    score_answer,
    select_questions,
    sleuth_answer_fn,
    summarize,
    text_match,
    write_report,
)
from sleuth.agent.records import Query, QueryStep, Usage
from sleuth.cli.app import app
from sleuth.compile.pipeline import CompileReport
from sleuth.models.base import ModelError
from sleuth.models.scripted import ScriptedModel, code, final_call
from sleuth.store.contexts.home import Home
from sleuth.store.version.search import VersionReader
from tests.agent.support import RuntimeFactory

GENERIC: list[dict[str, Any]] = [
    {
        "id": "remote",
        "question": "How many days a week can employees work remotely?",
        "answer": "Up to three days a week",
        "evidence": [{"source": "policies/remote-work-policy.md", "page": 1}],
    },
    {"question": "What does error code ERR-4012 mean?", "answer": "Configuration file could not be parsed"},
]
FINANCEBENCH: dict[str, Any] = {
    "financebench_id": "financebench_id_00001",
    "company": "Acme",
    "doc_name": "travel-policy",
    "question_type": "metrics-generated",
    "question": "What is the hotel cap per night?",
    "answer": "$220.00",
    "justification": "stated",
    "evidence": [
        {"evidence_text": "capped at $220", "doc_name": "travel-policy", "evidence_page_num": 0},
        {"evidence_text": "same page", "evidence_doc_name": "travel-policy", "evidence_page_num": 0},
        {"evidence_text": "next page", "evidence_page_num": 2},
    ],
}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------ loading


def test_load_questions_reads_both_formats(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "q.jsonl", [*GENERIC, FINANCEBENCH])
    remote, err, fb = load_questions(path)
    assert remote.id == "remote" and remote.evidence == [EvidencePage("policies/remote-work-policy.md", 1)]
    assert err.id == "q2" and err.evidence == [] and err.answer.startswith("Configuration")
    assert fb.id == "financebench_id_00001" and fb.answer == "$220.00"
    # 0-based pages become 1-based; the evidence item's doc name, else the question's, is kept
    assert fb.evidence == [EvidencePage("travel-policy", 1), EvidencePage("travel-policy", 3)]
    assert fb.meta["company"] == "Acme" and fb.meta["question_type"] == "metrics-generated"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"question": "q"}', "answer is required"),
        ('{"question": " ", "answer": "a"}', "question is required"),
        ('{"question": "q", "answer": "a", "evidence": [{"source": "a.md", "page": 0}]}', "1-based"),
        ('{"question": "q", "answer": "a", "evidence": [{"page": 2}]}', "source"),
        ('{"question": "q", "answer": "a", "evidence": {"source": "a.md"}}', "list"),
        (
            '{"financebench_id": "x", "question": "q", "answer": "a", '
            '"evidence": [{"doc_name": "d", "evidence_page_num": -1}]}',
            "0-based",
        ),
    ],
)
def test_load_questions_rejects_bad_lines(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "ok", "answer": "ok"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(EvalDataError, match=message) as info:
        load_questions(path)
    assert "q.jsonl:2" in str(info.value)


def test_load_questions_rejects_duplicate_ids_and_missing_files(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "question": "q", "answer": "x"}] * 2)
    with pytest.raises(EvalDataError, match="duplicate id 'a'"):
        load_questions(path)
    with pytest.raises(EvalDataError, match="cannot read"):
        load_questions(tmp_path / "missing.jsonl")


def test_select_questions_by_ids_offset_and_limit() -> None:
    qs = [EvalQuestion(f"q{i}", "q", "a") for i in range(6)]
    assert [q.id for q in select_questions(qs, offset=2, limit=3)] == ["q2", "q3", "q4"]
    assert [q.id for q in select_questions(qs, ids=["q5", "q1"])] == ["q1", "q5"]
    assert [q.id for q in select_questions(qs, ids=["q5", "q1"], offset=1)] == ["q5"]
    assert select_questions(qs, limit=0) == []
    with pytest.raises(EvalDataError, match="q9"):
        select_questions(qs, ids=["q9"])


def test_doc_key_matches_doc_names_to_source_paths() -> None:
    assert doc_key("uploads/pdfs/3M_2018_10K.pdf") == doc_key("3M_2018_10K") == "3m_2018_10k"
    assert doc_key("uploads/acme-corpus/policies/remote-work-policy.md") == "remote-work-policy"
    assert doc_key("AMCOR_2023Q4_EARNINGS") == "amcor_2023q4_earnings"
    assert doc_key("reports\\v1.2-notes") == "v1.2-notes"  # an unknown suffix is part of the name


# ------------------------------------------------------------------------------------------ numbers


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        # plain, currency, thousands separators, rounding to the gold's precision and 1% tolerance
        ("Capital expenditure was $1,577 million in FY2018 [1].", "$1577.00", True),
        ("$1577", "$1577.00", True),
        ("about $1,590 million", "$1577.00", True),  # 0.8% off
        ("about $1,600 million", "$1577.00", False),  # 1.5% off
        ("It was 1.87%", "1.9%", True),  # rounds to 1.9
        ("It was 1.96%", "1.9%", False),
        ("The ratio is 0.655.", "0.66", True),  # half-up
        ("The ratio is 0.83", "0.66", False),
        ("24.3", "24.26", True),
        ("$0.4 per share", "$0.40", True),
        ("zero", "$0", False),
        ("0 dollars", "$0", True),
        # scales: both stated, one stated, glued suffixes
        ("$1.577 billion", "$1577.00", True),
        ("$11.6 billion", "$11588.00", True),
        ("$1.6 billion", "$1577.00", False),
        ("Revenue: $48.2M, up 12%", "$48.2 million", True),
        ("Revenue: $48.2M", "$48,200,000", True),
        ("Revenue of 48.2", "$48.2 million", True),
        ("$48.2 billion", "$48.2 million", False),
        ("EBITDA was $2.02 billion", "AMCOR's Adj. EBITDA was $2,018mn in FY 2023", True),
        ("1.5 bn", "$1,500 million", True),
        # percentages against fractions
        ("25%", "0.25", True),
        ("0.25", "25%", True),
        ("12.5 percent", "0.125", True),
        ("25%", "0.35", False),
        # negatives: minus signs, parentheses, direction words
        ("(1,234)", "-1234", True),
        ("$(1,234)", "-$1,234", True),
        ("($1,234)", "-1234", True),
        ("−1,234", "-1234", True),
        ("(2.1)%", "-2.1%", True),
        ("1,234", "-1234", False),
        ("(3.4%)", "-3.4%", False),  # a parenthetical percentage, not a negative one
        ("a decline of 1,234", "-1234", True),
        ("-1.7%", "Operating margin decreased by 1.7%", True),
        ("decreased 1.7 percentage points", "Operating margin decreased by 1.7% in FY2022", True),
        ("working capital was -$1,561 million", "No, it had negative working capital of -$1561M.", True),
        ("working capital was $1,561 million", "Working capital of -$1561M", False),
        # several key numbers need ⌈2n/3⌉; framing numbers (years, dates, periods) do not count
        ("from 0.67 to 0.69", "Improved from 0.67 times to 0.69 times in FY 2023 (3.4% jump)", True),
        ("0.67", "Improved from 0.67 times to 0.69 times in FY 2023 (3.4% jump)", False),
        ("36 percent", "36%. This assumes the 12 months ended on January 28, 2023.", True),
        ("In 2015", "2015", True),
        ("Probation lasts 90 days.", "90 days", True),
        # names and references are not quantities
        ("3M's capex", "$1577.00", False),
        ('According to uploads/pdfs/3M_2018_10K.pdf (p. 60): "1,577" [1]', "$1577.00", True),
        ("According to uploads/pdfs/3M_2018_10K.pdf (p. 3): nothing [3]", "3", False),
        ("The 10-K for COVID-19", "19", False),
        ("no figure at all", "$1577.00", False),
    ],
)
def test_numeric_match(predicted: str, gold: str, expected: bool) -> None:
    assert numeric_match(predicted, gold) is expected


@pytest.mark.parametrize("gold", ["Yes", "Customer deposits", "United States, EMEA, APAC, and LACC", ""])
def test_numeric_match_is_none_without_a_gold_number(gold: str) -> None:
    assert numeric_match("It was 12%", gold) is None


def test_extract_numbers_reads_signs_units_and_skips_names() -> None:
    found = extract_numbers(
        "-$1561M; $(5); USD 1,577; 3M; 10-K; FY2022; 1.5B; 2021-2022; 3 million\n-100% held"
    )
    assert [(n.value, n.scale, n.percent, n.currency) for n in found] == [
        (-1561.0, 1e6, False, True),
        (-5.0, None, False, True),
        (1577.0, None, False, True),
        (1.5, 1e9, False, False),
        (2021.0, None, False, False),
        (2022.0, None, False, False),
        (3.0, 1e6, False, False),
        (100.0, None, True, False),  # a bullet dash is not a sign
    ]
    assert [n.framing for n in found if n.value in (2021.0, 2022.0)] == [True, True]


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ("Customer deposits [1]", "Customer deposits", True),
        ("They are customer deposits.", "Customer deposits", True),
        ("Segments: United States and EMEA and APAC and LACC", "United States, EMEA, APAC, and LACC", True),
        ("Employees may work remotely up to three days per week [1].", "Up to three days a week", True),
        ("Employees may work remotely on some days.", "Up to three days a week", False),
        ("Yes, it improved.", "Yes", True),
        ("No.", "Yes", False),
        ("The margin held steady.", "Yes", False),
        ("No, the margins rose.", "Yes, the margins rose.", False),
        ("It is an ISO 9001 registrar.", "Configuration file could not be parsed", False),
        ("The configuration file could not be parsed [2].", "Configuration file could not be parsed", True),
    ],
)
def test_text_match(predicted: str, gold: str, expected: bool) -> None:
    assert text_match(predicted, gold) is expected


def test_text_match_none_for_empty_gold_and_score_answer_combines_rules() -> None:
    assert text_match("anything", "  ") is None
    numeric = score_answer("It was $1,577 million.", "$1577.00")
    assert (numeric.numeric, numeric.correct) == (True, True)
    vetoed = score_answer("No, it was 0.62%.", "Yes, the rate was 0.62%")
    assert vetoed.numeric is True and vetoed.correct is False
    text = score_answer("Customer deposits", "Customer deposits")
    assert (text.numeric, text.text, text.correct) == (None, True, True)


# ------------------------------------------------------------------------------------------ judge


def test_judge_is_strict_and_deterministic() -> None:
    model = ScriptedModel(["YES", "No.", "**Yes** - same figure", "I cannot tell", ModelError("down")])
    assert judge(model, "Capex?", "$1577.00", "$1,577 million [1]") is True
    assert judge(model, "Capex?", "$1577.00", "$1,400 million") is False
    assert judge(model, "Capex?", "$1577.00", "1.577 billion") is True
    assert judge(model, "Capex?", "$1577.00", "unclear") is None
    assert judge(model, "Capex?", "$1577.00", "down") is None
    assert judge(model, "Capex?", "$1577.00", "  ") is False  # no call for an empty answer
    assert len(model.calls) == 5
    first = model.calls[0]
    assert first.params.temperature == 0.0 and first.tools == []
    assert "Gold answer: $1577.00" in first.messages[-1].content
    assert "[1]" not in first.messages[-1].content  # markers are not part of the claim


# ------------------------------------------------------------------------------------------ scoring


def fake_pages(context: str | None, source: str, page: int) -> str | None:
    return "Hotel costs are capped at $220 per night." if (source, page) == ("travel-policy.md", 1) else None


def citation(
    grounding: str, start: int | None = None, end: int | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "source": "travel-policy.md",
        "pages": [1],
        "grounding": grounding,
        "start": start,
        "end": end,
        **extra,
    }


def test_citation_verifies_rechecks_against_the_page() -> None:
    assert citation_verifies(citation("capped at $220", 16, 30), fake_pages)
    assert citation_verifies(citation("capped  at\n$220"), fake_pages)  # no offsets: containment
    assert not citation_verifies(citation("capped at $220", 0, 14), fake_pages)  # wrong offsets
    assert not citation_verifies(citation("capped at $250"), fake_pages)
    assert not citation_verifies(citation(""), fake_pages)
    assert not citation_verifies({**citation("capped at $220"), "pages": [2]}, fake_pages)


def test_run_eval_scores_measures_and_survives_failures() -> None:
    questions = [
        EvalQuestion("hotel", "Hotel cap?", "$220", [EvidencePage("travel-policy", 1)]),
        EvalQuestion("wrong", "Hotel cap?", "$220", [EvidencePage("other", 1)]),
        EvalQuestion("boom", "Hotel cap?", "$220"),
    ]

    def answer(q: EvalQuestion) -> AnswerRecord:
        if q.id == "boom":
            raise RuntimeError("sandbox died")
        cites = [citation("capped at $220", 16, 30)]
        if q.id == "wrong":
            cites.append(citation("made up"))
            return AnswerRecord("It is $250 [1][2].", cites, steps=3, evidence_chars=10)
        return AnswerRecord("Capped at $220 per night [1].", cites, 2, 100, 20, evidence_chars=41)

    seen: list[QuestionResult] = []
    results = run_eval(questions, answer, system="fake", page_text=fake_pages, on_result=seen.append)
    assert seen == results
    hotel, wrong, boom = results
    assert (hotel.correct, hotel.numeric, hotel.judge) == (True, True, None)
    assert (hotel.steps, hotel.input_tokens, hotel.output_tokens, hotel.evidence_tokens) == (2, 100, 20, 11)
    assert (hotel.citations, hotel.citations_valid, hotel.citation_validity) == (1, 1, 1.0)
    assert hotel.evidence_page_hit is True and hotel.cited_pages == [["travel-policy.md", 1]]
    assert wrong.correct is False and wrong.citation_validity == 0.5 and wrong.evidence_page_hit is False
    assert boom.status == "failed" and boom.error == "RuntimeError: sandbox died" and not boom.correct
    assert boom.evidence_page_hit is None and boom.citation_validity is None

    [row] = summarize(results)
    assert row.system == "fake" and row.n == 3 and row.failures == 1
    assert row.accuracy == pytest.approx(1 / 3) and row.judge_accuracy is None
    assert row.evidence_page_hit_rate == 0.5 and row.with_gold_evidence == 2
    assert row.mean_steps == pytest.approx(5 / 3) and row.mean_evidence_tokens == pytest.approx(14 / 3)
    assert row.citation_validity == pytest.approx(2 / 3)  # pooled over the three citations
    assert row.p50_latency_s <= row.p95_latency_s


def test_run_eval_uses_the_judge_verdict_when_there_is_one() -> None:
    questions = [EvalQuestion("a", "q?", "$220"), EvalQuestion("b", "q?", "$220")]
    model = ScriptedModel(["NO", "maybe"])
    results = run_eval(questions, lambda q: AnswerRecord("It is $220."), system="s", judge_model=model)
    assert [(r.match, r.judge, r.correct) for r in results] == [(True, False, False), (True, None, True)]
    [row] = summarize(results)
    assert row.judged == 1 and row.judge_accuracy == 0.0 and row.accuracy == 0.5 and row.match_accuracy == 1.0


def test_reports_are_written_as_json_and_markdown(tmp_path: Path) -> None:
    results = run_eval(
        [EvalQuestion("a", "q?", "$220")], lambda q: AnswerRecord("It | is $220."), system="sleuth"
    )
    results += run_eval([EvalQuestion("a", "q?", "$220")], lambda q: AnswerRecord("no idea"), system="rag")
    summaries = summarize(results)
    paths = write_report(
        tmp_path / "out", summaries, results, {"model": "sleuth/offline", "contexts": ["acme"]}
    )
    document = json.loads(paths["json"].read_text("utf-8"))
    assert [s["system"] for s in document["summary"]] == ["sleuth", "rag"]
    assert [s["accuracy"] for s in document["summary"]] == [1.0, 0.0]
    assert document["config"]["contexts"] == ["acme"] and len(document["results"]) == 2
    markdown = paths["markdown"].read_text("utf-8")
    assert "| sleuth | 1 | 100.0% |" in markdown and "| rag | 1 | 0.0% |" in markdown
    assert 'contexts: `["acme"]`' in markdown and "It \\| is $220." in markdown
    table = rich_table(summaries)
    assert [c.header for c in table.columns] == ["metric", "sleuth", "rag"]


def test_record_from_query_counts_what_the_model_saw() -> None:
    query = Query(
        id="qry_1",
        session_id="ses_1",
        created=0,
        status="completed",
        output=[{"role": "assistant", "content": [{"type": "output_text", "text": "Three days [1]."}]}],
        citations=[{"source": "a.md", "pages": [1], "grounding": "x"}],
        steps=[
            QueryStep(step_id="s1", status="completed", output="a" * 30),
            QueryStep(step_id="s2", status="completed", output=None),
            QueryStep(step_id="s3", status="running", output="ignored"),
        ],
        usage=Usage(input_tokens=120, output_tokens=30, total_tokens=150),
    )
    record = record_from_query(query)
    assert (record.answer, record.steps, record.evidence_chars) == ("Three days [1].", 2, 30)
    assert (record.input_tokens, record.output_tokens, record.query_id) == (120, 30, "qry_1")
    assert record.citations == [c.model_dump() for c in query.citations]


# ------------------------------------------------------------------------------------------ end to end


def test_sleuth_turns_are_scored_with_a_scripted_model(
    make_runtime: RuntimeFactory, sample_version: Path
) -> None:
    runtime = make_runtime(
        [
            code(
                "hits = await search_source('how many days per week can employees work remotely', top_k=5)\n"
                "for h in hits[:3]:\n    print(h.ref, h.name, h.fields['chunk_text'][:300])\n",
                "Search the remote-work policy",
            ),
            final_call(evidence=["E1"]),
            "Employees may work remotely up to three days per week [1].",
        ]
    )
    question = EvalQuestion(
        "remote",
        "How many days a week can I work from home?",
        "Up to three days a week",
        [EvidencePage("remote-work-policy", 1), EvidencePage("employee-handbook", 1)],  # both state it
    )
    answer_fn = sleuth_answer_fn(runtime, ["acme"], model="openai:gpt-test")
    [result] = run_eval(
        [question], answer_fn, system="sleuth", page_text=PageLookup({"acme": VersionReader(sample_version)})
    )
    assert result.status == "completed" and result.correct and result.text is True
    assert result.steps == 1 and result.evidence_tokens > 0 and result.input_tokens > 0
    assert (result.citations, result.citations_valid, result.evidence_page_hit) == (1, 1, True)
    assert result.query_id is not None


def test_eval_command_compares_sleuth_and_rag_offline(
    sample_home: tuple[Home, CompileReport], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, _ = sample_home
    root = tmp_path / "home"
    shutil.copytree(home.root, root, ignore=shutil.ignore_patterns("server.sqlite*", "queries"))
    monkeypatch.setenv("SLEUTH_HOME", str(root))
    monkeypatch.delenv("SLEUTH_MODEL", raising=False)
    questions = write_jsonl(
        tmp_path / "questions.jsonl",
        [
            GENERIC[0],
            {**FINANCEBENCH, "evidence": [{"doc_name": "travel-policy", "evidence_page_num": 0}]},
            {"id": "revenue", "question": "What was Acme's revenue in 2025?", "answer": "$48.2 million"},
        ],
    )
    out = tmp_path / "report"
    result = CliRunner().invoke(
        app,
        ["eval", str(questions), "--context", "acme", "--baseline", "rag", "--top-k", "4", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert "sleuth" in result.output and "rag" in result.output and "citation validity" in result.output
    document = json.loads((out / "report.json").read_text("utf-8"))
    assert document["config"]["model"] == "sleuth/offline" and document["config"]["judge"] is None
    rows = {row["system"]: row for row in document["summary"]}
    assert set(rows) == {"sleuth", "rag"}
    for row in rows.values():
        assert row["n"] == 3 and row["failures"] == 0 and row["judged"] == 0
        assert row["mean_input_tokens"] == 0 and row["mean_evidence_tokens"] > 0
        assert row["citation_validity"] == 1.0  # both systems' citations recheck against the pages
        assert row["with_gold_evidence"] == 2
    assert rows["rag"]["mean_steps"] == 1.0
    records = [json.loads(line) for line in (out / "records.jsonl").read_text("utf-8").splitlines()]
    assert [(r["system"], r["id"]) for r in records] == [  # interleaved: question by question
        ("sleuth", "remote"),
        ("rag", "remote"),
        ("sleuth", "financebench_id_00001"),
        ("rag", "financebench_id_00001"),
        ("sleuth", "revenue"),
        ("rag", "revenue"),
    ]
    remote = [r for r in records if r["id"] == "remote"]
    assert all(r["correct"] and r["evidence_page_hit"] for r in remote)
    report = (out / "report.md").read_text("utf-8")
    assert "| sleuth | 3 |" in report and "**figure match**" in report and "**evidence-page hit**" in report
    assert rows["sleuth"]["with_gold_figures"] == 2  # the hotel limit and the revenue state figures
    # Without --out the report goes under $SLEUTH_HOME/eval/, never into the working directory.
    monkeypatch.chdir(tmp_path)
    again = CliRunner().invoke(app, ["eval", str(questions), "--context", "acme", "--limit", "1"])
    assert again.exit_code == 0, again.output
    assert [p.name for p in (root / "eval").iterdir()] and not (tmp_path / "sleuth-eval").exists()
    assert list((root / "eval").glob("*/report.md"))


def test_eval_command_rejects_bad_input(
    sample_home: tuple[Home, CompileReport], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, _ = sample_home
    monkeypatch.setenv("SLEUTH_HOME", str(home.root))
    questions = write_jsonl(tmp_path / "q.jsonl", GENERIC)
    runner = CliRunner()
    cases = [
        (["--context", "acme", "--baseline", "bm25"], "unknown baseline"),
        (["--context", "nope"], "no context 'nope'"),
        (["--context", "acme", "--ids", "zzz"], "unknown question id"),
        (["--context", "acme", "--limit", "0"], "no questions selected"),
        (["--context", "acme", "--skip-sleuth"], "needs a --baseline"),
    ]
    for args, message in cases:
        result = runner.invoke(app, ["eval", str(questions), *args, "--out", str(tmp_path / "out")])
        assert result.exit_code != 0, args
        assert message in result.output, (args, result.output)
