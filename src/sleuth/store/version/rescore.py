"""Second-stage ranking: the pages of the best first-stage candidates, rescored by what is on them.

The first stage (dense + BM25 over chunks, fused) judges one chunk at a time, and a chunk knows only
its own words. Two kinds of evidence live on the page instead:

- its *title zone*: the first lines of a page say what the page is ("Consolidated Statements of Cash
  Flows", "4.2 Replacing the filter", "Table 3: Results"), while the chunks below them are rows or
  paragraphs that never repeat it;
- its *coverage*: how much of the question's vocabulary the whole page holds, so that a page where
  several chunks each match part of the question beats a page with one chunk that matches one word.

Both are weighted by how rare each question word is (idf over the version's chunks) and ranked; each
chunk on those pages is rescored as the reciprocal-rank fusion of its own first-stage rank with its
page's two ranks. When the search is inside given documents, the pages whose title zone matches best
join too (`title_pages`), however far down their chunks were. No model is involved: the index holds no
cross-encoder, because none ships with its weights on the package registry (spec/stack.md §2, looked at
again for this module); this is the stage such a model would take over. Measured on FinanceBench
(benchmarks/retrieval.py, one run): within-filing page recall@10 0.674 → 0.783, corpus-wide
0.628 → 0.744.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from functools import cached_property

from sleuth.format.chunks import Chunk
from sleuth.store.text import stem, words
from sleuth.store.version.fusion import RRF_K
from sleuth.store.version.ranker import PageRanker, QuestionCues, Signals, figure_share, year_share
from sleuth.store.version.stop_words import STOP_WORDS

PageKey = tuple[str, int]

#: How many of the first stage's best pages are rescored; the rest keep their order below them.
RESCORE_PAGES = 30
#: The title zone: this many characters from the top of a page.
TITLE_CHARS = 300
#: How many pages of the searched documents join the rescoring by their title zone alone.
TITLE_CANDIDATES = 10
#: Weights of the three rankings in the fusion: first stage, title zone, coverage. Measured on
#: FinanceBench (window-sized chunks): 1 / 1 / 0.5 with `TITLE_CANDIDATES`, against 1 / 0.5 / 0.5
#: without them, gave within-filing R@5 0.651 against 0.589 (R@10 0.752 both) and corpus-wide R@10
#: 0.721 against 0.698; within the filing each change alone moved R@10 by at most two questions.
FIRST_STAGE_WEIGHT = 1.0
TITLE_WEIGHT = 1.0
COVERAGE_WEIGHT = 0.5


class PageWords:
    """The text of one page, lower-cased, whole and in its title zone, read when first asked for:
    most pages a search looks at need only their title zone (`title_pages`), and only the few it
    rescores need the rest. The page is never split into words: `overlap` looks for the question's
    few word forms in it, which costs a handful of substring scans instead of a regex pass and a set
    of every word the page holds (measured: the keyword search on FinanceBench spent most of its
    time there)."""

    def __init__(self, parts: Sequence[str], titled: bool = True) -> None:
        self._parts = parts  # the page's text in pieces (its chunks), joined by newlines when read
        self._titled = titled

    @classmethod
    def of(cls, text: str, titled: bool = True) -> PageWords:
        return cls((text,), titled)

    @cached_property
    def title(self) -> str:
        if not self._titled:
            return ""
        head, size = [], 0
        for part in self._parts:
            head.append(part)
            size += len(part) + 1
            if size >= TITLE_CHARS:
                break
        return "\n".join(head)[:TITLE_CHARS].lower()

    @cached_property
    def body(self) -> str:
        return "\n".join(self._parts).lower()

    @cached_property
    def figures(self) -> float:
        """How much of the page is figures (`ranker.figure_share`), worked out once per page."""
        return figure_share(self.body)


def chunks_by_page(chunks: Iterable[Chunk]) -> dict[PageKey, list[Chunk]]:
    """`chunks` by their page, pages in the order they first appear, each page's chunks in reading
    order: how a page's text is put together from its chunks (`page_words`)."""
    by_page: dict[PageKey, list[Chunk]] = {}
    for chunk in chunks:
        by_page.setdefault((chunk.source_path, chunk.page), []).append(chunk)
    for on_page in by_page.values():
        on_page.sort(key=lambda c: c.start)
    return by_page


