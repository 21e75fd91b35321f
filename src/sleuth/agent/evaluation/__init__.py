"""`sleuth eval`: run a question set through an answering system and score it (README, command line).

The pieces are plain functions so the Sleuth loop and the agentic-RAG baseline are measured by the
same code: `run_eval` takes any `AnswerFn` (question → `AnswerRecord`) and scores each answer, checks
its citations against the stored page text itself (a system's own claim that its citations verify is
not trusted), and `summarize` folds the records into one row per system.

- `questions`: loading and selecting question sets (generic and FinanceBench).
- `matching`: the matching rules (documented there) and the LLM judge.
- `runner`: running a system over the questions and scoring each answer; the Sleuth loop as a system.
- `report`: the summary rows, the terminal table and `report.json` / `report.md`.
- `rag_baseline`: the agentic-RAG baseline, imported on its own as `sleuth.agent.evaluation.rag_baseline`.
"""

from sleuth.agent.evaluation.matching import (
    MatchResult,
    Number,
    extract_numbers,
    judge,
    numeric_match,
    score_answer,
    text_match,
)
from sleuth.agent.evaluation.questions import (
    EvalDataError,
    EvalQuestion,
    EvidencePage,
    doc_key,
    load_questions,
    select_questions,
)
from sleuth.agent.evaluation.report import (
    SystemSummary,
    markdown_report,
    rich_table,
    summarize,
    write_report,
)
from sleuth.agent.evaluation.runner import (
    AnswerFn,
    AnswerRecord,
    PageLookup,
    QuestionResult,
    citation_verifies,
    record_from_query,
    run_eval,
    sleuth_answer_fn,
)

__all__ = [
    "AnswerFn",
    "AnswerRecord",
    "EvalDataError",
    "EvalQuestion",
    "EvidencePage",
    "MatchResult",
    "Number",
    "PageLookup",
    "QuestionResult",
    "SystemSummary",
    "citation_verifies",
    "doc_key",
    "extract_numbers",
    "judge",
    "load_questions",
    "markdown_report",
    "numeric_match",
    "record_from_query",
    "rich_table",
    "run_eval",
    "score_answer",
    "select_questions",
    "sleuth_answer_fn",
    "summarize",
    "text_match",
    "write_report",
]
