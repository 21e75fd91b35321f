"""A section read as one text across its pages and two documents' sentences aligned (issue 43): a page
break is no sentence break, spacing and quote forms are no differences, a figure is, and each sentence
maps back onto its verbatim page ranges."""

from __future__ import annotations

import pytest

from sleuth.format import comparison
from sleuth.format.comparison import align, sentence_key, stitch, word_edits
from sleuth.format.reading import Kept, read_page


def _piece(page: int, text: str, furniture: list[tuple[int, int]] | None = None) -> tuple[int, Kept]:
    return page, read_page(text, furniture or []).kept(text, 0, len(text))


def test_a_page_break_reads_as_a_space_inside_a_sentence_and_as_a_break_after_one() -> None:
    one = "Header | 7\nWe had $2.4 billion of debt\n7"
    two = "outstanding at the end of the quarter. Our non-\ncurrent assets grew.\nRisk Factors"
    three = "Competition\nWe face competition."
    header, footer = (0, len("Header | 7\n")), (one.rindex("\n"), len(one))
    stitched = stitch([_piece(3, one, [header, footer]), _piece(4, two), _piece(5, ""), _piece(6, three)])
    assert stitched.text == (
        "We had $2.4 billion of debt outstanding at the end of the quarter. Our non-current assets grew."
        "\nRisk Factors\nCompetition\nWe face competition."
    )
    sentences = [stitched.text[a:b] for a, b in stitched.sentences()]
    assert sentences[0] == "We had $2.4 billion of debt outstanding at the end of the quarter."
    assert "We face competition." in sentences
    a, b = stitched.sentences()[0]
    places = stitched.places(a, b)
    assert places == [(3, header[1], one.index("\n7")), (4, 0, two.index(" Our"))]
    assert one[places[0][1] : places[0][2]] == "We had $2.4 billion of debt"


def test_sentence_keys_ignore_spacing_case_and_quote_forms_but_never_a_figure() -> None:
    assert sentence_key("The “Company’s” results —  rose.") == sentence_key(
        'the "company\'s" results - rose.'
    )
    assert sentence_key("We had $2.1 billion.") != sentence_key("We had $2.4 billion.")
    assert word_edits("We had $2.1 billion of debt.", "We had  $2.4 billion of DEBT.") == [("$2.1", "$2.4")]


def test_alignment_lists_added_removed_changed_and_counts_moved() -> None:
    old = ["Alpha risk is real.", "Beta grew by 5 percent in the year.", "Gamma is gone.", "Delta stays."]
    new = ["Delta stays.", "Alpha risk is real.", "Beta grew by 7 percent in the year.", "Epsilon is new."]
    found = align(old, new)
    assert found.unchanged == 1 and found.moved == 1  # Alpha; Delta moved up
    assert found.removed == [2] and found.added == [3]
    assert [(i, j) for i, j, _r in found.changed] == [(1, 2)] and found.changed[0][2] > 0.8
    # A new risk elsewhere that shares a stock phrase with a removed one is no change of it; in the
    # removed one's place, it is.
    stock = "could have a material adverse effect on our business and results of operations."
    risk, tariffs = f"Cyber attacks on our systems {stock}", f"New tariffs on imported steel {stock}"
    apart = align(["One.", risk, "Two.", "Three."], ["One.", "Two.", "Three.", tariffs])
    assert apart.changed == [] and apart.removed == [1] and apart.added == [3]
    assert [(i, j) for i, j, _r in align(["One.", risk], ["One.", tariffs]).changed] == [(1, 1)]


def test_a_cut_text_reports_nothing_past_the_last_shared_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    old = ["One.", "Two.", "Three is old.", "Four."]
    new = ["One.", "Two and a half.", "Two.", "Three is new here."]
    whole = align(old, new)
    assert whole.added == [1, 3] and whole.removed == [2, 3] and whole.changed == []
    cut = align(old, new, open_end=True)
    assert cut.added == [1] and cut.removed == [] and cut.changed == []
    # More pairs than the budget in a place: that place's sentences stay removed and added.
    monkeypatch.setattr(comparison, "MAX_PAIRS", 1)
    many = align(["A b c d.", "Same.", "E f g h.", "I j k l."], ["A b c x.", "Same.", "E f g y.", "M n o p."])
    assert [(i, j) for i, j, _r in many.changed] == [(0, 0)] and many.unpaired


def test_a_list_run_into_its_paragraph_reads_as_the_same_sentences_as_one_set_a_line_each() -> None:
    inline = "Costs may rise as a result of: • The failure to forecast demand; • Volatility in prices."
    lines = "Costs may rise as a result of:\n• The failure to forecast demand;\n• Volatility in prices."

    def keys(text: str) -> list[str]:
        stitched = stitch([_piece(1, text)])
        return [sentence_key(stitched.text[a:b]) for a, b in stitched.sentences()]

    assert keys(inline) == keys(lines) and len(keys(lines)) == 3
