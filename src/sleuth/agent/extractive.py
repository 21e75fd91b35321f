"""The extractive synthesizer (spec/runtime.md §10.3): an answer written without a model.

It serves the offline planner and stands in when every synthesis model fails (§8.6). It never writes
a claim of its own: counts and lists come from the planner's draft, everything else is quoted. Each
quoted sentence is an exact slice of an evidence span's text, and spans are slices of page text, so
citation verification (§8.4) passes by construction.

The text helpers here (content words, identifier tokens) are shared with the planner so the two
agree on what a question is about.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sleuth.agent.spans import EvidenceSpan
from sleuth.agent.table_rows import LEAD, is_figure_row, table_header, trimmed
from sleuth.agent.word_families import NEAR_WORDS, count_distance, family_root, with_families
from sleuth.format.periods import period_length
from sleuth.format.sentences import is_abbreviation
from sleuth.store.text import stem, words
from sleuth.store.version.search import asks_for_boilerplate
from sleuth.store.version.stop_words import STOP_WORDS

PRONOUNS = frozenset({"it", "they", "this", "that", "those", "he", "she"})

_WORD = re.compile(r"[a-z0-9]+")
_IDENT_CODE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2,}[-_]?\d+(?:[-_.][A-Za-z0-9]+)*(?![A-Za-z0-9])")
_IDENT_FILE = re.compile(r"(?<![\w.-])[\w-]+\.[A-Za-z][A-Za-z0-9]{1,4}(?![\w])")
_IDENT_SNAKE = re.compile(r"(?<![\w])[a-z0-9]+(?:_[a-z0-9]+)+(?![\w])")
_IDENT_CAMEL = re.compile(r"(?<![\w])[a-z]{2,}[A-Z][A-Za-z0-9]*(?![\w])")
# Reporting periods look like codes but name no single passage: "FY2018" is on every page of a
# filing. Sleuth leaves them to the hybrid search (a deliberate departure from spec/runtime.md §10.1).
_PERIOD = re.compile(r"^(?:FY|CY|Q[1-4]|[1-2]H|H[1-2])[-_]?(?:\d{2}|\d{4})$|^Q[1-4]$")
_QUOTED = re.compile(r"\"([^\"\n]{2,200})\"|“([^”\n]{2,200})”|(?<![\w])'([^'\n]{2,200})'(?![\w])")
_AMOUNT_WORDS = (
    "rate|amount|percentage|percent|price|cost|fee|limit|cap|maximum|minimum|total|budget|salary|revenue"
    "|headcount|head count|workforce"
)
_AMOUNT = re.compile(
    rf"\bhow (?:much|many|long)\b|\bwhat(?:'s| is| was| are)\b.*\b(?:{_AMOUNT_WORDS})s?\b", re.IGNORECASE
)
_MARKER = re.compile(r"\[E(\d+)\]")
_UNIT_START = re.compile(r"^\s*(?:#{1,6}\s|[-*+•]\s|>|\||\d{1,3}[.)]\s|\[[ xX]\]\s)")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"”')\]]?\s+(?=[\"“(\[]?[A-Z0-9$€£])")
_PUNCTUATED = re.compile(r"[.!?;:,](?:\s|$)")  # a line holding a sentence end is no heading
_NUMBERED_HEADING = re.compile(r"\d+(?:\.\d+)+\.?\s+[A-Z][^.!?;:,\n]{0,60}$")  # "2.1 Revenue by Segment"
_FIGURE = re.compile(
    r"[$€£]\s?\(?\d|\d\s?%|\d[\d,.]*\s?(?:million|billion|thousand|mn|bn|percent)\b|\(\d[\d,.]*\)"
    r"|\b\d{1,3}(?:,\d{3})+(?:\.\d+)?\b",
    re.IGNORECASE,
)
#: A number on its own, not a digit inside a name ("3M", "Q3", "S&P 500" counts: it stands apart).
_BARE_NUMBER = re.compile(r"(?<![^\W\d_])\d+(?:[.,]\d+)*(?![^\W\d_])")
FIGURE_WEIGHT = 1.5  # an amount question's sentence that states a figure
FINAL_EVIDENCE = 8  # spans a `final` hands in at most: the spans a step chose; the rest were only seen
STATED_TIER = 100.0  # ... and, among the chosen spans, states a number of the quantity: above all others
NO_NUMBER_WEIGHT = 0.2  # an amount question's sentence with no number at all: it cannot answer
_NUMBER_WORD = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|hundred)\b",
    re.IGNORECASE,
)
RANK_DECAY = 0.3  # a sentence from the n-th evidence span scores 1 / (1 + 0.3 (n - 1)) of the first's
MAX_NOISE = 0.5  # a span at least this much boilerplate never gives the answer sentence
MAX_QUOTED_CHARS = 700
MAX_SENTENCE_CHARS = 400


normalize_word = stem  # the planner's name for it: "products" meets the table `product` (§10.2)
raw_words = words


def content_words(text: str) -> list[str]:
    """The words that carry meaning: stop words removed, plurals stripped, first occurrence order."""
    out: list[str] = []
    for word in raw_words(text):
        if word in STOP_WORDS:
            continue
        norm = normalize_word(word)
        if norm not in out:
            out.append(norm)
    return out


def quoted_phrases(text: str) -> list[str]:
    """Phrases in double, curly or single quotes, in order of appearance."""
    return [next(g for g in m.groups() if g is not None).strip() for m in _QUOTED.finditer(text)]


def identifier_tokens(text: str) -> list[str]:
    """Codes (`ERR-4012`), file names, snake_case, camelCase and quoted phrases, in order, de-duplicated."""
    found: list[tuple[int, str]] = []
    for pattern in (_IDENT_CODE, _IDENT_FILE, _IDENT_SNAKE, _IDENT_CAMEL):
        found += [(m.start(), m.group(0)) for m in pattern.finditer(text)]
    found += [
        (m.start(), next(g for g in m.groups() if g is not None).strip()) for m in _QUOTED.finditer(text)
    ]
    out: list[str] = []
    for _pos, token in sorted(found):
        if _PERIOD.match(token):
            continue
        if token and token.casefold() not in (t.casefold() for t in out):
            out.append(token)
    return out


_ASKED = re.compile(
    r"\b(?:what(?:'s| is| was| were| are)|how (?:much|many))\s+(?:the\s+|a\s+|an\s+)?(?P<rest>[^?;]*)",
    re.IGNORECASE,
)
#: Where the asked quantity's phrase ends: a preposition that starts its frame, a clause, a bracket.
_ASKED_END = re.compile(
    r"\s(?:for|in|at|during|as of|from|by|according|based|reported|when|if|did|does|do|was|were|"
    r"is|are|has|have|had|and how|compared)\s|[,:.]|\s[-–—]\s",
    re.IGNORECASE,
)
_AUXILIARY = re.compile(
    r"^(?:did|does|do|was|were|is|are|has|have|had|will|would|can|could)\b", re.IGNORECASE
)
#: "… generate in cash flow from operating activities", "… pay out in cash dividends": money moved.
_MOVED_IN = re.compile(
    r"\b(?:generate|pay(?:\s+out)?|spend|earn|receive|invest|return)\s+(?:in|on|as)\s+(?P<q>.+)$",
    re.IGNORECASE,
)
#: "how much cash did X generate from operating activities": the amount and where it came from.
_MOVED_FROM = re.compile(
    r"^(?P<x>[a-z][\w\s]*?)\s+(?:did|does|do|has|have|had)\s+.+?\s+(?:generate|earn|receive|provide)\w*"
    r"\s+(?P<q>from\s+[a-z][\w\s]*?)(?=\s+(?:in|for|during|as\s+of|at)\b|[?(,.]|$)"
)
#: Words that frame a quantity without naming it: its kind, unit or period.
_FRAME_WORDS = frozenset(
    {
        "amount",
        "value",
        "figure",
        "number",
        "level",
        "year",
        "end",
        "fiscal",
        "quarter",
        "annual",
        "usd",
        "dollar",
        "million",
        "billion",
        "thousand",
        "unadjusted",
        "reported",
        "full",
        "period",
        "time",  # "how many times": a count, not a row
    }
)
#: A quantity worked out from others (a ratio, a change, an average) is no one cell of a table.
_COMPUTED = re.compile(
    r"\b(?:calculat\w*|comput\w*|defined as|ratios?|margins?|averages?|growth|cagr|changes?|differences?|"
    r"turnover|percent(?:age)?s?)\b|%",
    re.IGNORECASE,
)
#: Stop words for search that still tell table rows apart (`Total current liabilities`).
_ROW_WORDS = frozenset({"total", "other"})
_BRACKETED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_PERIOD_WORD = re.compile(r"^(?:fy|q[1-4]|h[12]|cy)?\d{2,4}$", re.IGNORECASE)
#: `FY2018`, `FY18`, `2018`; not in a figure (`$2,019`, `2019.5`, `2019%`): a comma or point after a year
#: continues a number only where a digit follows (`2019, 2020 and 2021` lists years).
_ASKED_YEAR = re.compile(
    r"\bFY\s?'?(\d{4}|\d{2})\b|(?<![\d$,.])((?:19|20)\d\d)(?![\d%]|[,.]\d)", re.IGNORECASE
)


def asked_quantity(ask: str) -> list[str]:
    """The stemmed words naming the quantity a "what was / how much" question asks for: "What is
    the FY2018 capital expenditure amount (in USD millions) for 3M?" → `capital`, `expenditure`.

    The phrase runs from the question word to the first preposition, clause or bracket; names (a
    capitalised word inside the question), periods, units and framing words are left out; in "how much
    did X generate / pay out / spend in Y", Y. Empty when the question asks no such thing ("how much did
    X pay"); in "how much X did Y generate from Z", X and Z ("cash … from operating activities")."""
    match = _ASKED.search(ask)
    if match is None:
        return []
    rest = _BRACKETED.sub(" ", match.group("rest")).lstrip()  # `(in USD millions)`, `(D&A …)`: asides
    source = _MOVED_FROM.match(rest)
    if source is not None:  # "cash … from operating activities": cash from operating activities
        rest = f"{source.group('x')} {source.group('q').replace('from ', '', 1)}"
    elif _AUXILIARY.match(rest):
        # "how much did Block generate in cash flow from operating activities": the quantity after
        # the verb that moves money; any other "how much did X …" names none
        moved = _MOVED_IN.search(rest)
        if moved is None:
            return []
        rest = moved.group("q")
    end = _ASKED_END.search(rest)
    phrase = rest[: end.start()] if end else rest
    out: list[str] = []
    for token in phrase.split():
        bare = token.strip("'\"“”‘’")
        if bare.endswith(("'s", "’s")):
            continue  # a possessive names whose quantity it is, not the quantity
        if bare[:1].isupper() and not bare.isupper() and not phrase.istitle():
            continue  # a name (`Netflix`, `MGM Resorts`) in a question written in sentence case
        for word in raw_words(bare):
            if (word in STOP_WORDS and word not in _ROW_WORDS) or _PERIOD_WORD.match(word):
                continue
            norm = normalize_word(word)
            if word in _FRAME_WORDS or norm in _FRAME_WORDS:
                continue
            if norm not in out:
                out.append(norm)
    return out if len(out) <= 6 else []


