"""Train the second stage's page ranker (`sleuth.store.version.ranker`) and measure it honestly.

    .venv/bin/python benchmarks/train_ranker.py [--home DIR] [--questions FILE] [--write]

Questions are JSON lines with `question`, `doc_name` (the filing, a source's file stem) and `evidence`
(a list of `{evidence_page_num (0-based), evidence_doc_name?}`): FinanceBench's format, which
`sleuth eval` reads too, so anyone can retrain on their own questions. For each question the search
runs twice, over the whole context and inside the question's own filing, with the fixed fusion
ranking; every page the second stage looks at is recorded with its features (`rescore.page_features`)
and whether it is an evidence page.

A logistic regression (L2, Newton's method, NumPy only) is then scored by cross-validation grouped by
company: each company's questions are ranked by a model trained without that company, so no figure
below comes from a question (or a filing of the same issuer) the model saw. The fixed fusion's ranking
of the same searches is the baseline, in the same run. `--write` trains on everything and writes the
shipped model (`src/sleuth/store/version/page_ranker.json`) and the report (`benchmarks/page_ranker.md`).
"""

from __future__ import annotations

import argparse
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from sleuth.store.version.ranker import FEATURES, PageRanker

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "financebench"
DEFAULT_HOME = REPO / "benchmarks" / "results" / "home"
MODEL = REPO / "src" / "sleuth" / "store" / "version" / "page_ranker.json"
REPORT = REPO / "benchmarks" / "page_ranker.md"
Page = tuple[str, int]
Floats = npt.NDArray[np.float64]


@dataclass
class Search:
    """One question searched in one scope: the pages the second stage rescored (their features and
    labels) and the fixed fusion's page order."""

    question: str
    company: str
    scope: str  # "corpus" or "filing"
    gold: set[Page]
    pages: list[Page] = field(default_factory=list)
    rows: list[list[float]] = field(default_factory=list)
    fixed: list[Page] = field(default_factory=list)


def load_questions(path: Path, by_doc: dict[str, str]) -> list[tuple[str, str, str, set[Page]]]:
    """(question, filing path, company, evidence pages (1-based)) of the questions whose filing the
    context holds."""
    out = []
    for line in path.read_text("utf-8").splitlines():
        q = json.loads(line)
        gold = set()
        for e in q["evidence"]:
            doc = e.get("evidence_doc_name") or e.get("doc_name") or q["doc_name"]
            if doc in by_doc:
                gold.add((by_doc[doc], int(e["evidence_page_num"]) + 1))
        if gold and q["doc_name"] in by_doc:
            out.append((q["question"], by_doc[q["doc_name"]], q["doc_name"].split("_")[0].upper(), gold))
    return out


def collect(home: Path, context: str, questions_path: Path, top_k: int) -> list[Search]:
    from sleuth.store.contexts.home import Home
    from sleuth.store.version.search import VersionReader

    reader = VersionReader.live(Home(home).find(context))
    sources = json.loads((reader.root / "knowledge" / "sources.json").read_text("utf-8"))
    by_doc = {Path(p).stem: p for p in sources}
    searches: list[Search] = []
    reader.page_ranker = None  # the fixed fusion orders the results: the baseline
    for question, doc, company, gold in load_questions(questions_path, by_doc):
        for scope, within in (("corpus", None), ("filing", [doc])):
            search = Search(question, company, scope, gold)

            def seen(key: Page, row: list[float], search: Search = search) -> None:
                search.pages.append(key)
                search.rows.append(row)

            reader.page_seen = seen
            hits = reader.search(question, top_k=top_k, mode="hybrid", sources=within)
            search.fixed = list(dict.fromkeys((h.source_path, h.page) for h in hits))
            searches.append(search)
    reader.page_seen = None
    return searches


def spread(x: Floats) -> tuple[Floats, Floats]:
    """Each feature's mean and standard deviation (1 where a feature never varies)."""
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    return x.mean(axis=0), scale


def fit(x: Floats, y: Floats, l2: float = 1.0, steps: int = 50) -> tuple[Floats, Floats, Floats, float]:
    """Mean, scale, weights and bias of an L2 logistic regression on standardised `x`."""
    mean, scale = spread(x)
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0  # the bias is not shrunk
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -60, 60)))
        gradient = z.T @ (p - y) + penalty * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return mean, scale, w[:-1], float(w[-1])


def fit_listwise(
    groups: list[tuple[Floats, Floats]], l2: float = 1.0, steps: int = 50
) -> tuple[Floats, Floats, Floats, float]:
    """Mean, scale, weights (and a zero bias) of a listwise model: within each search, the pages'
    softmax of their scores is the probability that each is the evidence; the evidence pages' log
    probability is maximised (a conditional logit, L2, Newton's method). What it learns is an order of
    pages within one question, which is what a ranking needs, not a calibrated probability."""
    x = np.vstack([g for g, _ in groups])
    mean, scale = spread(x)
    standard = [((g - mean) / scale, y) for g, y in groups if y.any() and not y.all()]
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        gradient = l2 * w
        hessian = np.diag(np.full(len(w), l2))
        for z, y in standard:
            s = z @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            target = y / y.sum()
            mean_z = p @ z
            gradient += z.T @ (p - target)
            hessian += (z * p[:, None]).T @ z - np.outer(mean_z, mean_z)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return mean, scale, w, 0.0


