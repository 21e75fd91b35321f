"""The names financial statements give a quantity (issue 45, item 6): a question's "COGS" must meet
`Cost of sales`, its "revenue" `Total net sales`, its "capex" `Purchases of property, plant and
equipment`. The field's vocabulary, written once, not one corpus's: which of these labels a filing uses
is the filing's to say, and the planner reads whichever its cells hold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sleuth.agent.extractive import content_words

#: Standard abbreviations of financial statements, spelled as statements label their rows: a question's
#: "PP&E" must meet `Property and equipment, net`.
ABBREVIATIONS = {
    "pp&e": "property plant and equipment",
    "ppe": "property plant and equipment",
    "ppne": "property plant and equipment net",  # PP&E, net: the balance sheet's
    "cogs": "cost of goods sold",
    "capex": "capital expenditures",
    "sg&a": "selling general and administrative",
    "r&d": "research and development",
    "d&a": "depreciation and amortization",
}
#: The names statements give each margin's profit, the usual one first: a margin tries each in turn.
MARGIN_PROFITS = {
    "gross": ("gross profit", "gross margin"),
    "operating": ("operating income", "operating profit", "income from operations", "operating earnings"),
    "net": ("net income", "net earnings"),
}
#: The names statements give revenue, tried in this order.
REVENUE_NAMES = ("revenue", "revenues", "net revenue", "net revenues", "total revenue", "net sales", "sales")
_OPERATING_CASH = ("net cash provided by operating activities", "net cash from operating activities")
_CAPITAL_SPENDING = (
    "purchases of property and equipment",
    "purchases of property plant and equipment",
    "additions to property and equipment",
    "payments for property and equipment",
    "capital spending",
)
#: Other names statements give a spelled-out quantity (a row search reads them all).
ALSO_LABELLED = {
    "cost of goods sold": ("cost of sales", "cost of revenues", "cost of products sold"),
    "operating income": MARGIN_PROFITS["operating"][1:],  # PepsiCo's `Operating Profit`
    "net income": ("net earnings",),
    "cash from operations": _OPERATING_CASH,
    "cash from operating activities": _OPERATING_CASH,
    "cash flow from operating activities": _OPERATING_CASH,
    "operating cash flow": _OPERATING_CASH,
    "capital expenditure": _CAPITAL_SPENDING,
    "revenue": ("net sales",),  # Amazon's and Lockheed Martin's `Net sales` are their revenue
}
#: Terms analysts use without defining them, as the field defines them: a question's own definition
#: comes first (`definitions.terms`).
FIELD_DEFINITIONS = {
    "ebitda": "operating income + depreciation and amortization from the cash flow statement"
}
#: Words that say how much of a quantity a name holds, not which quantity: "total revenue" is revenue.
QUALIFIERS = frozenset({"total", "net", "consolidated"})
_ABBREVIATED = re.compile(
    r"(?<![\w&])(" + "|".join(re.escape(a) for a in ABBREVIATIONS) + r")(?![\w&])", re.IGNORECASE
)


def spelled_out(text: str) -> str:
    """`text` with the field's abbreviations written as statements label them (`ABBREVIATIONS`)."""
    return _ABBREVIATED.sub(lambda m: ABBREVIATIONS[m.group(1).lower()], text)


def also_labelled(phrase: str) -> tuple[str, ...]:
    """The other names of the quantity `phrase` names wholly ("total revenue": `net sales`)."""
    words = [w for w in spelled_out(phrase).lower().split() if w not in QUALIFIERS]
    said = " ".join(words)
    return ALSO_LABELLED.get(said) or ALSO_LABELLED.get(said.removesuffix("s"), ())  # "… expenditures"


def other_names(ask: str, quantity: Sequence[str] | None = None) -> list[str]:
    """The names statements give a quantity the question names otherwise: its abbreviation spelled
    out (`COGS`: cost of goods sold) and the other labels of the field's spelled-out quantities
    (capital expenditures: `Purchases of property, plant and equipment`). With `quantity` (the asked
    quantity's words), only the names of a quantity it is wholly: "EBITDA less capex" is not capex."""
    names: list[str] = []
    for m in _ABBREVIATED.finditer(ask):
        full = ABBREVIATIONS[m.group(1).lower()]
        names += [n for n in (full, *ALSO_LABELLED.get(full, ())) if _wholly(quantity, full, m.group(1))]
    spelled = spelled_out(ask).lower()
    for full, also in ALSO_LABELLED.items():
        said = re.search(rf"\b{full}", spelled) is not None  # or its words asked apart ("how much cash …
        apart = bool(quantity) and set(quantity or ()) == set(content_words(full))  # … from operations")
        if (said or apart) and _wholly(quantity, full, full):
            names += also
    return list(dict.fromkeys(names))


def _wholly(quantity: Sequence[str] | None, full: str, said: str) -> bool:
    """Whether the asked quantity's words are all the field quantity's (`full`, or as `said`)."""
    return quantity is None or set(quantity) <= set(content_words(full)) | set(content_words(said)) | {
        "amount",
        *QUALIFIERS,
    }


__all__ = [
    "ABBREVIATIONS",
    "ALSO_LABELLED",
    "FIELD_DEFINITIONS",
    "MARGIN_PROFITS",
    "QUALIFIERS",
    "REVENUE_NAMES",
    "also_labelled",
    "other_names",
    "spelled_out",
]