#: A statement or table a question points at: "the cash flow statement", "the statement of income",
#: "the balance sheet", "the segment table", "schedule of debt maturities".
_NAMED_TABLE = re.compile(
    r"(?P<before>(?:[A-Za-z&]+[\s-]+){0,3})(?:statements?|sheets?|tables?|schedules?)\b"
    r"(?:\s+of\s+(?P<after>[A-Za-z]+(?:\s+[A-Za-z]+){0,2}))?",
    re.IGNORECASE,
)
#: Words around a table's name that do not name it.
_TABLE_FRAME = frozenset({"consolidated", "condensed", "financial", "primarily", "only", "shown", "outlined"})


def _table_names(ask: str) -> list[tuple[list[str], str]]:
    """(the words naming it, the word that makes it a table: `sheet`, `statement` …) of each table the
    question points at. A possessive's `s` or any one-letter word ("P&L") ends the name."""
    out: list[tuple[list[str], str]] = []
    for match in _NAMED_TABLE.finditer(ask):
        before: list[str] = []
        for word in reversed(words(match.group("before") or "")):
            if word in STOP_WORDS or word in _TABLE_FRAME or not word.isalpha() or len(word) == 1:
                break
            before.insert(0, word)
        after: list[str] = []
        for word in words(match.group("after") or ""):
            if word in STOP_WORDS:
                break
            after.append(word)
        kind = words(match.group(0)[match.end("before") - match.start() :])[0]
        out.append(([*before, *after], kind))
    return out


