"""The offline planner (spec/runtime.md §10): a deterministic stand-in for the model.

With no model configured Sleuth still answers. The planner plays the model's part behind the same
`Model` seam: it writes real SDK code that runs in the turn's sandbox, with the same events,
truncation, trace and citation checks as a model's code. Like a model, it learns what happened only
from what its code printed: every step prints, as its first line, `#PLAN ` and a compact JSON summary,
and the planner reads that line and nothing else. A cut or missing line makes it finish with what it
has.

Question classes (§10.1, checked in order): `count` (SQL count over a matching table, the `_sources`
table, or a roster), `list` (a roster, `SELECT DISTINCT` over a table, or the sources), `exact_id`
(keyword searches for the identifiers plus one hybrid search) and `general` (search, drill into the
top artifact and sources, then `final` with the eight best spans). Everything is deterministic: the
same ask over the same version gives byte-identical code, drafts and evidence lists. The code it writes
is `planner_code`'s, reading a step's `#PLAN` line back is `planner_plans`', and stating a table cell's
figure is `planner_figures`'.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sleuth.agent import formulas
from sleuth.agent.arithmetic import asks_change, names_quantity, read_words
from sleuth.agent.extractive import (
    FINAL_EVIDENCE,
    asked_months,
    asked_quantity,
    asked_years,
    asks_computation,
    content_words,
    follow_up_quantity,
    named_tables,
    normalize_word,
    quoted_phrases,
    raw_words,
    stating_roots,
    stating_words,
)
from sleuth.agent.follow_ups import Previous, follows_on, moved_to, names_period, resolve
from sleuth.agent.planner_code import StepCode
from sleuth.agent.planner_figures import FigureAsk, fiscal_naming, own_fiscal_year, stated
from sleuth.agent.planner_periods import asks_trend, per_period, trend_quantity
from sleuth.agent.planner_plans import (
    artifact_hits,
    fuse,
    keyword_groups,
    plan_hits,
    prose_evidence,
    read_plan,
    step_budget,
    tabled_first,
    top_labels,
)
from sleuth.agent.planner_scope import (
    COUNT_WORDS,
    HOW_MANY,
    LIST_WORDS,
    PlannerScope,
    QuestionClass,
    TableInfo,
    Target,
    classify,
    head_word,
    quote_ident,
)
from sleuth.agent.planner_sections import section_answer, section_words
from sleuth.agent.records import Assurance
from sleuth.agent.word_families import family_filters
from sleuth.format.periods import named_quarter
from sleuth.models.base import CompletionParams, Message, ModelConfig, Reply, TokenUsage, ToolCall, ToolSpec
from sleuth.store.version.stop_words import STOP_WORDS

OFFLINE_MODEL = ModelConfig(
    id="sleuth/offline", provider="offline", model="offline-planner", tool_protocol="native"
)
MAX_ASK_CHARS = 2000  # the SDK's `query` limit (§5.1)
MAX_CARRIED = 5  # documents a follow-up carries from the previous turn
LIST_SHOWN = 50
MAX_STEPS_GUARD = 6  # the planner needs at most four; this only stops a confused conversation

_YEAR = re.compile(r"(?<!\d)(19\d\d|20\d\d)(?!\d)")
_TIME_COLUMN = ("date", "year", "period", "created", "time")
_DOC_NOUNS = frozenset({"document", "doc", "file", "source", "page"})
_ERROR_LINE = re.compile(r"^(?:Traceback \(most recent call last\)|[A-Za-z_.]*(?:Error|Exception): )", re.M)


@dataclass
class _Finish:
    answer: str | None
    evidence: list[str]
    #: How sure the answer is (`records.Synthesis.assurance`): a sentence the planner writes states
    #: what a table or roster holds (`matched`) unless it says otherwise; no sentence, the quotes.
    assurance: Assurance = "matched"


# ------------------------------------------------------------------------------------- the planner
class OfflinePlanner:
    """A `Model` that plans with fixed rules (§10). One instance per turn.

    After the turn, `count` and `items` hold what a count or list step computed, so the loop can fill
    a `shape` with them (§10.3); `question_class` is the class the planner acted on and `draft` the
    answer it handed to `final`. `general_only` (the `search_rag` workflow, §12) skips the classes and
    runs the general search and drill; `author` is who each step's first comment says wrote it (a
    model's `search_rag` turn: the workflow's fixed retrieval, not an offline answer)."""

    def __init__(
        self,
        ask: str,
        scope: PlannerScope,
        previous: str | Sequence[str] | None = None,
        *,
        general_only: bool = False,
        previous_documents: tuple[tuple[str, str], ...] = (),
        author: str = "Offline planner",
    ) -> None:
        self.config: ModelConfig = OFFLINE_MODEL
        self.ask = ask
        self.scope = scope
        asks = (previous,) if isinstance(previous, str) else tuple(previous or ())
        #: The previous question, follow-ups in the chain resolved (`follow_ups.resolve`).
        self.previous: Previous | None = resolve(asks)
        self.general_only = general_only
        self.count: int | None = None
        self.items: list[str] | None = None
        self.draft: str | None = None
        self.assurance: Assurance = "none"
        self._ask = ask[:MAX_ASK_CHARS]
        self._words = content_words(self._ask)
        self._query = self._search_query()
        self.code = StepCode(self._ask, self._query, scope, self._carried(previous_documents), author)
        # the question a computation is read from: the ask, or a follow-up's previous question moved
        # to the period the follow-up names (None: the years do not line up, so nothing is worked out)
        self._computed: str | None = self._ask
        self._figure = self._figure_ask()
        self._section = section_words(self._ask) if self._figure is None else None
        self.detected_class: QuestionClass = "general" if general_only else classify(self._ask)
        self._target: Target | None = None
        if self.detected_class in ("count", "list"):
            self._target = self._match(self.detected_class)
        matched = self._target is not None or self.detected_class in ("exact_id", "general")
        self.question_class: QuestionClass = self.detected_class if matched else "general"

    # ------------------------------------------------------------------------ the Model seam
    def complete(self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams) -> Reply:
        """The next action: a `run_python` step, or `final` once the evidence is in hand."""
        done = sum(1 for m in messages if m.role == "tool")
        if done == 0:
            return self._first_step()
        last = next(m for m in reversed(messages) if m.role == "tool")
        plan = read_plan(last.content)
        budget = step_budget(messages)
        if plan is None:
            failed = _ERROR_LINE.search(last.content) is not None
            if done == 1 and failed and self.question_class in ("count", "list"):
                return self._general_search(done)  # the SQL step failed: refine once, as a search
            return self._finish(done, self._fallback(messages))
        if done >= MAX_STEPS_GUARD:
            return self._finish(done, self._final_from(plan))
        step, kind = plan.get("step"), plan.get("class")
        if step == "list" and not plan.get("total") and done == 1:
            return self._general_search(done)  # nothing listed: refine once, as a search
        if step == "search" and kind == "exact_id":
            if not plan_hits(plan, "keyword") and done == 1 and (budget is None or done < budget):
                return self._general_search(done)  # keyword search found nothing: fall back
            return self._finish(done, self._final_from(plan))
        if step == "search" and self._figure is not None:
            figure = self._figure_final(plan)
            # No cell states it — cells that share a word with it, or, for a count ("how many
            # employees": prose states it, not tables), none in the named documents (where a drill
            # adds nothing): the sentences that say it in the documents' own words (item 6).
            unstated = (
                figure.answer is None
                if figure is not None
                else bool(plan_hits(plan, "named")) and HOW_MANY.search(self._ask) is not None
            )
            families = self._families() if unstated and (budget is None or done < budget) else []
            if families:
                stating = stating_roots(self._ask)
                return self._run(
                    done, self.code.prose(families, stating), "Search the documents' words for it."
                )
            if figure is not None:
                return self._finish(done, figure)
        if step == "prose":
            searched = next(read_plan(m.content) or {} for m in messages if m.role == "tool")
            return self._finish(done, _Finish(None, prose_evidence(plan, searched)))
        if step == "search" and self._section is not None and (budget is None or done < budget):
            return self._run(done, self.code.section(self._section), "Read the section the question names.")
        if step == "section":
            return self._finish(done, self._section_final(plan))
        if step == "search":
            return self._drill(done, plan, budget)
        return self._finish(done, self._final_from(plan))

    # ------------------------------------------------------------------------ matching (§10.2)
    def _match(self, kind: QuestionClass) -> Target | None:
        """The table, roster or `_sources` a count or list question is about.

        Candidates need a word overlap ≥ 1; the one naming the counted noun ("how many *products*")
        wins, then the best overlap, then the §10.1 order of the class, then the larger, then scope
        order."""
        head = head_word(self._ask, COUNT_WORDS if kind == "count" else LIST_WORDS)
        head_norm = normalize_word(head) if head else ""
        words = set(self._words)
        rank = (
            {"table": 0, "sources": 1, "roster": 2}
            if kind == "count"
            else {"roster": 0, "table": 1, "sources": 2}
        )
        best: tuple[tuple[int, int, int, int, int], Target] | None = None

        def offer(target: Target, vocabulary: frozenset[str], size: int, order: int) -> None:
            nonlocal best
            overlap = len(words & vocabulary)
            if not overlap:
                return
            key = (0 if head_norm in vocabulary else 1, -overlap, rank[target.how], -size, order)
            if best is None or key < best[0]:
                best = (key, target)

        for order, table in enumerate(self.scope.tables):
            if table.type is not None:  # system tables answer only through the `_sources` rule
                offer(self._table_target(table, head, head_norm), table.words, table.row_count, order)
        for order, typ in enumerate(self.scope.types):
            if typ.has_roster and typ.count > 0:  # typed tables' rosters only point at the table
                label = head if head and head_norm in typ.words else typ.name.lower()
                offer(Target("roster", label, type=typ), typ.words, typ.count, order)
        slugs = tuple(s for s in self.scope.slugs if self.scope.has_table(s, "_sources"))
        if head and head_norm in _DOC_NOUNS and slugs:
            offer(Target("sources", head, source_slugs=slugs), frozenset({head_norm}), 0, 0)
        return best[1] if best else None

    def _table_target(self, table: TableInfo, head: str | None, head_norm: str) -> Target:
        where, params, phrases = self._where(table)
        fallback = f"{table.type or table.name} rows"
        label = head if head and head_norm in table.words else fallback
        return Target("table", label, table, None, where, params, phrases)

    def _where(self, table: TableInfo) -> tuple[tuple[str, ...], tuple[str, ...], str]:
        """WHERE clauses from a year and a quoted phrase only; values bound as parameters."""
        where: list[str] = []
        params: list[str] = []
        phrase_parts: list[str] = []
        year = _YEAR.search(self._ask)
        if year:
            column = next(
                (
                    c
                    for c, t in table.user_columns
                    if any(k in c.lower() for k in _TIME_COLUMN) and ("TEXT" in t or "year" in c.lower())
                ),
                None,
            )
            if column is not None:
                where.append(f"substr({quote_ident(column)}, 1, 4) = ?")
                params.append(year.group(1))
                phrase_parts.append(f" with {column} in {year.group(1)}")
        phrases = quoted_phrases(self._ask)
        text_columns = [c for c, t in table.user_columns if "TEXT" in t or t == ""]
        if phrases and text_columns:
            words = set(self._words)

            def rank(item: tuple[int, str]) -> tuple[int, int, int]:
                index, column = item
                overlap = len(words & {normalize_word(w) for w in raw_words(column)})
                return (-overlap, 0 if column in table.natural_key else 1, index)

            column = min(enumerate(text_columns), key=rank)[1]
            where.append(f"{quote_ident(column)} LIKE ?")
            params.append(f"%{phrases[0]}%")
            phrase_parts.append(f' where {column} contains "{phrases[0]}"')
        return tuple(where), tuple(params), "".join(phrase_parts)

    def _carried(self, previous: tuple[tuple[str, str], ...]) -> tuple[str, list[str]] | None:
        """A follow-up that names no document of its own still means the documents the previous turn
        cited: (context, paths) of the first context among them that this turn's scope holds,
        searched beside the whole scope (§10.1). A follow-up continues ("and in 2024?", "what about
        its margin?"), points back (a pronoun), or is too short to stand alone ("gross profit?")."""
        if not previous or not self._follows or self.scope.named_documents(self._ask):
            return None
        slug = next((s for s, _p in previous if s in self.scope.slugs), None)
        if slug is None:
            return None
        return slug, [path for s, path in previous if s == slug][:MAX_CARRIED]

    @property
    def _follows(self) -> bool:
        """Whether the ask continues the previous turn (§10.1, `follow_ups.follows_on`)."""
        return self.previous is not None and follows_on(self._ask)

    def _search_query(self) -> str | None:
        """Follow-ups (§10.1): a short ask that continues the previous one borrows its content words,
        but for what it names itself: its period replaces the previous one's years, its quantity the
        previous quantity (issue 45: "And in 2016?" after "What was Netflix's net income in 2017?")."""
        if self.previous is None or len(self._words) >= 6 or not self._follows:
            return None
        own_years = bool(asked_years(self._ask))
        replaced = set(asked_quantity(self.previous.what)) if follow_up_quantity(self._ask) else set()
        extra: list[str] = []
        for word in raw_words(self.previous.text):
            norm = normalize_word(word)
            if word in STOP_WORDS or norm in self._words or word in extra or norm in replaced:
                continue
            if own_years and asked_years(word):
                continue
            extra.append(word)
        if not extra:
            return None
        return (self._ask + " " + " ".join(extra))[:MAX_ASK_CHARS]

    def _first_step(self) -> Reply:
        target = self._target
        if self.question_class == "count" and target is not None:
            return self._run(0, self.code.count(target), f"Count the {target.label} with SQL.")
        if self.question_class == "list" and target is not None:
            return self._run(0, self.code.listing(target), f"List the {target.label}.")
        if self.question_class == "exact_id":
            return self._run(0, self.code.exact(), "Keyword search for the identifiers and a hybrid search.")
        return self._general_search(0)

    def _general_search(self, done: int) -> Reply:
        self.question_class = "general"
        what = "Search the source chunks and the artifacts"
        if self._figure is not None:
            what += ", and read the table cells of the asked quantity on the top pages"
        return self._run(done, self.code.general(self._figure), what + ".")

    def _figure_ask(self) -> FigureAsk | None:
        """A "what was / how much" question whose quantity has a name, over contexts with `_cells`
        (§10, Sleuth: issue 25 item 8)."""
        # A follow-up means the previous question with what it names in its place (issue 45): its
        # quantity ("what about net income?") or, naming none, the previous one; its period ("and in
        # 2016?") or, naming none, the previous one.
        previous = self.previous if self._follows else None
        follows = previous is not None
        what = previous.what if previous is not None and not follow_up_quantity(self._ask) else self._ask
        when = previous.when if previous is not None and not names_period(self._ask) else self._ask
        moved = trend_quantity(what)  # "how has X changed": X
        quantity = asked_quantity(moved or what) or (follow_up_quantity(what) if follows else [])
        reads = read_words(what)  # a computation's quantity and the rows it implies (a margin's)
        if reads is not None:
            quantity = quantity or reads[0]
        if follows:
            self._computed = moved_to(what, when)
        spanning = formulas.over_periods(what)  # an average, sum or CAGR over a run of years, or a formula
        if spanning:
            quantity = quantity or formulas.averaged_words(what)
        named = [tuple(content_words(n)) for n in formulas.other_names(what, quantity)]  # capex: …
        others = tuple(n for n in named if set(n) != set(quantity))
        contexts = tuple(s for s in self.scope.slugs if self.scope.has_table(s, "_cells"))
        if not quantity or not contexts:
            return None
        exact = asks_computation(what) or reads is not None or spanning or formulas.builds_on(what)
        # the rows of the computation's operands: its quantity's, those it implies, those its formulas
        # and defined terms read ("EBITDA": operating income, D&A), and their other names
        operands = (
            *quantity,
            *(reads[1] if reads else ()),
            *formulas.definition_words(what),
            *sum(others, ()),
        )
        return FigureAsk(
            tuple(quantity),
            contexts,
            exact,
            (  # rows by their other names too ("PP&E": `Property and equipment`)
                *self._words,
                *operands,
                *(formulas.row_words(what) if spanning else ()),
            ),
            formulas.read_years(self._computed or when) if spanning else asked_years(when),
            tuple(tuple(t) for t in named_tables(what)),
            asked_months(when),
            named_quarter(when),
            asks_trend(self._ask) and not asked_years(when),
            tuple(path for path, _issuer in self.scope.named_by_start),
            others,
            tuple(dict.fromkeys(operands)) if exact else (),
        )

    # ------------------------------------------------------------------------ decisions
    def _drill(self, done: int, plan: dict[str, Any], budget: int | None) -> Reply:
        """Step 2 of `general`: cite from the top artifact only if it ranks first after fusion."""
        chunks = plan_hits(plan, "chunks")
        named = plan_hits(plan, "named")
        artifacts = artifact_hits(plan)
        fused = fuse([named, chunks, artifacts])
        if not fused or (budget is not None and done >= budget):
            return self._finish(done, _Finish(None, tabled_first(plan, top_labels([named, chunks]))))
        top = fused[0] if fused[0].artifact is not None else None
        sources: list[str] = []
        # A document the question names was searched inside already (step 1): drilling into it
        # again repeats that search, and drilling into others only adds look-alike pages.
        for hit in [] if named else fused:
            source = hit.source if hit.artifact is not None else hit.path
            if source and source not in sources:
                sources.append(source)
            if len(sources) == 3:
                break
        if top is None and not sources:
            return self._finish(done, _Finish(None, tabled_first(plan, top_labels([named, chunks]))))
        return self._run(
            done,
            self.code.drill(None if top is None else (str(top.artifact), top.context), sources),
            "Drill into the top artifact and sources.",
        )

    def _final_from(self, plan: dict[str, Any]) -> _Finish:
        """Step 3 of `general` (and the fallback for any plan): the best spans by fused rank."""
        if plan.get("step") == "count":
            return self._count_final(plan)
        if plan.get("step") == "list":
            return self._list_final(plan)
        lists = [*keyword_groups(plan)] + [plan_hits(plan, k) for k in ("named", "chunks", "cited", "inside")]
        return _Finish(None, tabled_first(plan, top_labels(lists)))

    def _section_final(self, plan: dict[str, Any]) -> _Finish:
        """The named section's outline, each item cited (`planner_sections`); the search's best spans
        where no section was found."""
        outline = section_answer(plan)
        if outline is None:
            return self._final_from(plan)
        text, refs = outline
        searched = [plan_hits(plan, k) for k in ("named", "chunks")]
        rest = [r for r in top_labels(searched) if r not in refs]
        return _Finish(text, [*refs, *rest][:FINAL_EVIDENCE], "section")

    def _figure_final(self, plan: dict[str, Any]) -> _Finish | None:
        """One sentence that states the asked figure from its table cell, cited to the cell: the
        first of the plan's `figures` (see `StepCode._figure_lines` for their order)."""
        searched = [*keyword_groups(plan)] + [plan_hits(plan, k) for k in ("named", "chunks")]
        computed = self._computed
        if self._figure is not None and self._figure.exact and computed is not None:
            done = formulas.worked_out(computed, plan.get("rows") or [])
            if done is not None:  # the computation the question defines, each operand cited
                rest = [r for r in top_labels(searched) if r not in done.refs]
                return _Finish(done.sentence, [*done.refs, *rest][:FINAL_EVIDENCE], "computed")
        quantity = self._figure.quantity if self._figure is not None else ()
        years = self._figure.years if self._figure is not None else ()
        exact = self._figure is not None and self._figure.exact  # a computation: its operands, not a series
        trend = self._figure is not None and self._figure.trend  # "how has X changed", no years named
        if (trend or len(years) > 1) and not exact:  # the quantity in each period, not one period's
            each = per_period(plan.get("rows") or [], quantity, None if trend else years)
            if each is not None:
                rest = [r for r in top_labels(searched) if r not in each.refs]
                sure: Assurance = "matched" if each.complete else "nearest"
                return _Finish(each.text, [*each.refs, *rest][:FINAL_EVIDENCE], sure)
        entries = [e for e in plan.get("figures") or [] if stated(e) is not None]
        others = self._figure.others if self._figure is not None else ()
        named = [e for e in entries if any(names_quantity(str(e[1]), q) for q in (quantity, *others))]
        one_figure = not (computed is None or asks_change(computed) or formulas.over_periods(computed))
        if not one_figure:
            # one year's figure is not the change, nor the average or the formula the question defines
            # (a filing's own `Days payable outstanding` row is its definition, not the asked one):
            # the rows are listed below
            named = entries = []
        if one_figure and not named and (own := self._own_fiscal_year(plan, quantity)) is not None:
            rest = [r for r in top_labels(searched) if r != own[0]]
            return _Finish(own[1], [own[0], *rest][:FINAL_EVIDENCE])
        if named:
            ref, sentence = stated(named[0]) or ("", "")
            refs = [ref]
            issuer = self.scope.issuer_naming_by_start(str(named[0][5]))
            if issuer is not None:  # "fiscal 2022" ends in 2023 there: both readings, each cited
                also = [e for e in plan.get("named_figures") or [] if str(e[1]) == str(named[0][1])]
                sentence += fiscal_naming(named[0], issuer, also[0] if also else None)
                refs += [str(e[0]) for e in also[:1]]
            rest = [r for r in top_labels(searched) if r not in refs]
            return _Finish(sentence, [*refs, *rest][:FINAL_EVIDENCE])
        if entries:  # rows that share a word with the quantity but are something else: what the
            # documents say in prose may state it ("employed 93,516 people"), so the quotes answer
            return _Finish(None, top_labels(searched))
        rows = [f for f in map(stated, plan.get("rows") or []) if f is not None]
        if rows and self._figure is not None and self._figure.exact:
            # A computed quantity the planner cannot work out: the figures the question names
            lines = [
                "The figures the question names, as the tables state them (working out the answer "
                "from them needs a model):"
            ]
            lines += [f"- {sentence}" for _ref, sentence in rows]
            refs = [ref for ref, _sentence in rows]
            rest = [r for r in top_labels(searched) if r not in refs]
            return _Finish("\n".join(lines), [*refs, *rest][:FINAL_EVIDENCE], "nearest")
        return None

    def _families(self) -> list[str]:
        """The word families a sentence stating the asked amount would use (`word_families`): the
        quantity's, then the ask's other words ("employ" of "how many people did Amazon employ"); none
        for a computation, whose operands are cells."""
        if self._figure is None or self._figure.exact:
            return []
        others = [w for w in stating_words(self._ask) if w not in self._figure.quantity]
        return list(dict.fromkeys([*family_filters(self._figure.quantity), *family_filters(others)]))[:3]

    def _own_fiscal_year(self, plan: dict[str, Any], quantity: tuple[str, ...]) -> tuple[str, str] | None:
        """(evidence label, sentence) of the asked quantity in the company's own fiscal year of the
        asked number, where it names years by the year they begin and no column ends in that year."""
        for entry in plan.get("named_figures") or []:
            issuer = self.scope.issuer_naming_by_start(str(entry[5]))
            if issuer is not None and names_quantity(str(entry[1]), quantity):
                sentence = own_fiscal_year(entry, issuer)
                if sentence is not None:
                    return str(entry[0]), sentence
        return None

    def _count_final(self, plan: dict[str, Any]) -> _Finish:
        n = plan.get("n")
        target = self._target
        if not isinstance(n, int) or target is None:
            return _Finish(None, [])
        refs = [r for r in plan.get("refs") or [] if isinstance(r, str)][:3]
        self.count = n
        if target.how == "roster":
            where = f"roster `{plan.get('roster') or ''}`"
        elif target.how == "sources":
            where = "table `_sources`"
        else:
            where = f"table `{target.table.name if target.table else plan.get('table')}`"
        text = f"There are {n} {target.label}{target.filter_phrase} (counted in {where})."
        if refs:
            text += " " + "".join(f"[{r}]" for r in refs)
        return _Finish(text, refs)

    def _list_final(self, plan: dict[str, Any]) -> _Finish:
        target = self._target
        raw = plan.get("items") or []
        items: list[tuple[str, str | None]] = []
        for entry in raw if isinstance(raw, list) else []:
            if isinstance(entry, list) and entry and isinstance(entry[0], str):
                ref = entry[1] if len(entry) > 1 and isinstance(entry[1], str) else None
                items.append((entry[0], ref))
        total = plan.get("total")
        total = total if isinstance(total, int) and total >= len(items) else len(items)
        self.items = [text for text, _ref in items]
        if target is None or not items:
            return _Finish(None, [])
        shown = items[:LIST_SHOWN]
        lines = [f"The {target.label}{target.filter_phrase} are:"]
        lines += [f"- {text}" + (f" [{ref}]" if ref else "") for text, ref in shown]
        if total > len(shown):
            lines.append(f"… and {total - len(shown)} more")
        refs: list[str] = []
        for _text, ref in shown:
            if ref and ref not in refs:
                refs.append(ref)
        return _Finish("\n".join(lines), refs)

    def _fallback(self, messages: list[Message]) -> _Finish:
        """Finish with what the most recent readable plan showed (a cut line reads as none)."""
        for message in reversed(messages):
            if message.role != "tool":
                continue
            plan = read_plan(message.content)
            if plan is not None:
                return self._final_from(plan)
        return _Finish(None, [])

    # ------------------------------------------------------------------------ replies
    def _run(self, done: int, code: str, commentary: str) -> Reply:
        call = ToolCall(f"offline_{done + 1}", "run_python", {"code": code, "commentary": commentary[:200]})
        return Reply("", [call], TokenUsage(), self.config.id, "tool_calls")

    def _finish(self, done: int, finish: _Finish) -> Reply:
        self.draft = finish.answer
        if finish.answer is None:
            self.assurance = "nearest" if finish.evidence else "none"
        else:
            self.assurance = finish.assurance
        arguments: dict[str, Any] = {"evidence": finish.evidence}
        if finish.answer is not None:
            arguments = {"answer": finish.answer, "evidence": finish.evidence}
        return Reply(
            "",
            [ToolCall(f"offline_{done + 1}", "final", arguments)],
            TokenUsage(),
            self.config.id,
            "tool_calls",
        )