def page_words(chunks: Sequence[Chunk], document_pages: int) -> PageWords:
    """A page's words from its chunks in reading order (their own strings: nothing is copied until
    read), in a document of `document_pages` pages. A document that is one page (Markdown, DOCX,
    HTML, text) has no page title: its first lines title the whole document, and lifting every
    chunk of it by them would put its weakest chunk above another document's answer."""
    return PageWords([c.text for c in chunks], titled=document_pages > 1)


def _word_char(char: str) -> bool:
    return "a" <= char <= "z" or "0" <= char <= "9"


def _end(text: str, word: str, endings: Sequence[str]) -> int:
    """Where the first whole word of lower-cased `text` that is `word` followed by one of `endings`
    ends (as `text.words` would split it), or -1: one scan for `word`, the endings checked where it
    is found."""
    start = text.find(word)
    while start != -1:
        if start == 0 or not _word_char(text[start - 1]):
            for ending in endings:
                after = start + len(word) + len(ending)
                if text.startswith(ending, start + len(word)) and (
                    after == len(text) or not _word_char(text[after])
                ):
                    return after
        start = text.find(word, start + 1)
    return -1


def holds_word(text: str, word: str) -> bool:
    """Whether lower-cased `text` holds `word` as a whole word."""
    return _end(text, word, ("",)) != -1


def _term_end(text: str, term: str) -> int:
    """Where the first written form of `term` (`forms`) in lower-cased `text` ends, or -1."""
    end = _end(text, term, ("", "s", "es"))
    if term.endswith("y"):
        other = _end(text, term[:-1] + "ies", ("",))
        if other != -1 and (end == -1 or other < end):
            end = other
    return end


def holds_term(text: str, term: str) -> bool:
    """Whether lower-cased `text` holds a written form of `term` (`forms`) as a whole word: the plural
    endings are checked where the term is found (a third of the scans of looking for each form)."""
    return _term_end(text, term) != -1


def query_terms(query: str) -> dict[str, str]:
    """Stem → the word as the query wrote it, for the words that say what it is about."""
    out: dict[str, str] = {}
    for word in words(query):
        if word not in STOP_WORDS and len(word) > 1:
            out.setdefault(stem(word), word)
    return out


def forms(term: str) -> tuple[str, ...]:
    """The written forms `stem` maps to `term`: a page says "flows" where the query says "flow"."""
    forms = [term, term + "s", term + "es"]
    if term.endswith("y"):
        forms.append(term[:-1] + "ies")
    return tuple(forms)


class TermWeights:
    """A question's terms (`query_terms`' stems) weighted by how rare each word is; worked out once per
    question: `overlap` runs for every candidate page."""

    def __init__(self, weighted: dict[str, float]) -> None:
        self.terms = [(term, weight) for term, weight in weighted.items() if weight > 0]

    def __bool__(self) -> bool:
        return bool(self.terms)


def term_weights(query: str, idf: Callable[[str], float]) -> TermWeights:
    return TermWeights({term: idf(raw) for term, raw in query_terms(query).items()})


def overlap(weight: TermWeights, text: str) -> float:
    """The weight of the question's terms that `text` (a page's, lower-cased) holds, in any written
    form (`forms`)."""
    return sum(w for term, w in weight.terms if holds_term(text, term))


def page_overlaps(weight: TermWeights, page: PageWords) -> tuple[float, float]:
    """`overlap` of the page's title zone and of its whole text, from one scan of the text per term:
    the title zone is the text's beginning, so a term whose first match ends inside it is in it. Only
    a term whose first match is further down is looked for in the title zone itself, where the zone's
    end may cut a longer word to it ("revenue" of "revenues")."""
    title, body = page.title, page.body
    in_title = in_body = 0.0
    for term, w in weight.terms:
        root = term[:-1] if term.endswith("y") else term  # in every written form (`forms`)
        if root not in body:
            continue  # a term absent from the page costs one substring test, not the scans below
        end = _term_end(body, term)
        if end != -1:
            in_body += w
        if (end != -1 and end <= len(title)) or (
            len(title) < len(body) and root in title and holds_term(title, term)
        ):
            in_title += w
    return in_title, in_body


