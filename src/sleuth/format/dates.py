"""Month names as documents write them, one table for every reader of written dates: a document's
period (`compile.identity`), a table's column headers (`compile.parse.layout_tables`,
`compile.table_cells`), a value a model extracted (`compile.extraction.values`), an answer's figures
(`agent.evaluation.matching`)."""

from __future__ import annotations

#: Each month's name and abbreviations, lower case, to its number.
MONTHS: dict[str, int] = {
    name: number
    for number, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        1,
    )
    for name in names
}
#: A regular-expression alternation of the names, longest first (use with `re.IGNORECASE`).
MONTH_NAMES = "|".join(sorted(MONTHS, key=len, reverse=True))