def as_ranker(model: tuple[Floats, Floats, Floats, float]) -> PageRanker:
    """The fitted model as the package loads it."""
    mean, scale, weights, bias = model
    return PageRanker(
        FEATURES,
        tuple(float(v) for v in mean),
        tuple(float(v) for v in scale),
        tuple(float(v) for v in weights),
        bias,
    )


def shipped_scores(model: tuple[Floats, Floats, Floats, float], x: Floats) -> Floats:
    """What `rescore` ranks a question's pages by (`PageRanker.page_score`), from the same code."""
    ranker = as_ranker(model)
    scores: Floats = np.array([ranker.page_score(list(row)) for row in x])
    return scores


def fold_of(company: str, folds: int) -> int:
    return zlib.crc32(company.encode()) % folds


def learned_order(search: Search, scores: Floats) -> list[Page]:
    order = sorted(range(len(search.pages)), key=lambda i: (-scores[i], i))
    ranked = [search.pages[i] for i in order]
    return ranked + [p for p in search.fixed if p not in set(ranked)]


def recall(searches: list[Search], orders: list[list[Page]], scope: str, k: int) -> float:
    chosen = [(s, o) for s, o in zip(searches, orders, strict=True) if s.scope == scope]
    return sum(bool(s.gold & set(o[:k])) for s, o in chosen) / len(chosen)


def train_on(
    searches: list[Search], x: dict[int, Floats], y: dict[int, Floats], args: argparse.Namespace
) -> tuple[Floats, Floats, Floats, float]:
    if args.pointwise:
        stacked = np.vstack([x[id(s)] for s in searches])
        return fit(stacked, np.concatenate([y[id(s)] for s in searches]), args.l2)
    return fit_listwise([(x[id(s)], y[id(s)]) for s in searches], args.l2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--context", default="financebench")
    parser.add_argument("--questions", type=Path, default=DATA / "questions.jsonl")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--l2", type=float, default=3.0)
    parser.add_argument(
        "--top-k",
        type=int,
        default=100,
        help="chunks each search asks for: the first stage's depth follows it (retrieval.py asks 100)",
    )
    parser.add_argument("--pointwise", action="store_true", help="a logistic regression over pages instead")
    parser.add_argument("--write", action="store_true", help="write the shipped model and the report")
    args = parser.parse_args()

    searches = collect(args.home, args.context, args.questions, args.top_k)
    companies = sorted({s.company for s in searches})
    x = {id(s): np.array(s.rows, dtype=np.float64).reshape(-1, len(FEATURES)) for s in searches}
    y = {id(s): np.array([p in s.gold for p in s.pages], dtype=np.float64) for s in searches}

    models: dict[int, tuple[Floats, Floats, Floats, float]] = {}
    held_out: list[list[Page]] = []
    for search in searches:
        fold = fold_of(search.company, args.folds)
        train = [s for s in searches if fold_of(s.company, args.folds) != fold]
        if fold not in models:
            models[fold] = train_on(train, x, y, args)
        held_out.append(learned_order(search, shipped_scores(models[fold], x[id(search)])))
    fixed = [s.fixed for s in searches]
    reachable = {
        scope: sum(bool(s.gold & set(s.pages)) for s in searches if s.scope == scope)
        for scope in ("corpus", "filing")
    }
    n = len(searches) // 2
    lines = [
        "# The learned page ranker: grouped cross-validation",
        "",
        f"{n} questions with evidence pages, {len(companies)} companies, {args.folds} folds by company "
        f"(each question ranked by a model that never saw its company); L2 {args.l2}. Each question "
        "searched over the whole context and inside its filing; the fixed fusion (`rescore.fuse`) ranks "
        "the same searches in the same run. An evidence page is among the pages the second stage "
        f"looks at for {reachable['corpus']} (corpus) and {reachable['filing']} (filing) of {n} questions.",
        "",
        "| ranking | R@3 corpus | R@5 corpus | R@10 corpus | R@3 filing | R@5 filing | R@10 filing |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, orders in (("fixed fusion (baseline)", fixed), ("learned ranker, grouped CV", held_out)):
        cells = [recall(searches, orders, scope, k) for scope in ("corpus", "filing") for k in (3, 5, 10)]
        lines.append(f"| {name} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    model = train_on(searches, x, y, args)
    _mean, _scale, weights, bias = model
    lines += ["", "Weights of the shipped model (trained on every question; standardised features):", ""]
    lines += [f"- `{name}`: {w:+.3f}" for name, w in zip(FEATURES, weights, strict=True)]
    lines.append(f"- bias: {bias:+.3f}")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.write:
        MODEL.write_text(json.dumps(as_ranker(model).to_json(), indent=1) + "\n", encoding="utf-8")
        REPORT.write_text(report, encoding="utf-8")
        print(f"wrote {MODEL.relative_to(REPO)} and {REPORT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