class TitleIndex:
    """Which of a document's pages hold each word in their title zone, made once per document (at
    compile time: `format.titles`) and kept by the reader: `title_pages` then looks up the question's
    few word forms instead of scanning every page's title zone for each of them."""

    def __init__(self, pages: Sequence[PageKey], by_word: Mapping[str, Sequence[int]]) -> None:
        self.pages = list(pages)
        self.by_word = by_word  # word -> positions in `pages`

    @classmethod
    def build(cls, pages: Sequence[PageKey], page_words: Callable[[PageKey], PageWords]) -> TitleIndex:
        by_word: dict[str, list[int]] = {}
        for position, key in enumerate(pages):
            for word in sorted(set(words(page_words(key).title))):
                by_word.setdefault(word, []).append(position)
        return cls(pages, by_word)

    def overlaps(self, weight: TermWeights) -> dict[int, float]:
        """Page position → `overlap` of its title zone, for the pages that hold any term."""
        scores: dict[int, float] = {}
        for term, w in weight.terms:
            holding = {p for form in forms(term) for p in self.by_word.get(form, ())}
            for position in holding:
                scores[position] = scores.get(position, 0.0) + w
        return scores


def title_pages(
    query: str,
    documents: Sequence[TitleIndex],
    idf: Callable[[str], float],
    count: int = TITLE_CANDIDATES,
) -> list[PageKey]:
    """The `count` pages of `documents` whose title zone holds most of the question's weight (ties
    in the documents' page order): a page that says it is what the question asks for ("Consolidated
    Statement of Cash Flows") is rescored even when none of its chunks (rows of figures) reached the
    first stage's best pages."""
    weight = term_weights(query, idf)
    scored = [
        (score, d, position, document.pages[position])
        for d, document in enumerate(documents)
        for position, score in document.overlaps(weight).items()
        if score > 0
    ]
    scored.sort(key=lambda x: (-x[0], x[1], x[2]))
    return [key for _score, _d, _position, key in scored[:count]]


