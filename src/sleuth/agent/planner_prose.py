"""The offline planner's prose step (spec/runtime.md §10.3, issue 45 item 6): the sentences that state
an amount in the documents' own words, where no table cell does — "the Company employed 93,516 people"
for "how many employees did 3M have". One hybrid search a word family (`word_families`), narrowed to the
chunks that hold a word of it as the documents spell it; the chunks that state a number of the quantity
first, the closest number first (the planner's evidence after it: `planner_plans.prose_evidence`).
"""

from __future__ import annotations

import inspect

from sleuth.agent.word_families import AMOUNT_NUMBER, NEAR_WORDS, REFERENCE_WORDS, SCALES, count_distance

PROSE_HITS = 20  # chunks a prose search reads for the sentence that states the amount
#: The step's copy of `count_distance` (its own source, as the stemmer's is): host and sandbox agree.
_COUNT_DISTANCE = [
    f"AMOUNT_NUMBER = re.compile({AMOUNT_NUMBER.pattern!r})",
    f"NEAR_WORDS = {NEAR_WORDS}",
    f"REFERENCE_WORDS = {sorted(REFERENCE_WORDS)!r}",
    f"SCALES = {SCALES!r}",
    "def raw_words(text):",
    '    return re.findall(r"[a-z0-9]+", text.lower())',
    *inspect.getsource(count_distance).splitlines(),
]


def prose_code(lines: list[str], query: str, families: list[str], stating: list[str], within: str) -> str:
    """The step after `lines` (its preamble): a search of `query` (a name in the step) for each
    `must_contain` family, `within` the named documents (`, sources=[…]`, or ""), their hits in turn;
    ordered by how near a number of a `stating` root their text is."""
    lines = [
        *lines,
        "found = await asyncio.gather(",
        *(f"    search_source({query}, top_k={PROSE_HITS}, must_contain=[{f!r}]{within})," for f in families),
        ")",
        "inside = list({h.ref: h for hits in found for h in hits}.values())",
        *_COUNT_DISTANCE,
        f"roots = set({stating!r})",
        'apart = {h.ref: count_distance(h.fields["chunk_text"], roots) for h in inside}',
        "inside.sort(key=lambda h: (apart[h.ref] is None, apart[h.ref] or 0))  # the closest first",
        "stating = sum(1 for h in inside if apart[h.ref] is not None)",
        "paths = sorted({h.name for h in inside})",
        'plan = {"step": "prose", "class": "general", "paths": paths,',
        '        "inside": [row(h) for h in inside], "stating": stating}',
        'print(plan_line(plan, ["inside"]))',
        "for h in inside:",
        '    print(h.ref, h.name, "p.", h.fields["page"], h.fields["chunk_text"][:300])',
    ]
    return "\n".join(lines) + "\n"
