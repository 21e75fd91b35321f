"""The Python each offline planner step runs (spec/runtime.md §10), written for the REPL like a model's
code: real SDK calls, then a `#PLAN ` line the planner reads back. Every variant is compiled and linted
by the tests (`tests/agent/test_planner_code.py`), since no linter sees code built as text.
"""

from __future__ import annotations

import inspect
import re

from sleuth.agent.extractive import (
    caption_words,
    identifier_tokens,
    normalize_word,
)
from sleuth.agent.planner_figures import NET_OF, OF_WHAT, STATEMENT, FigureAsk
from sleuth.agent.planner_prose import prose_code
from sleuth.agent.planner_scope import (
    PlannerScope,
    Target,
    quote_ident,
)
from sleuth.agent.planner_sections import section_code
from sleuth.format.figures import CHANGE_COLUMN
from sleuth.format.periods import NTH_QUARTER, QUARTER_NAMED, named_quarter
from sleuth.store.text import stem

MAX_PLAN_CHARS = 4000  # the whole `#PLAN …` line: a three-year formula's dozen operand rows fit
FIGURE_PAGES = 8  # pages of the top hits whose table cells a figure question reads
TABLED_PAGES = 2  # pages of the tables a question names that are read whole
TABLED_CHUNKS = 3  # chunks of each such page kept as evidence (a statement fills one to three)
#: In one document, the page of the table with the most rows whose caption holds given words.
_TITLED_SQL = "SELECT page, table_no, COUNT(DISTINCT row_no) AS n FROM _cells WHERE source = ?"
_CELL_COLUMNS = (
    'label, section, title, header, year, months, unit, text, value, source, page, start, "end", column_no'
)
_CELLS_SQL = (
    f"SELECT {_CELL_COLUMNS} FROM _cells "
    "WHERE source = ? AND page = ? AND value IS NOT NULL AND header IS NOT NULL"
)
#: The named documents' cells whose label holds every quantity word, with the size of their table.
_NAMED_CELLS_SQL = (
    f"SELECT {_CELL_COLUMNS}, (SELECT COUNT(*) FROM _cells t WHERE t.source = c.source "
    "AND t.page = c.page AND t.table_no = c.table_no) AS size FROM _cells c "
    "WHERE source = ? AND value IS NOT NULL AND header IS NOT NULL"
)
#: The planner's word stemmer, written into the step: the cells' labels are stemmed in the sandbox
#: exactly as the question's words were on the host.
_STEM = inspect.getsource(stem).splitlines()
#: And the quarter a column header names, read as the question's was (`format.periods.named_quarter`).
_NAMED_QUARTER = inspect.getsource(named_quarter).splitlines()
FIGURE_NAMED_CELLS = 200  # at most this many of a named document's cells are read
FIGURE_OPERAND_CELLS = 400  # at most this many of a named document's cells are read for operands
MAX_OPERAND_WORDS = 16  # question words a computation's operand rows are looked up by
FIGURE_ROWS = 16  # rows the question names (a quantity in each of several years), for a computed one
#: Words a row label may hold beyond the question's own and still be named by it.
LABEL_STOP = frozenset(
    {
        "and",
        "of",
        "the",
        "for",
        "to",
        "in",
        "on",
        "from",
        "by",
        "with",
        "per",
        "total",
        "consolidated",
        "a",
        "an",
    }
)
#: A cash flow statement's `Changes in operating assets and liabilities`: its `Accounts payable` is the
#: year's change (4,086), not the payables (46,092), and answers neither.
CHANGES_SECTION = re.compile(r"\bchanges?\s+in\b[^>]*\b(?:assets|liabilities|working\s+capital)\b", re.I)
#: A table of one part of a company (`Selected financial data for the Domestic segment`): its
#: `Revenue` is the part's, so it answers for the whole only after the whole's own tables.
PART_OF = re.compile(r"\bsegments?\b|\bdivisions?\b", re.IGNORECASE)
#: What starts the line a step prints for the planner (and that `sleuth ask` keeps from people).
PLAN_PREFIX = "#PLAN "
_PLAN_LIMIT = MAX_PLAN_CHARS - len(PLAN_PREFIX)


