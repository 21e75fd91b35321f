"""Which cell a phrase names among the cells a computation read (issue 45, item 2): the row whose head
noun the phrase names, by the question's words or the names statements give the quantity
(`statement_names`): "cost of goods sold" meets `Cost of sales`, "total revenue" `Total net sales`.
"""

from __future__ import annotations

import re

from sleuth.agent.arithmetic import Operand, head_nouns, operand_words
from sleuth.agent.extractive import asked_months
from sleuth.agent.planner_figures import OF_WHAT
from sleuth.agent.statement_names import QUALIFIERS, also_labelled, spelled_out


def resolve(phrase: str, pool: list[Operand]) -> Operand | None:
    """The cell whose row the phrase names: the row's head noun among the phrase's words (`Cost of
    sales` for cost of goods sold, `Property and equipment, net` for PP&E) and the most of their words
    in common; None when none does or two different figures tie. `Total revenues` and `Net revenues`
    are revenue; where two such rows differ, the one with the phrase's own qualifier (`Total assets` for
    "total assets", never `Net assets`), else the net one (what the balance sheet carries) is read. Of
    rows that name it alike, those of the statements the question points at ("… the balance sheet")."""
    spelled = " ".join(spelled_out(phrase).lower().split())
    names = [spelled, *also_labelled(spelled)]  # "cash from operations": `Net cash provided by …`
    scored: list[tuple[float, Operand]] = []
    for operand in pool:
        # the label, or what it says its quantity is of where that names two words or more
        # (`Depreciation and amortization of property, equipment and intangibles`)
        head = operand_words(OF_WHAT.sub("", operand.label)) - QUALIFIERS  # as the step reads it
        labels = [operand_words(operand.label) - QUALIFIERS, *([head] if len(head) >= 2 else [])]
        score = 0.0
        for name, label in ((n, w) for n in names for w in labels):
            wanted = operand_words(name)
            if not label or not wanted or not head_nouns(operand.label) & head_nouns(name):
                continue
            common = len(label & wanted)
            if common * 2 >= len(label):  # most of the row's words are the name's
                score = max(score, common / len(label | wanted))
        if score:
            scored.append((score, operand))
    scored.sort(key=lambda pair: -pair[0])
    if not scored:
        return None
    best = [o for s, o in scored if s == scored[0][0]]
    qualified = set(spelled.split()) & QUALIFIERS  # "total assets": `Total assets`, not `Net assets`
    best = [o for o in best if qualified and qualified <= set(re.findall(r"\w+", o.label.lower()))] or best
    best = [o for o in best if o.titled] or best  # of rows alike, those of the statements it points at
    carried = [o for o in best if "net" in operand_words(o.label)]
    if len({o.value for o in best}) > 1 and len({o.value for o in carried}) == 1:
        return carried[0]  # `Property and equipment, net` over the gross `Total property and equipment`
    if len({o.value for o in best}) > 1:
        want = asked_months(phrase)
        said = [o for o in best if want is not None and o.months == want]
        return said[0] if len(said) == 1 else None
    return best[0]


def pair(quantity: str, found: list[Operand], first: int, last: int) -> tuple[Operand, Operand] | None:
    """The quantity's cells in the two years, from one row of one document."""
    a = resolve(quantity, [o for o in found if o.year == first])
    if a is None:
        return None
    b = next(
        (
            o
            for o in found
            if o.year == last and o.path == a.path and o.label.casefold() == a.label.casefold()
        ),
        None,
    )
    return None if b is None or a.unit != b.unit else (a, b)


__all__ = ["pair", "resolve"]