def named_tables(ask: str) -> list[list[str]]:
    """The words (stemmed) of each statement or table the question points at: "… shown in the cash
    flow statement" → `[["cash", "flow"]]`, "the balance sheet and the statement of income" →
    `[["balance", "sheet"], ["income"]]`. A table whose title holds one of them is the one the
    question means (a note's extract of the same row is not)."""
    out: list[list[str]] = []
    for name, kind in _table_names(ask):
        named = [stem(w) for w in name]
        if named and kind.startswith("sheet"):
            named.append("sheet")  # "balance sheet": the word that makes it one
        if named and named not in out:
            out.append(named)
    return out


def caption_words(ask: str) -> list[list[str]]:
    """What the caption of each table the question names must hold (stemmed): its name, and the word
    `statement` or `sheet` that makes it one ("the income statement" is captioned "Statement(s) of
    Income", never just "Income Taxes")."""
    out: list[list[str]] = []
    for name, kind in _table_names(ask):
        if not name:
            continue
        needed = [stem(w) for w in name]
        if kind.startswith(("statement", "sheet")) and stem(kind) not in needed:
            needed.append(stem(kind))
        if needed not in out:
            out.append(needed)
    return out


def pointer_words(ask: str) -> frozenset[str]:
    """The words with which a question points at a table ("relying on the cash flow statement"), as
    `content_words` writes them: they say where to look, not what to quote, so a sentence does not
    score for holding them (the table's caption would otherwise be the best quote on its page)."""
    return frozenset(normalize_word(w) for name, kind in _table_names(ask) if name for w in [*name, kind])


