"""A quantity found in the words the documents themselves use (issue 45, item 6): "How many employees
did 3M have?" is answered by "the Company employed 93,516 people", a sentence no table row and no
stemmer ties to "employees" (Snowball keeps `employe` and `employ` apart). The question's word is cut
to the root its family shares (`employ`), and the search is narrowed to chunks holding a word of that
family as the corpus spells it (`must_contain=["employ*"]`): the corpus decides which words exist,
not a list of synonyms.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sleuth.store.text import words as raw_words

#: Endings English adds to a root to make a word of its family, longest first: what is left is a
#: prefix every member of the family starts with ("employ" of employee, employed, employment).
_ENDINGS = (
    "ments", "ment", "ations", "ation", "ings", "ing", "ions", "ion", "ees", "ee", "ers", "er", "ed",
    "ies", "es", "s", "e", "y",
)  # fmt: skip
#: A root shorter than this matches too many words to narrow a search ("sal" of sales).
MIN_ROOT = 4
#: Words that say how much, not what: never the word a family is built on.
_GENERIC = frozenset({"total", "amount", "number", "net", "gross", "consolidated", "annual", "year"})


def family_root(word: str) -> str | None:
    """The prefix `word`'s family shares: the word less its longest ending that leaves `MIN_ROOT`
    letters; None for a word that is not letters or is too short to narrow anything."""
    word = word.lower()
    if not word.isalpha() or len(word) < MIN_ROOT:
        return None
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= MIN_ROOT:
            return word[: -len(ending)]
    return word


def family_filters(quantity: Sequence[str]) -> list[str]:
    """`must_contain`'s texts for a quantity, to try in order: each word's root and `*` (any word of
    its family), the head word (the last) first — "employee headcount" is `headcount*`, then
    `employ*` where the documents never say "headcount"."""
    roots = (family_root(w) for w in reversed(quantity) if w not in _GENERIC)
    return list(dict.fromkeys(f"{root}*" for root in roots if root is not None))


#: A number in a sentence, not a year, a list's `(5)` or a percentage (`20% growth in headcount` is no
#: head count): what a count or an amount is stated as.
AMOUNT_NUMBER = re.compile(r"^(?!(?:19|20)\d\d$)(?!\(\d{1,2}\)$)\(?\d[\d,.]*\)?$")
#: Words after which a number points somewhere (`Exhibit 10.2`, `Item 7`, `Note 13`): no amount.
REFERENCE_WORDS = frozenset(
    {"exhibit", "exhibits", "item", "items", "note", "notes", "section", "part", "rule", "form", "no"}
    | {"schedule", "article", "page", "pages", "level", "tier", "phase", "plan"}
)
SCALES = (["thousand"], ["million"], ["billion"], ["trillion"])
NEAR_WORDS = 3  # a figure this many words from the quantity's word is stated of it


def count_distance(text: str, roots: set[str]) -> int | None:
    """How many words apart `text` puts a number (not a year, a pointer's or a percentage) and a word
    of the asked quantity's family (`roots`), at the closest: 1 for "approximately 116,000 employees",
    2 for "5,500 total employees"; None past `NEAR_WORDS` or for none."""
    tokens = text.split()
    numbers = [
        i
        for i, t in enumerate(tokens)
        if AMOUNT_NUMBER.match(t.strip("$€£[],;:"))
        and not (i and tokens[i - 1].lower().strip(".,:;(") in REFERENCE_WORDS)
        # `10.3` on its own is a reference or a ratio; `$1.5` and `1.5 million` are amounts
        and ("." not in t.strip(".,;:") or t[:1] in "$€£" or tokens[i + 1 : i + 2] in SCALES)
    ]
    named = [i for i, t in enumerate(tokens) if any(w.startswith(tuple(roots)) for w in raw_words(t))]
    apart = [abs(i - j) for i in numbers for j in named if abs(i - j) <= NEAR_WORDS]
    return min(apart) if apart else None


def with_families(words: Sequence[str]) -> set[str]:
    """`words` and the family root of each: a question's word meets a sentence's of its family."""
    return {*words, *(r for r in map(family_root, words) if r is not None)}
