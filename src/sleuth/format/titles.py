"""Title-zone word indexes as a version stores them (`index/titles/<source path>.json`): for one
document, its pages and, for each word in a page's title zone (`store.rescore.PageWords.title`),
the positions of the pages that hold it.

Written at compile time so that the first question naming a document does not split each of its
pages' title zones (measured on FinanceBench: a large share of a cold keyword search), and one file
per document so that a reader loads only the documents it is asked about.
"""

from __future__ import annotations

import json
from pathlib import Path

DIRECTORY = "titles"
FORMAT = 1


def path_of(index_dir: Path, source_path: str) -> Path | None:
    """The file of `source_path`, or None for a path that would leave the directory."""
    root = (index_dir / DIRECTORY).resolve()
    path = (root / f"{source_path}.json").resolve()
    return path if path.is_relative_to(root) else None


def write(index_dir: Path, source_path: str, pages: list[int], by_word: dict[str, list[int]]) -> None:
    path = path_of(index_dir, source_path)
    if path is None:
        raise ValueError(f"not a source path: {source_path!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "pages": pages, "words": dict(sorted(by_word.items()))}
    path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")


def read(index_dir: Path, source_path: str) -> tuple[list[int], dict[str, list[int]]] | None:
    """(pages, word → page positions) of one document; None when the version has no such file
    (compiled before these existed) or it is not in this format."""
    path = path_of(index_dir, source_path)
    if path is None or not path.is_file():
        return None
    data = json.loads(path.read_text("utf-8"))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    pages, by_word = data.get("pages"), data.get("words")
    if not isinstance(pages, list) or not isinstance(by_word, dict):
        return None
    return pages, by_word  # the version's own file, as written: not converted element by element