def asks_computation(ask: str) -> bool:
    """A question about a quantity worked out from others (a ratio, margin, change, average, or one
    it defines): a table row answers it only if the row is that very quantity."""
    return _COMPUTED.search(ask) is not None


def asked_years(ask: str) -> tuple[int, ...]:
    """The years a question names (`FY2018`, `FY18`, `2018`), in order, at most three; one year
    "compared with the prior fiscal year" names that year too, after it."""
    years: list[int] = []
    for match in _ASKED_YEAR.finditer(ask):
        raw = match.group(1) or match.group(2)
        year = int(raw) + 2000 if len(raw) == 2 else int(raw)
        if year not in years:
            years.append(year)
    if len(years) == 1 and _PRIOR_YEAR.search(ask):
        years.append(years[0] - 1)
    return tuple(years[:3])


#: "… compared with the prior fiscal year", "over the previous year": the year before the one named.
_PRIOR_YEAR = re.compile(
    r"\b(?:compared\s+(?:with|to)|over|versus|vs\.?|from)\s+(?:the\s+)?(?:prior|previous|preceding)\s+"
    r"(?:fiscal\s+)?year\b",
    re.IGNORECASE,
)
#: Words that name a period, not a quantity ("and in fiscal 2019?", "the second quarter?").
_PERIOD_WORDS = frozenset(
    {"fiscal", "year", "years", "annual", "quarter", "quarters", "month", "months", "week", "weeks", "fy"}
    | {"first", "second", "third", "fourth", "q1", "q2", "q3", "q4", "ended", "ending", "end"}
)


