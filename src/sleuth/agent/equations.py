"""The working an answer shows, checked (issue 45: every number computed from verified spans).

"24.26 = 6,489 [1] / ((282 [2] + 253 [3]) / 2)" or "6.9 − 5.4 = 1.5": where one side of an `=` is a
single figure and the other an expression over figures, brackets and `+ − × / ^`, the equation holds
when the expression gives the figure at its printed precision. The claim check (`claims`) then counts
that figure as derived, and the small constants of the working as part of it (the 2 of an average of
two, the 365 of a day count, the 1 of a growth rate); every other figure of the expression still has
to be in the span it cites. Labels before a figure inside an expression ("Net revenues 6,489") are
read past. Nothing is evaluated but this arithmetic: no names, no calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sleuth.format.numbers import Number, close

_TOKEN = re.compile(
    r"(?P<mark>\[\d+\])"
    r"|(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?P<pct>\s*%)?"
    r"|(?P<op>[-+*/^×÷−–])"
    r"|(?P<lp>\()|(?P<rp>\))|(?P<eq>=)|(?P<stop>[;:])"
    r"|(?P<word>[^\W\d_][\w&'’.]*)|(?P<comma>,)"
)
#: Constants a working may use without a citation: counts of periods and the usual day counts.
_CONSTANTS = frozenset({*range(13), 100, 360, 365, 366})
MAX_TOKENS = 200  # a sentence's working; longer text is not a formula a reader checks by eye
_MINUS = "-−–"


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    value: float = 0.0
    percent: bool = False
    cited: bool = False  # a figure with a citation marker right after it: an operand, not a constant


def shown_working(sentence: str) -> list[Number]:
    """The figures of `sentence` that its own working accounts for: the result of each equation that
    holds, and the uncited small constants inside it."""
    tokens = _tokens(sentence)
    out: list[Number] = []
    for i, token in enumerate(tokens):
        if token.kind != "eq":
            continue
        left, right = _backward(tokens, i), _forward(tokens, i)
        for result, expression in ((left, right), (right, left)):
            if result[:1] and result[0].kind == "op" and result[0].text in _MINUS + "+":
                result = result[1:]  # a signed result: signs are not compared (`_agrees`)
            if len(result) != 1 or result[0].kind != "num" or len(expression) < 3:
                continue
            value = _evaluate(expression)
            if value is None or not _agrees(value, result[0], rounded=any(t.percent for t in expression)):
                continue
            figure = result[0]
            out.append(_number(figure))
            out += [
                _number(t) for t in expression if t.kind == "num" and not t.cited and t.value in _CONSTANTS
            ]
    return out


def _tokens(sentence: str) -> list[_Token]:
    out: list[_Token] = []
    for match in _TOKEN.finditer(sentence):
        kind = match.lastgroup or ""
        if kind == "pct":
            kind = "num"
        if kind == "mark":
            if out and out[-1].kind == "num":
                last = out[-1]
                out[-1] = _Token("num", last.text, last.value, last.percent, cited=True)
            continue
        if kind == "num":
            text = match.group("num")
            out.append(_Token("num", text, float(text.replace(",", "")), bool(match.group("pct"))))
        else:
            out.append(_Token(kind, match.group(0)))
        if len(out) > MAX_TOKENS:
            return []
    return out


def _forward(tokens: list[_Token], eq: int) -> list[_Token]:
    """The expression right of `tokens[eq]`: figures, operators and brackets, reading past the label
    before a figure, up to where the arithmetic stops (a `;`, a word after a figure, a bracket it
    did not open)."""
    out: list[_Token] = []
    depth, operand = 0, True
    for token in tokens[eq + 1 :]:
        kind = token.kind
        if kind in ("word", "comma"):
            if operand:
                continue  # a label before its figure
            break
        if kind == "num" and operand:
            out.append(token)
            operand = False
        elif kind == "op" and (
            not operand or (token.text in _MINUS + "+" and (not out or out[-1].kind != "num"))
        ):
            out.append(token)
            operand = True
        elif kind == "lp" and operand:
            out.append(token)
            depth += 1
        elif kind == "rp" and not operand and depth:
            out.append(token)
            depth -= 1
        else:
            break
    while out and out[-1].kind in ("op", "lp"):
        out.pop()
    return out if depth == 0 or _balanced(out) else []


def _backward(tokens: list[_Token], eq: int) -> list[_Token]:
    """The expression left of `tokens[eq]`, read back to where the arithmetic starts."""
    out: list[_Token] = []
    depth, operand = 0, True  # read backwards: an operand (a figure or a closing bracket) comes first
    j = eq - 1
    while j >= 0:
        token = tokens[j]
        if token.kind == "num" and operand:
            out.insert(0, token)
            operand = False
        elif token.kind == "op" and not operand:
            out.insert(0, token)
            operand = True
        elif token.kind == "rp" and operand:
            out.insert(0, token)
            depth += 1
        elif token.kind == "lp" and not operand and depth:
            out.insert(0, token)
            depth -= 1
        else:
            break
        j -= 1
    if out and out[0].kind == "op":  # a sign before the first figure, or an operator of prose before it
        if out[0].text in _MINUS + "+" and (j < 0 or tokens[j].kind != "num"):
            pass
        else:
            out.pop(0)
    return out if depth == 0 else []


def _balanced(tokens: list[_Token]) -> bool:
    depth = 0
    for token in tokens:
        depth += token.kind == "lp"
        depth -= token.kind == "rp"
        if depth < 0:
            return False
    return depth == 0


def _evaluate(tokens: list[_Token]) -> float | None:
    """The value of an arithmetic expression (`+ − × / ^`, brackets, unary signs); None when it is not
    one or divides by zero."""
    position = 0

    def peek() -> _Token | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> _Token:
        nonlocal position
        token = tokens[position]
        position += 1
        return token

    def expression() -> float:
        value = term()
        while (t := peek()) is not None and t.kind == "op" and t.text in _MINUS + "+":
            sign = take().text
            right = term()
            value = value + right if sign == "+" else value - right
        return value

    def term() -> float:
        value = power()
        while (t := peek()) is not None and t.kind == "op" and t.text in "*×/÷":
            times = take().text in "*×"
            right = power()
            value = value * right if times else value / right
        return value

    def power() -> float:
        base = unary()
        if (t := peek()) is not None and t.kind == "op" and t.text == "^":
            take()
            exponent = power()
            if base < 0 or abs(exponent) > 100:
                raise ValueError
            return float(base**exponent)
        return base

    def unary() -> float:
        t = peek()
        if t is not None and t.kind == "op" and t.text in _MINUS + "+":
            take()
            value = unary()
            return value if t.text == "+" else -value
        return atom()

    def atom() -> float:
        t = take()
        if t.kind == "num":
            return t.value
        if t.kind == "lp":
            value = expression()
            if take().kind != "rp":
                raise ValueError
            return value
        raise ValueError

    try:
        value = expression()
    except (ValueError, IndexError, ZeroDivisionError, OverflowError, RecursionError):
        return None
    return value if position == len(tokens) else None


def _agrees(value: float, result: _Token, rounded: bool) -> bool:
    """The expression gives the printed figure: at its precision (half a unit of its last place; a
    whole unit where the working adds up rounded percentages), as a share it prints as a percentage,
    and either sign (an outflow in brackets is a share by its size)."""
    decimals = _decimals(result.text)
    slack = 10.0**-decimals * (1.0 if rounded else 0.5) + 1e-9
    candidates = [abs(value)] + ([abs(value) * 100] if result.percent else [])
    return any(close(v, result.value, decimals) or abs(v - result.value) <= slack for v in candidates)


def _number(token: _Token) -> Number:
    return Number(token.value, _decimals(token.text), percent=token.percent, shown=token.text)


def _decimals(figure: str) -> int:
    """Decimal places a figure is printed with (`24.26` → 2)."""
    return len(figure.split(".")[1]) if "." in figure else 0