def rescore(
    query: str,
    ranked: Sequence[tuple[str, float]],
    page_of: Callable[[str], PageKey],
    page_words: Callable[[PageKey], PageWords],
    idf: Callable[[str], float],
    also: Sequence[PageKey] = (),
    ranker: PageRanker | None = None,
    seen: Callable[[PageKey, list[float]], None] | None = None,
    signals: Signals | None = None,
    text_of: Callable[[str], str] | None = None,
) -> list[tuple[str, float]]:
    """`ranked` chunks (best first) reordered by their pages: the first `RESCORE_PAGES` pages, and the
    pages of `also` (`title_pages`), are each described by `page_features` and ranked; chunks of later
    pages keep their order below. With a `ranker` (`store.ranker`), a page is a unit: its best chunk
    scores the page's score, its other chunks that scaled by their first-stage standing against the
    best one's (reciprocal ranks, `STANDING_K`: position 1 against 20 is 0.53) and by how much of the
    question's weighted words they hold (`text_of` gives a chunk's text; none halves it). So a page's
    windows add up instead of competing, and the chunk that answers stays near its page's best even
    when it ranked lower. Without one, `fuse` ranks as before. `signals` are the first stage's halves
    (`ranker.Signals`); `seen` is told each rescored page's features (training data). Scores never
    rise down the list."""
    keys = [page_of(cid) for cid, _score in ranked]
    order = list(dict.fromkeys(keys))
    weight = term_weights(query, idf)
    if not order or not weight:
        return list(ranked)
    head = order[:RESCORE_PAGES]
    head += [key for key in also if key in order and key not in head]
    found = {key: page_overlaps(weight, page_words(key)) for key in head}
    title_rank = _ranks(head, {key: title for key, (title, _body) in found.items()})
    coverage_rank = _ranks(head, {key: body for key, (_title, body) in found.items()})
    if ranker is None and seen is None:  # no features wanted: the fixed fusion ranks
        return fuse(ranked, keys, found, title_rank, coverage_rank)
    total = sum(w for _term, w in weight.terms)
    cues = QuestionCues.of(query)
    positions: dict[PageKey, list[int]] = {}
    chunk_ids: dict[PageKey, list[str]] = {}
    for position, ((cid, _score), key) in enumerate(zip(ranked, keys, strict=True), 1):
        if key in found:
            positions.setdefault(key, []).append(position)
            chunk_ids.setdefault(key, []).append(cid)
    halves = _halves(signals or Signals.none(), page_of, found)
    rows = {
        key: page_features(
            positions[key],
            found[key],
            total,
            title_rank[key],
            coverage_rank[key],
            page_words(key),
            cues,
            key in also,
            halves.get(key),
            signals is not None and key[0] in signals.named,
            _boilerplate(signals, chunk_ids.get(key, [])),
        )
        for key in head
    }
    if seen is not None:
        for key in head:
            seen(key, rows[key])
    if ranker is None:
        return fuse(ranked, keys, found, title_rank, coverage_rank)
    sure = {key: ranker.page_score(row) for key, row in rows.items()}
    floor = FIRST_STAGE_WEIGHT / (RRF_K + RESCORE_PAGES)  # every rescored chunk stays above the tail

    def score(position: int, cid: str, key: PageKey) -> float:
        """The page's score, scaled by the chunk's standing against its page's best and its words."""
        standing = (STANDING_K + positions[key][0]) / (STANDING_K + position)
        if position != positions[key][0] and text_of is not None and total:
            standing *= 0.5 + 0.5 * overlap(weight, text_of(cid).lower()) / total
        return floor + sure[key] * standing

    return _reordered(ranked, keys, sure, score)


#: How steeply a page's other chunks fall below its best (`rescore`): (K + best) / (K + own position).
#: At RRF's 60 a page's chunks with none of the question's words stayed above other pages' best (the
#: sample report's "gross margin improved"); at 5 a page's answering chunk fell out of the top 5.
STANDING_K = 20
#: The score of a chunk on a page the learned ranker is sure of (`rescore`): hybrid scores divide by it.
LEARNED_CEILING = 1.0 + FIRST_STAGE_WEIGHT / (RRF_K + RESCORE_PAGES)


#: The position a page absent from one half's list is given (below every list's depth).
_ABSENT = 1000
_NOT_IN_HALVES = (0.0, -math.log(_ABSENT), 0.0, -math.log(_ABSENT))


def _halves(
    signals: Signals, page_of: Callable[[str], PageKey], pages: Mapping[PageKey, object]
) -> dict[PageKey, list[float]]:
    """Per rescored page: its best dense score and position, its best BM25 score (over the query's
    best) and position: the `dense`, `dense_rank`, `keyword` and `keyword_rank` features."""
    out: dict[PageKey, list[float]] = {}
    top_bm25 = max(signals.keyword.values(), default=0.0) or 1.0
    for index, half in enumerate((signals.dense, signals.keyword)):
        for position, (cid, score) in enumerate(half.items(), 1):
            key = page_of(cid)
            if key not in pages:
                continue
            row = out.setdefault(key, list(_NOT_IN_HALVES))
            value = score if index == 0 else score / top_bm25
            row[2 * index] = max(row[2 * index], value)
            row[2 * index + 1] = max(row[2 * index + 1], -math.log(position))
    return out


