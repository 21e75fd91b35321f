"""A section the question names, answered without a model (issue 45, section answers): "Summarize the risk
factors" or "What legal proceedings is Netflix involved in?" is the named section's own outline — its
subheadings, or its paragraphs where it has none, each by its opening sentence, cited — read from the
section structure the compiler keeps on every chunk, not three sentences from anywhere in the filing."""

from __future__ import annotations

import inspect
import re
from typing import Any

from sleuth.store.text import stem

#: A question that asks what a section says rather than for one fact in it.
_ASKS_SECTION = re.compile(
    r"^\s*(?:please\s+)?(?:summari[sz]e|describe|outline|list|explain)\b"
    r"|\b(?:give|provide)\s+(?:me\s+)?(?:an?\s+)?(?:overview|summary)\b"
    r"|\bwhat\s+(?:are|were|is)\s+(?:the\s+)?(?:main\s+|key\s+|major\s+|principal\s+|primary\s+)?"
    r"(?:risks?|risk\s+factors|legal\s+proceedings)\b"
    r"|\b(?:risk\s+factors|legal\s+proceedings)\b",
    re.IGNORECASE,
)
#: Words of a question that say how to answer, not which section: never what names a heading.
_ASKING = frozenset(
    {"summarize", "summarise", "describe", "outline", "list", "explain", "give", "provide", "overview"}
    | {"summary", "main", "key", "major", "principal", "primary", "what", "are", "were", "the", "is"}
)
SECTION_ITEMS = 6  # lines of an outline answer
SENTENCE_CHARS = 220  # an item's opening sentence is cut at this many characters
_STEM = inspect.getsource(stem).splitlines()


def section_words(ask: str) -> tuple[str, ...] | None:
    """The stemmed words a heading of the section a question asks about may be named by; None for a
    question that asks for no section's content."""
    if not _ASKS_SECTION.search(ask):
        return None
    words = [w for w in re.findall(r"[a-z0-9]+", ask.lower()) if w not in _ASKING and len(w) > 1]
    named = tuple(dict.fromkeys(stem(w) for w in words))
    return named or None


def section_code(preamble: list[str], wanted: tuple[str, ...]) -> str:
    """Step 2 of a section question, after the general search (whose `chunks` and `inside_named` the
    REPL still holds): the heading on the hits' section paths that the question names best (at least
    half its own words), that section read in order (`read_section`), and one item per subheading, or
    per paragraph where it has none: the first sentence, cited. The plan keeps the search's rows, so a
    section not found still answers with them."""
    lines = [
        *preamble,
        f"wanted = {sorted(set(wanted))!r}  # the question's words (stemmed) that may name a heading",
        *_STEM,
        "def own_words(text):",
        '    found = {stem(w) for w in re.findall(r"[a-z0-9]+", (text or "").lower())}',
        '    return {w for w in found if not w.isdigit() and len(w) > 1} - {"item", "part"}',
        "def named_by(heading):",
        "    own = own_words(heading)",
        "    return len(own & set(wanted)) / len(own) if own else 0.0",
        "def heading_like(line):",
        "    return len(line) < 80 and line[-1] not in '.;'",
        "def opening(c):",
        "    lines = [line.strip() for line in (c.fields['chunk_text'] or '').splitlines() if line.strip()]",
        "    # headings and label lines first (`## 2. Eligibility`, `Item 3. Legal Proceedings`)",
        "    while len(lines) > 1 and (lines[0].startswith('#') or heading_like(lines[0])):",
        "        lines.pop(0)",
        '    text = " ".join(" ".join(lines).split())',
        "    if text[:1].islower():  # a window that starts inside a sentence: from the next one",
        '        text = (re.split(r"(?<=[.!?])\\s+(?=[A-Z])", text, maxsplit=1)[1:] or [""])[0]',
        '    first = re.split(r"(?<=[.!?])\\s+(?=[A-Z])", text, maxsplit=1)[0]',
        f"    if len(first) <= {SENTENCE_CHARS}:",
        "        return first",
        f"    return first[:{SENTENCE_CHARS}].rsplit(' ', 1)[0] + ' …'",
        "best = None",
        "for h in [*inside_named, *chunks]:",
        '    trail = list(h.fields["section_path"])',
        "    for depth, heading in enumerate(trail):",
        "        score = named_by(heading)",
        "        if score >= 0.5 and (best is None or score > best[0]):",
        "            best = (score, h, trail[: depth + 1])",
        "items, heading, where, pages = [], None, None, []",
        "if best is not None:",
        "    _score, found, trail = best",
        "    heading, where = trail[-1], found.name",
        "    deepest = len(trail) == len(found.fields['section_path'])  # from the hit: not a contents page",
        "    try:",
        "        if deepest:",
        "            passage = read_section(found, max_chars=20000)",
        "        else:",
        '            passage = read_section(found.name, section=" > ".join(trail), max_chars=20000)',
        "    except Exception:  # the heading reads no section back (NotFoundError): the search answers",
        "        passage = None",
        "    if passage is not None:",
        "        pages = passage.pages",
        "        def below(c):",
        '            deeper = list(c.fields["section_path"])[len(trail) : len(trail) + 1]',
        "            return deeper[0] if deeper else None",
        "        by_heading = len({below(c) for c in passage.hits} - {None}) > 1  # else by paragraph",
        "        taken = set()",
        "        for c in passage.hits:",
        "            sub = below(c) if by_heading else None",
        "            if by_heading and sub is None:  # what stands above the first subheading",
        "                continue",
        "            sentence = opening(c)",
        "            if (sub is not None and sub in taken) or len(sentence) < 20:",
        "                continue",
        "            taken.add(sub)",
        '            items.append([c.ref, sub or "", sentence])',
        f"            if len(items) >= {SECTION_ITEMS}:",
        "                break",
        "paths = sorted({h.name for h in [*chunks, *inside_named]})",
        "plan = {",
        '    "step": "section",',
        '    "class": "general",',
        '    "paths": paths,',
        '    "named": [row(h) for h in inside_named],',
        '    "chunks": [row(h) for h in chunks],',
        '    "heading": heading,',
        '    "where": where,',
        '    "pages": pages[:1] + pages[-1:],',
        '    "items": items,',
        "}",
        'print(plan_line(plan, ["chunks", "named", "items"]))',
        "for ref, sub, sentence in items:",
        "    print(ref, sub, sentence)",
    ]
    return "\n".join(lines) + "\n"


def section_answer(plan: dict[str, Any]) -> tuple[str, list[str]] | None:
    """The outline answer of a section step's plan, and the evidence labels it cites; None when the
    step found no section (or none of its items survived the plan line's cut)."""
    heading, where = plan.get("heading"), plan.get("where")
    items = [
        i
        for i in plan.get("items") or []
        if isinstance(i, list) and len(i) == 3 and all(isinstance(x, str) for x in i)
    ]
    if not (isinstance(heading, str) and isinstance(where, str) and items):
        return None
    pages = [p for p in plan.get("pages") or [] if isinstance(p, int)]
    span = (
        ""
        if not pages
        else f" (p. {pages[0]})"
        if pages[0] == pages[-1]
        else f" (pp. {pages[0]}–{pages[-1]})"
    )
    lines = [f"{heading}, in {where}{span}, by its own headings and opening sentences:"]
    # quoted, so each citation is the very sentence (`citations.locate_quote`), not the span's best window
    lines += [
        f'- {sub}: "{sentence}" [{ref}]' if sub else f'- "{sentence}" [{ref}]' for ref, sub, sentence in items
    ]
    return "\n".join(lines), [ref for ref, _sub, _sentence in items]
