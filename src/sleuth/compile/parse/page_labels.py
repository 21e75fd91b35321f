"""Printed page numbers: "38" at the foot of what the PDF holds as its 40th page (issue 26, item 7).

Citations point at the PDF's own page index, which is what a viewer opens; a reader holding the
printed report, or quoting its contents page, says "page 38". A PDF may declare its labels
(`/PageLabels`), but few do (none of 74 FinanceBench filings), so the printed number is read from the
page itself: a number standing alone (or as "Page 38", "- 38 -", "38 of 120", "38 | Company") on one of a
page's first two or last three lines. One such number is noise (a table's cell on a line of its own);
it becomes a label only when a page within two pages carries a number at the same distance from its
index, which a page sequence has and a stray figure almost never does.
"""

from __future__ import annotations

from collections.abc import Sequence

from sleuth.format.furniture import edge_lines, page_number

_NEIGHBOURS = 2  # pages either side where the same distance must recur


def _candidates(text: str) -> set[int]:
    numbers = (page_number(text[a:b]) for a, b in edge_lines(text))
    return {int(number) for number in numbers if number is not None}


def printed_labels(texts: Sequence[str]) -> list[str | None]:
    """Each page's printed number, page by page: None where it has none, or none that agrees with
    its neighbours'."""
    candidates = [_candidates(t) for t in texts]
    offsets = [{index - c for c in found} for index, found in enumerate(candidates)]
    labels: list[str | None] = []
    for index, found in enumerate(candidates):
        near = range(max(0, index - _NEIGHBOURS), min(len(texts), index + _NEIGHBOURS + 1))
        agreed = sorted(c for c in found if any(index - c in offsets[j] for j in near if j != index))
        labels.append(str(agreed[0]) if agreed else None)
    return labels
