"""Every primitive's calls are traced under its own category, declared once at the primitive (issue 41,
item 6: `read_around`, `read_page` and `read_section` were missing from a hand-kept table, so their calls
were traced as the host's and nothing checked it)."""

from __future__ import annotations

from sleuth.agent.loop import CATEGORIES, SCORE_SPACES
from sleuth.sdk.knowledge import PRIMITIVES
from sleuth.sdk.primitives import primitives


def test_every_primitive_has_its_category_and_every_search_its_score_space() -> None:
    declared = {p.name: p for p in primitives()}
    assert set(declared) == set(PRIMITIVES) == set(CATEGORIES)
    for name, item in declared.items():
        assert CATEGORIES[name] == item.category, name  # never the host's ("host" is no category)
        if item.category == "search":  # awaited and ranking (`orientation` is awaited, ranks nothing)
            assert SCORE_SPACES[name] in ("hybrid_rrf", "bm25"), name
    reads = ("read_around", "read_page", "read_section", "compare_sections")
    assert {CATEGORIES[n] for n in reads} == {"read"}
