"""What a `must_contain` text means: whole words in any case and spacing, or, ending in `*`, a prefix
("inventor*" is in "inventories"); and how far a search that must contain it looks."""

from __future__ import annotations

import re

from sleuth.format.text import folded

#: `containing` looks at no more than this many chunks; a `must_contain` search ranks its matches
#: among this many results of the plain search first.
CONTAINING_LIMIT = 2000
MUST_CONTAIN_DEPTH = 100


def whole_words(text: str) -> re.Pattern[str]:
    """`text` found in `format.text.folded` text (any case, any spacing) where no letter or digit runs
    on at either end: "EPS" is not in "steps", "1.2 billion" not in "21.2 billion". A trailing `*`
    lets the last word run on: "inventor*" is in "inventories"."""
    wanted = folded(text)
    if is_prefix(wanted):
        return re.compile(rf"(?<!\w){re.escape(wanted[:-1])}\w*")
    return re.compile(rf"(?<!\w){re.escape(wanted)}(?!\w)")


def is_prefix(text: str) -> bool:
    """A `must_contain` text whose last word is a prefix: it ends in `*` after a letter or digit."""
    wanted = text.rstrip()
    return len(wanted) > 1 and wanted.endswith("*") and (wanted[-2].isalnum())


#: Chunks `completions` reads for the words that start with a fragment, and the words it names.
COMPLETION_CHUNKS = 500
COMPLETIONS = 5


def last_word(text: str) -> str:
    """The last word of a `must_contain` text, without its `*`."""
    words = text.rstrip().removesuffix("*").split()
    return words[-1] if words else ""


def whole_part(text: str) -> str:
    """What of a `must_contain` text must stand as whole words: all of it, or all but the last word of
    one that ends in a prefix."""
    if not is_prefix(text):
        return text
    return " ".join(text.rstrip().removesuffix("*").split()[:-1])
