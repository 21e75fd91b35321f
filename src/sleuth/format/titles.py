"""Title-zone word indexes as a version stores them (`index/titles/<source path>.json`): for one
document, its pages and, for each word in a page's title zone (`store.rescore.PageWords.title`),
the positions of the pages that hold it.

Written at compile time so that the first question naming a document does not split each of its
pages' title zones (measured on FinanceBench: a large share of a cold keyword search), and one file
per document so that a reader loads only the documents it is asked about.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath

DIRECTORY = "titles"
#: 2: the words and their positions as two tab-separated strings, parsed for the words a question
#: asks about (a document's ~1,700 words and ~6,000 positions as JSON objects took ~1 ms to decode,
#: a fifth of a cold keyword search). 1 (stop 33): `{"words": {word: [positions]}}`, still read.
FORMAT = 2


class Positions(Mapping[str, list[int]]):
    """Word → page positions of one document, each word's positions parsed when it is looked up."""

    def __init__(self, words: str, positions: str) -> None:
        self._raw = dict(zip(words.split("\t"), positions.split("\t"), strict=True)) if words else {}

    def __getitem__(self, word: str) -> list[int]:
        return [int(position) for position in self._raw[word].split()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def path_of(index_dir: Path, source_path: str) -> Path | None:
    """The file of `source_path`, or None for a path that would leave the directory (checked on the
    path's parts: no `..`, not absolute; a version's directory holds no links)."""
    parts = PurePosixPath(source_path).parts
    if not parts or source_path.startswith("/") or any(part in ("..", ".") for part in parts):
        return None
    return index_dir / DIRECTORY / f"{source_path}.json"


def write(index_dir: Path, source_path: str, pages: list[int], by_word: Mapping[str, Sequence[int]]) -> None:
    path = path_of(index_dir, source_path)
    if path is None:
        raise ValueError(f"not a source path: {source_path!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    ordered = sorted(by_word.items())
    if any(not word or "\t" in word or " " in word for word, _ in ordered):
        raise ValueError("a title word holds a space or a tab")
    data = {
        "format": FORMAT,
        "pages": pages,
        "words": "\t".join(word for word, _ in ordered),
        "positions": "\t".join(" ".join(map(str, positions)) for _, positions in ordered),
    }
    path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")


def read(index_dir: Path, source_path: str) -> tuple[list[int], Mapping[str, list[int]]] | None:
    """(pages, word → page positions) of one document; None when the version has no such file
    (compiled before these existed) or it is in no format this reader knows."""
    path = path_of(index_dir, source_path)
    if path is None or not path.is_file():
        return None
    data = json.loads(path.read_text("utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("pages"), list):
        return None
    pages = data["pages"]
    if data.get("format") == 1 and isinstance(data.get("words"), dict):
        return pages, data["words"]  # the version's own file, as written: not converted element by element
    words, positions = data.get("words"), data.get("positions")
    if data.get("format") != FORMAT or not isinstance(words, str) or not isinstance(positions, str):
        return None
    try:
        return pages, Positions(words, positions)
    except ValueError:  # not as many position lists as words
        return None