_PLAN_HELPER = f'''def plan_line(plan, lists):
    """`#PLAN ` and compact JSON for the planner; the longest lists are cut until the line fits."""
    line = json.dumps(plan, ensure_ascii=False, separators=(",", ":"))
    while len(line) > {_PLAN_LIMIT} and any(plan[k] for k in lists):
        plan[max((k for k in lists if plan[k]), key=lambda k: len(plan[k]))].pop()
        plan["cut"] = True
        line = json.dumps(plan, ensure_ascii=False, separators=(",", ":"))
    if len(line) > {_PLAN_LIMIT}:
        line = json.dumps({{"step": plan["step"], "class": plan["class"], "cut": True}})
    return "{PLAN_PREFIX}" + line
'''
"""Defined in every step that prints hits or items (a step that kills the sandbox loses the REPL)."""
_ROW_HELPER = """
def row(h):
    return [h.ref, round(h.score, 6), paths.index(h.name), h.fields["page"], h.fields["start"]]
"""
"""Defined in every step that prints hits: one hit as a `#PLAN` row (its path by index in `paths`)."""


class StepCode:
    """The step code of one turn's planner: one method per step kind, each returning the source.
    `query` is a follow-up's widened search (None: the ask is searched as it is)."""

    def __init__(
        self,
        ask: str,
        query: str | None,
        scope: PlannerScope,
        carried: tuple[str, list[str]] | None = None,
        author: str = "Offline planner",
    ) -> None:
        self._ask = ask
        self._query = query
        self.scope = scope
        self._carried = carried
        self.author = author  # who wrote the step, as its first comment says

    # ------------------------------------------------------------------------ code generation
    def _ctx(self, slug: str | None) -> str:
        return f", context={slug!r}" if slug is not None and len(self.scope.slugs) > 1 else ""

    def _preamble(self, comment: str, helper: bool = True, rows: bool = True) -> list[str]:
        lines = [f"# {self.author}: {comment}", f"ask = {self._ask!r}"]
        if self._query is not None:
            lines.append(f"query = {self._query!r}  # a follow-up: the previous question's words added")
        if helper:
            lines += (_PLAN_HELPER + (_ROW_HELPER if rows else "")).splitlines()
        return lines

    @property
    def _q(self) -> str:
        return "query" if self._query is not None else "ask"

    def count(self, target: Target) -> str:
        show = f'print("{PLAN_PREFIX}" + json.dumps(plan, ensure_ascii=False, separators=(",", ":")))'
        if target.how == "roster":
            assert target.type is not None
            lines = self._preamble(f"count the {target.label} in the roster of {target.type.name!r}.", False)
            lines += [
                f"roster = read_rosters(type={target.type.name!r}{self._ctx(target.type.context)})[0]",
                "n = len(roster.entries)",
                'plan = {"step": "count", "class": "count", "n": n, "refs": [], "roster": roster.name}',
                show,
                "print(roster)",
                "print([e.name for e in roster.entries[:20]])",
            ]
            return "\n".join(lines) + "\n"
        if target.how == "sources":
            measure = "SUM(pages)" if normalize_word(target.label) == "page" else "COUNT(*)"
            sql = f"SELECT {measure} AS n FROM _sources"
            lines = self._preamble(f"count the {target.label} in the `_sources` table.", False)
            if len(self.scope.slugs) > 1:
                slugs = list(target.source_slugs)
                lines += [
                    f"counts = {{slug: query_db({sql!r}, [], context=slug)[0]['n'] or 0",
                    f"          for slug in {slugs!r}}}",
                    "n = sum(counts.values())",
                ]
                shown = "counts"
            else:
                lines += [f"rows = query_db({sql!r}, [])", 'n = rows[0]["n"] or 0']
                shown = "rows"
            lines += [
                'plan = {"step": "count", "class": "count", "n": n, "refs": [], "table": "_sources"}',
                show,
                f"print({shown})",
            ]
            return "\n".join(lines) + "\n"
        table = target.table
        assert table is not None
        name = quote_ident(table.name)
        where = f" WHERE {' AND '.join(target.where)}" if target.where else ""
        args = f"{list(target.params)!r}{self._ctx(table.context)}"
        lines = self._preamble(f"count the rows of table `{table.name}`.", False)
        lines.append(f"rows = query_db({f'SELECT COUNT(*) AS n FROM {name}{where}'!r}, {args})")
        if table.has_column("_provenance"):
            lines += [
                f"cited = query_db({f'SELECT _provenance FROM {name}{where} LIMIT 3'!r}, {args})",
                'refs = [r["_provenance"][0] for r in cited if r["_provenance"]]',
            ]
        else:
            lines += ["cited = []", "refs = []"]
        lines += [
            f'plan = {{"step": "count", "class": "count", "n": rows[0]["n"] or 0, "refs": refs, '
            f'"table": {table.name!r}}}',
            show,
            "print(rows)",
            "print(cited)",
        ]
        return "\n".join(lines) + "\n"

    def listing(self, target: Target) -> str:
        lines = self._preamble(f"list the {target.label}.", rows=False)  # items, not hits
        if target.how == "roster":
            assert target.type is not None
            lines += [
                f"roster = read_rosters(type={target.type.name!r}{self._ctx(target.type.context)})[0]",
                "items = [[e.name[:200], None] for e in roster.entries]",
            ]
        elif target.how == "sources":
            sql = "SELECT path, title FROM _sources ORDER BY path"
            if len(self.scope.slugs) > 1:
                slugs = list(target.source_slugs)
                lines.append(f"rows = [r for slug in {slugs!r} for r in query_db({sql!r}, [], context=slug)]")
            else:
                lines.append(f"rows = query_db({sql!r}, [])")
            lines += [
                "items = [",
                '    [("{} ({})".format(r["title"], r["path"]) if r["title"] else r["path"])[:200], None]',
                "    for r in rows",
                "]",
            ]
        else:
            table = target.table
            assert table is not None
            keys = [k for k in table.natural_key if table.has_column(k)]
            text_columns = [c for c, t in table.user_columns if "TEXT" in t]
            columns = keys or text_columns[:1] or [c for c, _t in table.user_columns][:1]
            name = quote_ident(table.name)
            where = f" WHERE {' AND '.join(target.where)}" if target.where else ""
            args = f"{list(target.params)!r}{self._ctx(table.context)}"
            selected = ", ".join(quote_ident(c) for c in columns)
            order = ", ".join(str(i) for i in range(1, len(columns) + 1))
            sql = f"SELECT DISTINCT {selected} FROM {name}{where} ORDER BY {order} LIMIT 200"
            lines += [f"cols = {columns!r}", f"rows = query_db({sql!r}, {args})", "first = {}"]
            if table.has_column("_provenance"):
                lines += [
                    f"for r in query_db({f'SELECT {selected}, _provenance FROM {name}{where}'!r}, {args}):",
                    '    if r["_provenance"]:',
                    '        first.setdefault(tuple(r[c] for c in cols), r["_provenance"][0])',
                ]
            lines += [
                "items = [",
                '    [", ".join(str(r[c]) for c in cols)[:200], first.get(tuple(r[c] for c in cols))]',
                "    for r in rows",
                "    if any(r[c] is not None for c in cols)",
                "]",
            ]
        lines += [
            'plan = {"step": "list", "class": "list", "total": len(items), "items": items[:]}',
            'print(plan_line(plan, ["items"]))',
            "for text, ref in items:",
            '    print("-", text if ref is None else f"{text} {ref}")',
        ]
        return "\n".join(lines) + "\n"

    def exact(self) -> str:
        lines = self._preamble("exact identifiers: keyword search for each, plus one hybrid search.")
        lines += [
            f"tokens = {identifier_tokens(self._ask)!r}",
            "*found, chunks = await asyncio.gather(",
            "    *(search_source_by_keyword(t, top_k=5) for t in tokens[:3]),",
            f"    search_source({self._q}, top_k=5),",
            ")",
            "paths = sorted({h.name for hits in [*found, chunks] for h in hits})",
            "plan = {",
            '    "step": "search",',
            '    "class": "exact_id",',
            '    "paths": paths,',
            '    "keyword": [[i, *row(h)] for i, hits in enumerate(found) for h in hits],',
            '    "chunks": [row(h) for h in chunks],',
            "}",
            'print(plan_line(plan, ["keyword", "chunks"]))',
            "for h in {h.ref: h for hits in [*found, chunks] for h in hits}.values():",
            '    print(h.ref, h.name, "p.", h.fields["page"], h.fields["chunk_text"][:300])',
        ]
        return "\n".join(lines) + "\n"

    def general(self, figure: FigureAsk | None = None) -> str:
        """The hybrid search; with `figure`, also the table cells on the top hits' pages whose row
        label holds every word of the asked quantity (and whose column is the asked year)."""
        named = self._named_sources()
        lines = self._preamble("what the documents say: hybrid search over chunks and artifacts.")
        searches = [f"search_source({self._q}, top_k=10)", f"search_knowledge({self._q}, top_k=5)"]
        if named is not None:
            slug, paths = named
            why = (
                "the documents the previous turn cited (a follow-up that names none)"
                if named is self._carried
                else "the documents the question names (orientation: documents)"
            )
            lines.append(f"named = {paths!r}  # {why}")
            searches.append(f"search_in_sources(named, {self._q}, max_total=10{self._ctx(slug)})")
        lines += [
            f"chunks, arts{', inside_named' if named else ''} = await asyncio.gather(",
            *(f"    {call}," for call in searches),
            ")",
        ]
        if named is None:
            lines.append("inside_named = []")
        lines += self._tabled_lines(named)
        lines += [
            'firsts = [a.fields["sources"][0] if a.fields["sources"] else None for a in arts]',
            "paths = sorted({h.name for h in [*chunks, *inside_named, *tabled]} | {s for s in firsts if s})",
            "plan = {",
            '    "step": "search",',
            '    "class": "general",',
            '    "paths": paths,',
            '    "named": [row(h) for h in inside_named],',
            '    "tabled": [row(h) for h in tabled],',
            '    "chunks": [row(h) for h in chunks],',
            '    "artifacts": [',
            "        [a.name, a.fields['context'], round(a.score, 6), paths.index(s) if s else -1]",
            "        for a, s in zip(arts, firsts)",
            "    ],",
            "}",
        ]
        if figure is not None:
            lines += self._figure_lines(figure, named)
        cut = [
            "chunks",
            "named",
            "artifacts",
            "tabled",
            *(["rows", "figures", "named_figures"] if figure else []),
        ]
        lines += [
            f"print(plan_line(plan, {cut!r}))",
            "for h in {h.ref: h for h in [*tabled, *inside_named, *chunks]}.values():",
            '    print(h.ref, h.name, "p.", h.fields["page"], h.fields["chunk_text"][:300])',
            "for a in arts:",
            "    print(a)",
        ]
        if figure is not None:
            lines += ["for f in [*plan['figures'], *plan['rows']]:", "    print(f)"]
        return "\n".join(lines) + "\n"

    def _tabled_lines(self, named: tuple[str, list[str]] | None) -> list[str]:
        """The pages of the tables the question points at ("… shown in the cash flow statement"): in
        each named document, the table with the most rows whose caption holds the words the question
        names it by, read whole (`read_page`) so the answer can quote the table the person meant,
        whatever the search ranked first. Defines `tabled` (hits); empty without such a table."""
        tables = caption_words(self._ask)
        if named is None or not tables or not self.scope.has_table(named[0], "_cells"):
            return ["tabled = []"]
        ctx = self._ctx(named[0])
        return [
            f"table_words = {tables!r}  # the tables the question names (stemmed words of their captions)",
            "tabled, tabled_pages = [], []",
            "for path in named[:3]:",
            "    for words in table_words:",
            f"        sql = {_TITLED_SQL!r} + ' AND title LIKE ?' * len(words)",
            "        sql += ' GROUP BY page, table_no ORDER BY n DESC, page LIMIT 1'",
            f"        for r in query_db(sql, [path, *('%' + w + '%' for w in words)]{ctx}):",
            "            if (path, r['page']) not in tabled_pages:",
            "                tabled_pages.append((path, r['page']))",
            f"for path, page in tabled_pages[:{TABLED_PAGES}]:",
            "    try:",
            f"        tabled += read_page(path, page, max_chars=6000{ctx}).hits[:{TABLED_CHUNKS}]",
            "    except Exception:  # a page of cells but no chunk (NotFoundError): the searches still count",
            "        pass",
        ]

    def _figure_lines(self, figure: FigureAsk, named: tuple[str, list[str]] | None) -> list[str]:
        """Cells of `_cells` whose label holds a quantity word and whose label, column header and group
        hold them all, on the pages of the top hits (in rank order, at most
        `FIGURE_PAGES`) and, in the documents the question names, wherever their label holds them
        all (`total` may be missing: a statement's `Merchandise inventories` is the total). Most
        words in the label first, then a table whose title names a statement the question points at
        ("the balance sheet"), then fewest other label words, then page rank (a named
        document's other pages after the hits'), then the larger table (a statement over a note's
        extract), then the leftmost column (statements put the latest period first)."""
        many = len(self.scope.slugs) > 1
        # `total` may be left out of a row label (`Merchandise inventories` is the total)
        needed = [q for q in figure.quantity if q != "total"] or list(figure.quantity)
        lines = [
            f"quantity = {figure.quantity!r}  # the asked quantity's words (stemmed)",
            f"needed = {needed!r}  # the words a row must hold (`total` may be left out)",
            f"year = {figure.year!r}  # the one year the question names, or None",
            f"months = {figure.months!r}  # the asked period's length in months, or None",
            f"quarter = {figure.quarter!r}  # the quarter the question names, or None",
            f"QUARTER_NAMED = re.compile({QUARTER_NAMED.pattern!r}, re.IGNORECASE)",
            f"NTH_QUARTER = {NTH_QUARTER!r}",
            *_NAMED_QUARTER,
            "def other_quarter(header):",
            "    named = named_quarter(header or '')",
            "    return quarter is not None and named is not None and named != quarter",
            f"cell_contexts = {list(figure.contexts)!r}  # contexts whose version has `_cells`",
            f"exact = {figure.exact!r}  # a computed quantity: only a row of exactly its words answers",
            f"change_column = re.compile({CHANGE_COLUMN.pattern!r}, re.IGNORECASE)  # `% Change`",
            f"part_of = re.compile({PART_OF.pattern!r}, re.IGNORECASE)  # a table of one segment",
            f"changes = re.compile({CHANGES_SECTION.pattern!r}, re.IGNORECASE)  # `Changes in … liabilities`",
            *_STEM,
            "def words(text):",
            '    return {stem(w) for w in re.findall(r"[a-z0-9]+", (text or "").lower())}',
            f"asked = {sorted(set(figure.words))!r}  # the question's words: rows it names are read too",
            f"operands = {sorted(set(figure.operands))!r}  # a computation's operand words: their rows first",
            f"years = {list(figure.years)!r}  # the years it names",
            f"trend = {figure.trend!r}  # how the quantity moved, no years named: every column",
            f"label_stop = {sorted(LABEL_STOP)!r}",
            f"net_of = re.compile({NET_OF.pattern!r}, re.IGNORECASE)  # `…, net of construction payable`",
            f"of_what = re.compile({OF_WHAT.pattern!r}, re.IGNORECASE)  # what a two-word quantity is of",
            f"statement = re.compile({STATEMENT.pattern!r}, re.IGNORECASE)  # a financial statement's title",
            f"tables = {[list(t) for t in figure.tables]!r}  # the statements the question points at",
            "found = {}",
            "named_rows = {}",
            f"named_by_start = {list(figure.named_by_start)!r}  # their fiscal Y ends in Y + 1",
            f"others = {[list(o) for o in figure.others]!r}  # the quantity's other names, as words",
            "found_named = {}",
            "def titled(c):  # a table whose title names a statement the question points at",
            '    return not tables or any(set(t) <= words(c["title"]) for t in tables)',
            "def cell_entry(c, path, page):",
            '    return [c["_evidence"], c["label"][:120], c["header"][:80], c["text"], c["unit"],',
            '            path, page, c["value"], (c["section"] or "")[:80], c["year"], titled(c)]',
            f"names_part = {bool(PART_OF.search(' '.join(figure.words)))!r}  # the question names a segment",
            "def a_part(c):  # a segment's table answers for the whole only when the question names one",
            '    return bool(part_of.search(c["title"] or "")) and not names_part',
            "def consider_row(c, rank, path, page):",
            '    core = words(net_of.sub("", c["label"])) - set(label_stop)  # not what it nets',
            '    head = words(of_what.sub("", c["label"])) - set(label_stop)',
            "    if not core <= set(asked) and len(head) >= 2:  # `Depreciation and amortization of …`",
            "        core = head",
            '    if "_evidence" not in c or not core or not core <= set(asked) or c["header"] is None:',
            "        return",
            '    if changes.search(c["section"] or ""):  # a cash flow line of its change, not its amount',
            "        return",
            '    if (years and c["year"] not in years) or (not years and not trend and c["column_no"] != 1):',
            "        return",
            '    if months and c["months"] and c["months"] != months:  # a quarter is not the year',
            "        return",
            '    if other_quarter(c["header"]):',
            "        return",
            '    if years and change_column.search(c["header"]):  # the change in the year, not its figure',
            "        return",
            '    key = [bool(operands) and not core - {"net"} <= set(operands), -len(core), not titled(c),',
            '           not statement.search(c["title"] or ""), not c["unit"], a_part(c), rank,',
            '           -c.get("size", 0), c["column_no"]]',
            '    name = (tuple(sorted(core)), c["year"])  # `Net sales`, `Total net sales`: one, the best',
            "    named_rows.setdefault(name, []).append((key, cell_entry(c, path, page)))",
            "def consider(c, rank, path, page, year=year, found=found,",
            "             quantity=quantity, needed=needed, alias=0):",
            '    label = words(c["label"])',
            '    around = label | words(c["header"]) | words(c["section"])',
            "    inside = sum(1 for q in quantity if q in label)",
            '    if "_evidence" not in c or not inside or not all(q in around for q in needed):',
            "        return",
            '    if changes.search(c["section"] or ""):',
            "        return",
            '    if year is not None and (c["year"] != year or change_column.search(c["header"])):',
            "        return",
            '    if (months and c["months"] and c["months"] != months) or other_quarter(c["header"]):',
            "        return",
            '    if exact and (inside < len(quantity) or label - set(quantity) - {"total"}):',
            "        return",
            "    key = [len(needed) - inside, alias, not titled(c), a_part(c), len(label - set(quantity)),",
            '           rank, -c.get("size", 0), c["column_no"]]',
            '    if c["_evidence"] not in found or key < found[c["_evidence"]][0]:',
            '        found[c["_evidence"]] = (key, cell_entry(c, path, page))',
            "pages = []",
            "for h in [*inside_named, *chunks]:",
            '    key = (h.name, h.fields["page"], h.fields["context"])',
            "    if key not in pages and key[2] in cell_contexts:",
            "        pages.append(key)",
            f"for rank, (path, page, ctx) in enumerate(pages[:{FIGURE_PAGES}]):",
            f"    for c in query_db({_CELLS_SQL!r}, [path, page]{', context=ctx' if many else ''}):",
            "        consider(c, rank, path, page)",
            "        for other in others:  # the quantity's other names (`Purchases of property …`)",
            "            consider(c, rank, path, page, quantity=other, needed=other, alias=1)",
            "        consider_row(c, rank, path, page)",
            "        if year is not None and path in named_by_start:  # the company's own fiscal `year`",
            "            consider(c, rank, path, page, year + 1, found_named)",
        ]
        if named is not None and named[0] in figure.contexts:
            slug, _paths = named
            lines += self._named_cells(
                slug,
                needed,
                [
                    f"consider(c, {FIGURE_PAGES}, path, c['page'])",
                    "if year is not None and path in named_by_start:",
                    f"    consider(c, {FIGURE_PAGES}, path, c['page'], year + 1, found_named)",
                ],
            )
            for other in figure.others:  # the rows of the quantity's other names, likewise
                words = list(other)
                call = f"consider(c, {FIGURE_PAGES}, path, c['page'], quantity={words!r}, needed={words!r},"
                lines += self._named_cells(slug, words, [call, "         alias=1)"])
            lines += self._operand_lines(figure, slug)
        lines += [
            "figures = sorted(found.values(), key=lambda f: f[0])",
            'plan["figures"] = [entry for _key, entry in figures[:3]]',
            'plan["named_figures"] = [e for _k, e in sorted(found_named.values(), key=lambda f: f[0])[:1]]',
            "spans = {}  # the years each row of each page holds: a row that holds them all is one series",
            "for (core, _y), held in named_rows.items():",
            "    for _key, e in held:",
            "        spans.setdefault((core, e[5], e[6], e[1]), set()).add(e[9])",
            "def spanned(core, f, held):  # a row with several columns of the year is quarters or parts",
            "    row = (f[1][5], f[1][6], f[1][1])",
            "    columns = len({e[0] for _k, e in held if (e[5], e[6], e[1]) == row})  # cells, once each",
            "    return (*f[0][:2], columns > 1, -len(spans[(core, *row)]), *f[0][2:])",
            "rows_named = sorted((min(held, key=lambda f, core=core, held=held: spanned(core, f, held))",
            "                     for (core, _y), held in named_rows.items()), key=lambda f: f[0])",
            f'plan["rows"] = [entry for _key, entry in rows_named[:{FIGURE_ROWS}]]',
        ]
        return lines

    def _named_cells(self, slug: str, words: list[str], call: list[str]) -> list[str]:
        """In each named document, the cells whose label holds every one of `words`, shortest label
        first, at most `FIGURE_NAMED_CELLS`; `call` is run for each cell `c`."""
        likes = " AND ".join(["label LIKE ?"] * len(words))
        sql = f"{_NAMED_CELLS_SQL} AND {likes} ORDER BY length(label), page LIMIT {FIGURE_NAMED_CELLS}"
        return [
            "for path in named:",
            f"    for c in query_db({sql!r}, [path, *{[_like(w) for w in words]!r}]{self._ctx(slug)}):",
            *(f"        {line}" for line in call),
        ]

    def _operand_lines(self, figure: FigureAsk, slug: str) -> list[str]:
        """A computation's operands wherever the named documents state them in the asked years: rows
        whose label holds one of the question's words, beyond the top hits' pages (Coca-Cola's net
        income is on a statement page the search did not rank). The operands' own words are looked up
        first, shortest label first (an MD&A's hundred `… revenues` cells do not crowd out the
        statement's `Total net revenues`); at most `FIGURE_OPERAND_CELLS` cells a lookup."""
        if not figure.exact or not figure.years:
            return []
        lines = []
        for order, words in (("length(label), page", figure.operands), ("page", sorted(figure.words))):
            likes = list(dict.fromkeys(_like(w) for w in words if len(w) >= 4 and w.isalpha()))
            likes = [w for w in likes if w.strip("%") not in LABEL_STOP][:MAX_OPERAND_WORDS]
            if not likes:
                continue
            sql = (
                f"{_NAMED_CELLS_SQL} AND year IN ({', '.join('?' * len(figure.years))})"
                f" AND ({' OR '.join(['label LIKE ?'] * len(likes))}) ORDER BY {order}"
                f" LIMIT {FIGURE_OPERAND_CELLS}"
            )
            lines += [
                "for path in named:  # the operands on the named documents' other pages",
                f"    for c in query_db({sql!r}, [path, *{list(figure.years)!r}, *{likes!r}]"
                f"{self._ctx(slug)}):",
                f"        consider_row(c, {FIGURE_PAGES}, path, c['page'])",
            ]
        return lines

    def _named_sources(self) -> tuple[str, list[str]] | None:
        """The first context with documents the ask names, and their paths; for a follow-up that names
        none, the documents the previous turn cited (`carried`)."""
        named = self.scope.named_documents(self._ask)
        if not named:
            return self._carried
        slug = named[0][0]
        return slug, [path for s, path in named if s == slug]

    def section(self, wanted: tuple[str, ...]) -> str:
        """Read the section the question names, by its own headings (`planner_sections`)."""
        return section_code(
            self._preamble("read the section the question names, in its own headings."), wanted
        )

    def prose(self, families: list[str], stating: list[str]) -> str:
        """The prose step (`planner_prose`), in the documents the question names where it names some."""
        lines = self._preamble("the sentences that name the quantity in the documents' own words.")
        named = self._named_sources()  # the documents the question names: theirs, not another's
        within = "" if named is None else f", sources={named[1]!r}{self._ctx(named[0])}"
        return prose_code(lines, self._q, families, stating, within)

    def drill(self, artifact: tuple[str, str | None] | None, sources: list[str]) -> str:
        """Cite from `artifact` (its name and context) and search inside `sources`."""
        lines = self._preamble("drill into the top artifact and the top sources.")
        lines.append(f"sources = {sources!r}")
        inside = f"search_in_sources(sources, {self._q}, max_total=12)"
        cite = ""
        if artifact is not None:
            name, context = artifact
            cite = f"cite_from_artifact({name!r}, [{self._q}], max_total=6{self._ctx(context)})"
        if cite and sources:
            lines.append(f"cited, inside = await asyncio.gather({cite}, {inside})")
        elif cite:  # an artifact without sources: its own quotes are all there is
            lines += [f"cited = await {cite}", "inside = []"]
        else:
            lines += ["cited = []", f"inside = await {inside}"]
        lines += [
            "paths = sorted({h.name for h in [*chunks, *inside_named, *tabled, *cited, *inside]})",
            "plan = {",
            '    "step": "drill",',
            '    "class": "general",',
            '    "paths": paths,',
            '    "named": [row(h) for h in inside_named],',
            '    "tabled": [row(h) for h in tabled],',
            '    "chunks": [row(h) for h in chunks],',
            '    "cited": [row(h) for h in cited],',
            '    "inside": [row(h) for h in inside],',
            "}",
            'print(plan_line(plan, ["chunks", "named", "tabled", "cited", "inside"]))',
            "for h in {h.ref: h for h in [*cited, *inside]}.values():",
            '    print(h.ref, h.name, "p.", h.fields["page"], h.fields["chunk_text"][:300])',
        ]
        return "\n".join(lines) + "\n"


def _like(word: str) -> str:
    """A `LIKE` pattern for a row label holding a stemmed word: `inventory` is cut to `inventor`, so
    `Inventories` holds it."""
    return "%" + (word[:-1] if word.endswith("y") else word) + "%"