#: A number or a fiscal year as one word ("2019", "fy2019", "fy19"): a period, never a quantity.
_YEAR_TOKEN = re.compile(r"(?:fy)?\d+")

#: A question that starts by asking ("does it apply abroad?"), unlike a bare "gross profit?".
_ASKING_WORD = re.compile(
    r"\s*(?:what|how|why|when|where|who|which|does|do|did|is|are|was|were|can|could|should|will|would|has|have)\b",
    re.IGNORECASE,
)
#: A follow-up that goes on from the previous question with a new thing: "what about …", "and …".
_GOES_ON = re.compile(r"\s*(?:and\s+)?(?:what|how)\s+about\b|\s*and\b", re.IGNORECASE)


def follow_up_quantity(ask: str) -> list[str]:
    """The quantity a follow-up names: what `asked_quantity` reads, or, in a "what about net income?",
    "and its margin?" or a bare "gross profit?" that asks nothing in full, its content words that are no
    period, year or pronoun; [] for "and in fiscal 2019?" and for a question of another kind ("does it
    apply abroad?")."""
    named = asked_quantity(ask)
    if named or not (_GOES_ON.match(ask) or not _ASKING_WORD.match(ask)):
        return named
    return [
        w
        for w in content_words(ask)
        if not _YEAR_TOKEN.fullmatch(w) and w not in _PERIOD_WORDS and w not in PRONOUNS
    ]


def stating_words(ask: str) -> list[str]:
    """The words a sentence that states the asked amount would use: the quantity's, then the ask's
    other content words written in lower case (no names), less periods and pronouns — "how many
    people did Amazon employ": people, employ ("we employed approximately 798,000 … employees")."""
    said = {w.lower() for w in re.findall(r"\b[a-z][a-z-]*\b", ask)}
    own = [w for w in content_words(ask) if w in said or normalize_word(w) in said]
    rest = [w for w in own if w.isalpha() and w not in _PERIOD_WORDS and w not in PRONOUNS]
    return list(dict.fromkeys([*asked_quantity(ask), *rest]))


def stating_roots(ask: str) -> list[str]:
    """The family roots of `stating_words` (`word_families.family_root`): what a number must stand
    near to state the asked amount."""
    return [r for r in map(family_root, stating_words(ask)) if r is not None]


def asked_months(ask: str) -> int | None:
    """How long a period a question asks for: the length it names (`second quarter`, `Q3`, `six months
    ended`, `fiscal year`; `format.periods.period_length`) or, where it names a year and no length,
    that year's twelve months; None where it names neither."""
    months, _weeks = period_length(ask)
    if months is not None:
        return months
    return 12 if asked_years(ask) else None


def asked_year(ask: str) -> int | None:
    """The one year a question asks about; None for none or several."""
    years = asked_years(ask)
    return years[0] if len(years) == 1 else None


def asks_for_amount(ask: str) -> bool:
    """True for "how much / many / long …" and "what is the … rate, amount, percentage, limit …"."""
    return _AMOUNT.search(ask) is not None


@dataclass(frozen=True)
class _Sentence:
    position: int  # 1-based position of its span in the evidence list
    span: EvidenceSpan
    start: int  # offsets into span.text
    end: int

    @property
    def text(self) -> str:
        return self.span.text[self.start : self.end]


def _units(text: str) -> list[tuple[int, int]]:
    """Paragraph-like units: blank lines end one; headings, bullets and table rows stand alone, and
    so does a short unpunctuated line that opens a paragraph (a heading in PDF or DOCX text).
    Hard-wrapped prose lines stay together, so a sentence is not cut at a line break."""
    units: list[tuple[int, int]] = []
    start: int | None = None
    single = False  # the open unit is a one-line heading or table row
    closed = True  # the previous line ended a sentence
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        bare = stripped[m.end() :] if (m := LEAD.match(stripped)) else stripped
        short = 0 < len(bare) <= 60 and not _PUNCTUATED.search(bare)
        row = is_figure_row(bare)
        begins = _UNIT_START.match(line) is not None or (short and closed) or row
        if not stripped or begins or single:
            if start is not None:
                units.append((start, offset))
            start = None
        if stripped:
            if start is None:
                start = offset
            single = stripped.startswith(("#", "|")) or (short and begins) or row
            closed = stripped[-1] in ".!?:" or single
        else:
            closed = True
        offset += len(line)
    if start is not None:
        units.append((start, offset))
    return units


