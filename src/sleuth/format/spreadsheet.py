"""Cells a spreadsheet opens as data, never as formulas (CSV injection, OWASP; issue 40, item 11).

Excel, LibreOffice and Google Sheets run a CSV cell that starts with `=`, `+`, `-` or `@` as a formula
(`=cmd|' /C calc'!A0`, `=HYPERLINK(…)`), and a tab or carriage return before one is skipped over. A
table's values come from documents and from models, so an exported text cell that starts with one of
those characters (after any spaces, tabs or line breaks) is written with a `'` in front: the
spreadsheet shows the text and runs nothing.

Numbers stay numbers: an integer or a float from SQLite is written as it is (`-12.5`), and so is a
text cell that is nothing but a plain decimal number (`-12.5`, `+3`, `1e-3`), since a spreadsheet reads
it as that number and runs nothing. Anything else (`-2+3`, `+1-1`, `-A1`) is neutralised.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["safe_cell", "safe_row"]

#: What a spreadsheet reads as the start of a formula (OWASP's list: `= + - @`, tab and CR).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_LEADING = " \t\r\n"
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    """`value` as a CSV cell a spreadsheet cannot run: text that would start a formula gets a `'` in
    front; numbers, None and plain numeric text are returned unchanged."""
    if not isinstance(value, str) or not value:
        return value
    if value[0] in FORMULA_STARTS or value.lstrip(_LEADING)[:1] in FORMULA_STARTS:
        if _PLAIN_NUMBER.fullmatch(value):
            return value
        return "'" + value
    return value


def safe_row(row: Iterable[Any]) -> list[Any]:
    """Every cell of `row` through `safe_cell`."""
    return [safe_cell(cell) for cell in row]
