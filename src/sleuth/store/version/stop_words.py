"""The words that searches and scores leave out, kept in one place: one base of function words and
the three lists built on it.

The lists differ on purpose. Each was measured against its own use, and changing one moves that
use's rankings, so they are not merged into one:

- `STOP_WORDS`, the widest: words that say what kind of question it is, not what it is about ("list",
  "number", "tell me"). The planner's content words, the document resolver, the second-stage
  rescoring and the heading detection leave them out.
- `SEARCH_STOP_WORDS`: the free terms of a BM25 query (`keyword.query_terms`). Only the function
  words and the words of a request ("give me", "please", "provide") are left out.
- `OVERLAP_STOP_WORDS`: the words that evidence overlap scores compare (`agent.evidence`). The list is
  small and fixed, so that overlap scores never change with the environment. `s` and `t` are what a
  `\\w+` split leaves of "it's" and "don't".
"""

from __future__ import annotations

_FUNCTION_TEXT = """
    a an and are as at be by did do does for from had has have how i in is it its of on or that the
    their there these this to was were what when where which who why will with
"""
_QUESTION_TEXT = """
    about above across after again against all also am any been before being below between both but
    can cannot could doing done down during each either else enumerate ever every few further get
    gets give given having he her here hers him his if into itself just know let list many may me
    mean means might more most much must my name named names need neither no nor not number off
    often once one only other our ours out over own per please same say says shall she should show
    so some such tell than theirs them then they those through too total under until up upon us very
    we whats whether while whom whose within without would yes yet you your yours
"""
_OVERLAP_TEXT = """
    about all also any been but can could each if into may might must no nor not only other our own
    s same shall should so some such t than them then they those too us very we whom whose would you
    your
"""

#: In every list: articles, auxiliaries, prepositions, pronouns and question words.
FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())
#: Words that say what kind of question it is, not what it is about.
STOP_WORDS = FUNCTION_WORDS | frozenset(_QUESTION_TEXT.split())
#: The free terms a BM25 query drops, unless nothing else is left (`keyword.query_terms`).
SEARCH_STOP_WORDS = FUNCTION_WORDS | frozenset({"give", "me", "please", "provide", "show", "tell"})
#: The words evidence overlap scores leave out (`agent.evidence.content_words`).
OVERLAP_STOP_WORDS = FUNCTION_WORDS | frozenset(_OVERLAP_TEXT.split())