def page_features(
    positions: Sequence[int],
    found: tuple[float, float],
    total: float,
    title_rank: int,
    coverage_rank: int,
    page: PageWords,
    cues: QuestionCues,
    title_candidate: bool,
    halves: Sequence[float] | None = None,
    named: bool = False,
    boilerplate: float = 0.0,
) -> list[float]:
    """One page's `ranker.FEATURES` for one question: `positions` are its chunks' first-stage
    positions (1-based; none for a page that joined by its title zone alone), `found` its title-zone
    and whole-page overlap with the question's weighted terms (of `total`), `halves` what the first
    stage's halves said of it (`_halves`; none: absent from both), `named` whether its document is one
    the question names, `boilerplate` its chunks' mean boilerplate share."""
    best = min(positions) if positions else RRF_K + RESCORE_PAGES
    title, coverage = (x / total if total else 0.0 for x in found)
    figures = page.figures
    return [
        -math.log(best),
        sum(RRF_K / (RRF_K + p) for p in positions),
        math.log1p(len(positions)),
        title,
        coverage,
        -math.log(title_rank),
        -math.log(coverage_rank),
        figures,
        figures if cues.asks_quantity else 0.0,
        year_share(cues, page.body),
        1.0 if title_candidate else 0.0,
        *(halves if halves is not None else _NOT_IN_HALVES),
        1.0 if named else 0.0,
        boilerplate,
    ]


def _boilerplate(signals: Signals | None, chunk_ids: Sequence[str]) -> float:
    if signals is None or not chunk_ids:
        return 0.0
    return sum(signals.boilerplate.get(cid, 0.0) for cid in chunk_ids) / len(chunk_ids)


def fuse(
    ranked: Sequence[tuple[str, float]],
    keys: Sequence[PageKey],
    found: Mapping[PageKey, tuple[float, float]],
    title_rank: Mapping[PageKey, int],
    coverage_rank: Mapping[PageKey, int],
) -> list[tuple[str, float]]:
    """The fixed second stage (the learned ranker's fallback and baseline): a chunk on a rescored page
    scores the reciprocal-rank fusion of its own first-stage rank with its page's title-zone rank and
    coverage rank. A chunk keeps its own rank so that a good page does not pull its weak chunks ahead
    of another page's best one."""

    def score(position: int, _cid: str, key: PageKey) -> float:
        own = FIRST_STAGE_WEIGHT / (RRF_K + position)  # a chunk keeps its own rank; its page's adds
        return own + TITLE_WEIGHT / (RRF_K + title_rank[key]) + COVERAGE_WEIGHT / (RRF_K + coverage_rank[key])

    return _reordered(ranked, keys, found, score)


def _reordered(
    ranked: Sequence[tuple[str, float]],
    keys: Sequence[PageKey],
    rescored_pages: Container[PageKey],
    score: Callable[[int, str, PageKey], float],
) -> list[tuple[str, float]]:
    """`ranked` with each chunk of a rescored page scored by `score(position, id, page)` and sorted
    (stable on ties), and the chunks of every other page below them in their first-stage order, each
    scoring below every rescored chunk (the lowest of which is at least `FIRST_STAGE_WEIGHT / (RRF_K +
    RESCORE_PAGES)` in both the fixed fusion and the learned ranking)."""
    rescored: list[tuple[str, float]] = []
    tail: list[tuple[str, float]] = []
    for position, ((cid, _score), key) in enumerate(zip(ranked, keys, strict=True), 1):
        if key in rescored_pages:
            rescored.append((cid, score(position, cid, key)))
        else:
            tail.append((cid, FIRST_STAGE_WEIGHT / (RRF_K + RESCORE_PAGES + len(tail) + 1)))
    rescored.sort(key=lambda kv: -kv[1])
    return rescored + tail


def _ranks(pages: list[PageKey], scores: dict[PageKey, float]) -> dict[PageKey, int]:
    """1-based rank of each page by score, ties in first-stage order."""
    return {key: rank for rank, key in enumerate(sorted(pages, key=lambda k: -scores[k]), 1)}


def idf_from(document_frequency: Callable[[str], int], documents: int) -> Callable[[str], float]:
    """An idf function over `documents` (chunks) given a document-frequency lookup; 0 for a word
    no document holds (it cannot tell pages apart)."""

    def idf(word: str) -> float:
        df = document_frequency(word)
        return math.log(1 + documents / df) if df else 0.0

    return idf
