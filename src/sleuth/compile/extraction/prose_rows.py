"""Rows of a `format: sqlite` type found in running text, one quote each, coerced to the column types.

A row is kept only when its quote is located on a page and every value it carries is stated where it
must be (`_values_stated`): a made-up figure beside a real sentence is screened.
"""

from __future__ import annotations

import re
from typing import Any

from sleuth.compile.extraction import prompts
from sleuth.compile.extraction.cache import cache_key
from sleuth.compile.extraction.calls import ExtractionCalls
from sleuth.compile.extraction.quotes import QuoteLocator
from sleuth.compile.extraction.schemas import RowsReply
from sleuth.compile.extraction.values import date_in, number_in, text_in
from sleuth.compile.manifest import ArtifactType
from sleuth.compile.pages import Page
from sleuth.compile.typed_tables import ProseRows, Row, coerce, resolve_columns

_ISO_DATE = re.compile(r"^\d{4}-\d{2}(?:-\d{2})?$")


class ProseRowExtraction(ExtractionCalls):
    """`prose_rows` of the `Extractor` protocol."""

    def prose_rows(self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]]) -> ProseRows:
        """Rows of a `format: sqlite` type stated in running text, one quote each."""
        found = self._each(
            art_type, sorted(pages_by_source), lambda s: self._rows(art_type, s, pages_by_source[s])
        )
        prose = ProseRows()
        for part in found:
            if part is not None:
                prose.rows.extend(part.rows)
                prose.screened += part.screened
        self._stats(art_type.name).count("built", len(prose.rows))
        return prose

    def _rows(self, art_type: ArtifactType, source: str, pages: list[Page]) -> ProseRows:
        stats = self._stats(art_type.name)
        columns, _warnings = resolve_columns(art_type)
        texts, system, base = self._inputs("rows", art_type, source, pages)
        locator = QuoteLocator(source, pages)
        source_text = "\n".join(page.text for page in pages)
        out = ProseRows()
        for index, text in enumerate(texts):
            key = cache_key("rows", *base, str(index))
            reply = self._ask(RowsReply, system, prompts.source_text(source, text), art_type.name, key)
            for claim in reply.rows if reply else []:
                at = locator.locate(claim.quote)
                if at is None:
                    stats.count("quotes_rejected", 1)
                    stats.screen("no verifiable quote")
                    out.screened += 1
                    continue
                stats.count("quotes_verified", 1)
                given = {k.casefold(): v for k, v in claim.values.items()}
                values: dict[str, Any] = {}
                for col in columns:
                    raw = given.get(col.name.casefold())
                    value, ok = coerce("" if raw is None else str(raw), col.type)
                    if not ok:
                        stats.screen("value did not coerce")
                        out.screened += 1
                    values[col.name] = value
                if all(v is None for v in values.values()):
                    stats.screen("empty row")
                    out.screened += 1
                    continue
                if not _values_stated(values, at.quote, source_text):
                    stats.screen("value not in its quote")
                    stats.count("values_rejected", 1)
                    out.screened += 1
                    continue
                out.rows.append(Row(values, [source], [at]))
        return out


def _values_stated(values: dict[str, Any], quote: str, source_text: str) -> bool:
    """Is every value of a model-made row stated where it must be? Numbers and dates in the row's own
    quote (a made-up figure beside a real sentence is what this catches); text in the quote or, since
    a row's subject is often named in a heading rather than in the sentence, in its source."""
    for value in values.values():
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            if not number_in(float(value), quote):
                return False
        elif _ISO_DATE.match(str(value)):
            if not date_in(str(value), quote):
                return False
        elif not text_in(str(value), quote) and not text_in(str(value), source_text):
            return False
    return True