def _after_abbreviation(text: str, end: re.Match[str]) -> bool:
    """A sentence end found after "U.S.", "Inc." or "No.": no end at all (`format.sentences`)."""
    dot = end.start() - 1
    return text[dot] == "." and is_abbreviation(text, dot)


def _split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence offsets in `text`; each slice is verbatim and trimmed of markup at its edges."""
    out: list[tuple[int, int]] = []
    for ustart, uend in _units(text):
        ends = [m for m in _SENTENCE_END.finditer(text, ustart, uend) if not _after_abbreviation(text, m)]
        cuts = [ustart] + [m.end() for m in ends] + [uend]
        for a, b in itertools.pairwise(cuts):
            s, e = trimmed(text, a, b)
            if text[a:s].lstrip().startswith("#") or _NUMBERED_HEADING.match(text[s:e]):
                continue  # a heading names a section; it does not say anything
            if len(_WORD.findall(text[s:e].lower())) >= 4 and any(ch.isalpha() for ch in text[s:e]):
                if e - s > MAX_SENTENCE_CHARS:
                    cut = text.rfind(" ", s, s + MAX_SENTENCE_CHARS)
                    e = cut if cut > s else s + MAX_SENTENCE_CHARS
                    while e > s and text[e - 1] in " ,;:":
                        e -= 1
                out.append((s, e))
    return out


def _translate_draft(draft: str, evidence: Sequence[EvidenceSpan]) -> str:
    """`[E7]` → `[n]` (n = position in `evidence`); markers naming absent evidence are dropped."""
    positions = {span.ref: n for n, span in enumerate(evidence, 1)}

    def marker(match: re.Match[str]) -> str:
        n = positions.get(f"E{match.group(1)}")
        return f"[{n}]" if n is not None else ""

    lines = [line.rstrip() for line in _MARKER.sub(marker, draft).split("\n")]
    return "\n".join(re.sub(r"(?<=\S) {2,}(?=\S)", " ", line) for line in lines).strip()


def _score_sentences(
    ask: str, evidence: Sequence[EvidenceSpan], noise: Callable[[EvidenceSpan], float] | None = None
) -> list[tuple[float, _Sentence]]:
    """Sentences by how well they answer `ask`. `noise(span)` is the boilerplate share of a span's
    chunk (running headers, certifications, notices): a span that is mostly boilerplate gives no
    answer sentence, unless the question asks for that kind of text."""
    if noise is not None and asks_for_boilerplate(ask):
        noise = None
    pointers, asked = pointer_words(ask), content_words(ask)
    terms = [t for t in asked if t not in pointers] or asked
    idents = [t.casefold() for t in identifier_tokens(ask)]
    amount = asks_for_amount(ask)
    quantity = set(stating_roots(ask)) if amount else set()
    named = [set(content_words(re.sub(r"[\W_]+", " ", span.source_path))) for span in evidence]
    span_words = [
        with_families(content_words(span.text)) | n for span, n in zip(evidence, named, strict=True)
    ]
    total = len(evidence)
    idf = {}
    # a term meets a word of its family as the documents spell it ("employees": "employed")
    terms = [family_root(t) or t for t in terms]
    for term in terms:
        df = sum(1 for words in span_words if term in words)
        idf[term] = math.log(1 + (total - df + 0.5) / (df + 0.5))
    scored: list[tuple[float, _Sentence]] = []
    for position, span in enumerate(evidence, 1):
        share = noise(span) if noise is not None else 0.0
        if share >= MAX_NOISE:
            continue
        for start, end in _split_sentences(span.text):
            sentence = _Sentence(position, span, start, end)
            text = sentence.text
            words = with_families(content_words(text))
            # Evidence comes best first (search rank, fused): a later span needs more overlap to win.
            # An identifier the sentence holds is exact evidence wherever its span ranked.
            # A word of the document's name ("Netflix" in NETFLIX_2017_10K.pdf) says which document,
            # not which sentence: every sentence of that document holds it, saying it again or not.
            words |= named[position - 1]
            score = sum(idf[t] for t in terms if t in words) / (1.0 + RANK_DECAY * (position - 1))
            folded = text.casefold()
            score += 2.0 * sum(1 for ident in idents if ident in folded)
            # Sleuth's addition to §10.3: a sentence that *starts* with the identifier (a table row
            # keyed by it, a definition) is about it, not merely mentioning it.
            lead = folded.lstrip(" \t|*-#>")
            score += 1.0 * sum(1 for ident in idents if lead.startswith(ident))
            if score > 0 and amount:
                # The asked quantity: a figure (money, a percentage, a scaled number) counts more
                # than a bare number ("three days"), which counts more than none.
                if _FIGURE.search(text):
                    score *= FIGURE_WEIGHT
                    apart = (
                        count_distance(text, quantity) if quantity and position <= FINAL_EVIDENCE else None
                    )
                    if apart is not None:  # "5,500 total employees": the quantity's own figure, the
                        score += STATED_TIER * (NEAR_WORDS + 1 - apart)  # closer the better
                elif _BARE_NUMBER.search(text) or _NUMBER_WORD.search(text):
                    score += 0.5
                else:  # it cannot state how much or how many
                    score *= NO_NUMBER_WEIGHT
            score *= 1.0 - share
            if score > 0:
                scored.append((round(score, 9), sentence))
    scored.sort(key=lambda x: (-x[0], x[1].span.source_path, x[1].span.page, x[1].span.start + x[1].start))
    return scored


def _pick(scored: list[tuple[float, _Sentence]]) -> list[_Sentence]:
    """Top three, from distinct spans where possible, at most 700 quoted chars, in score order."""
    chosen: list[_Sentence] = []
    used_spans: set[int] = set()
    total = 0
    for distinct in (True, False):
        for _score, sentence in scored:
            if len(chosen) == 3:
                break
            if sentence in chosen or (distinct and sentence.position in used_spans):
                continue
            if any(c.text == sentence.text for c in chosen):
                continue  # the same words from another context or an overlapping chunk
            size = sentence.end - sentence.start
            if chosen and total + size > MAX_QUOTED_CHARS:
                continue
            chosen.append(sentence)
            used_spans.add(sentence.position)
            total += size
    order = {id(s): i for i, (_score, s) in enumerate(scored)}
    return sorted(chosen, key=lambda s: order[id(s)])


#: How an answer that found nothing to quote starts.
NO_EVIDENCE = "No evidence for this question was found in"


def extractive_answer(
    ask: str,
    evidence: Sequence[EvidenceSpan],
    draft: str | None,
    slugs: Sequence[str],
    noise: Callable[[EvidenceSpan], float] | None = None,
) -> str:
    """The answer for `ask` from `evidence`, with `[n]` markers = 1-based positions in `evidence`.

    A planner draft (count and list questions) is returned with its `[E7]` markers translated;
    otherwise the best-matching sentences are quoted (§10.3), never from boilerplate (`noise`)."""
    if draft is not None and draft.strip():
        return _translate_draft(draft, evidence)
    chosen = _pick(_score_sentences(ask, evidence, noise))
    if not chosen:
        return f"{NO_EVIDENCE} {', '.join(slugs)}."
    lines = []
    for s in chosen:
        where = f"According to {s.span.source_path} (p. {s.span.page})"
        header = table_header(s.span.text, s.start, s.end)
        if header is not None:  # a figure from a table means nothing without its columns
            where += f', under "{s.span.text[header[0] : header[1]]}"'
        lines.append(f'{where}: "{s.text}" [{s.position}]')
    return "\n".join(lines)
