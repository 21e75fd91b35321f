"""Corpus scope, group (spec/context.md §5.4): mentions of one subject from many sources become one group.

A subject's key is its name normalised: NFKC, case-folded, punctuation and leading articles removed,
spaces collapsed. An alias whose key equals another group's key merges the two groups. The canonical
name is the most frequent surface form, then the shortest, then the first alphabetically.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from sleuth.compile.extraction.schemas import Mention
from sleuth.format.spans import Provenance

_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+")


def subject_key(name: str) -> str:
    """`The ACME Corp.` → `acme corp`."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = " ".join(_PUNCT.sub(" ", text).split())
    return _ARTICLE.sub("", text)


@dataclass
class SourcedMention:
    source_path: str
    mention: Mention
    order: int  # position in the run's source order, for a stable, recent-first reduce
    spans: list[Provenance] = field(default_factory=list)  # where its quotes are (found by the map step)


@dataclass
class Group:
    key: str
    mentions: list[SourcedMention] = field(default_factory=list)

    @property
    def member_sources(self) -> list[str]:
        return sorted({m.source_path for m in self.mentions})

    @property
    def canonical_name(self) -> str:
        counts = Counter(m.mention.subject.strip() for m in self.mentions if m.mention.subject.strip())
        if not counts:
            return self.key
        return min(counts, key=lambda name: (-counts[name], len(name), name))

    @property
    def aliases(self) -> list[str]:
        names = {m.mention.subject.strip() for m in self.mentions}
        names.update(a.strip() for m in self.mentions for a in m.mention.aliases)
        return sorted(n for n in names if n and n != self.canonical_name)

    @property
    def membership_hash(self) -> str:
        """Changes when the group's members or what they say change: the group is then reduced again."""
        digest = hashlib.sha256()
        for m in sorted(self.mentions, key=lambda m: (m.source_path, m.mention.subject, m.mention.text)):
            digest.update(f"{m.source_path}\x1f{m.mention.model_dump_json()}\x1e".encode())
        return digest.hexdigest()


def group_mentions(mentions: list[SourcedMention]) -> list[Group]:
    """Groups by key, merged through aliases (union-find), largest first, then by key."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    keyed = [(subject_key(m.mention.subject), m) for m in mentions]
    keys = {k for k, _ in keyed if k}
    for key, m in keyed:
        if not key:
            continue
        find(key)
        for alias in m.mention.aliases:
            other = subject_key(alias)
            if other and other in keys and other != key:
                a, b = find(key), find(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[str, Group] = {}
    for key, m in keyed:
        if key:
            root = find(key)
            groups.setdefault(root, Group(root)).mentions.append(m)
    return sorted(groups.values(), key=lambda g: (-len(g.member_sources), -len(g.mentions), g.key))
