"""`ModelExtractor`: the model-built kinds of spec/context.md §5.4, evidence first.

- Document scope: one call per source (or per window of it, merged) → one artifact per source.
- Corpus scope: map every source (mentions and the edges it states), group the mentions by subject
  key and aliases, keep the groups with enough sources, and reduce each into one artifact. Where the
  sources give a field different values, a "Conflicts" section quotes each side (added by Sleuth when
  the model did not write one, so a disagreement is never lost in a fluent summary).
- A corpus `summary` is reduced from the per-source summaries, twenty at a time.
- Rows found in prose for `format: sqlite` types, coerced to the column types (`prose_rows`).
- Typed edges, resolved once every artifact exists.

Every artifact, mention, row and edge must carry a quote located on a page (quotes.py); what has none
is screened, and so is an entity whose name none of its quotes holds (a made-up name over real
quotes). Calls run in parallel, at most `SLEUTH_CURATE_CONCURRENCY` per provider endpoint; how they
are made, counted and recorded is `calls.ExtractionCalls`'.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from sleuth.compile.artifacts import Artifact
from sleuth.compile.extraction import prompts
from sleuth.compile.extraction.cache import cache_key
from sleuth.compile.extraction.calls import transient
from sleuth.compile.extraction.client import BudgetExhausted, TypeUsage
from sleuth.compile.extraction.edges import edges_of, resolve_claims
from sleuth.compile.extraction.fields import conflicts, fields_for
from sleuth.compile.extraction.grouping import Group, SourcedMention, group_mentions
from sleuth.compile.extraction.inputs import type_hash
from sleuth.compile.extraction.outcomes import SourceError, TypeStats
from sleuth.compile.extraction.prose_rows import ProseRowExtraction
from sleuth.compile.extraction.quotes import QuoteLocator
from sleuth.compile.extraction.schemas import (
    DocumentReply,
    EdgeClaim,
    MapReply,
    Mention,
    QueriesReply,
    ReduceReply,
)
from sleuth.compile.extraction.values import date_in, text_in
from sleuth.compile.manifest import DETERMINISTIC_KINDS, ArtifactType
from sleuth.compile.pages import Page
from sleuth.compile.report import Progress
from sleuth.format.spans import Provenance
from sleuth.models.base import ModelError

MAX_PROVENANCE = 40  # spans kept per artifact
SUMMARY_GROUP = 20  # per-source summaries reduced at once into a corpus summary
_CONFLICTS_HEADING = re.compile(r"^#+\s*conflicts?\b", re.IGNORECASE | re.MULTILINE)


class ModelExtractor(ProseRowExtraction):
    """The `Extractor` that calls a model. One per compile run."""

    # ------------------------------------------------------------------------------ the protocol
    def available(self) -> bool:
        return True

    def watch(self, progress: Progress) -> None:
        self._progress = progress

    @property
    def budget_exhausted(self) -> bool:
        return self.client.budget_exhausted

    @property
    def complete(self) -> bool:
        """No budget stop and no transient failure: a permanent error (a 4xx) is reported and counted
        as errored, but rerunning would only repeat it, so it does not make the run incomplete."""
        return not self.client.budget_exhausted and not any(e.transient for e in self.errors)

    def report(self) -> dict[str, Any]:
        """Per type: usage and what was built, for the compile report, the version and the ledger."""
        names = sorted(set(self.client.usage) | set(self.stats))
        out: dict[str, Any] = {}
        for name in names:
            usage = self.client.usage.get(name, TypeUsage())
            stats = self.stats.get(name, TypeStats())
            out[name] = {**usage.to_json(), **stats.to_json()}
        return {
            "model": self.name,
            "types": out,
            "calls": sum(u.calls for u in self.client.usage.values()),
            "cached": sum(u.cached for u in self.client.usage.values()),
            "input_tokens": sum(u.input_tokens for u in self.client.usage.values()),
            "output_tokens": sum(u.output_tokens for u in self.client.usage.values()),
            "budget": self.client.token_budget,
            "budget_exhausted": self.client.budget_exhausted,
            "replies_screened": sum(u.replies_screened for u in self.client.usage.values()),
            "errors": [asdict(e) for e in self.errors],
            "scopes": {name: self._scope_of(name) for name in names},
            "sources_truncated": sorted(self._truncated),
            "groups": list(self._groups),
            "pointers": {source: list(p) for source, p in sorted(self._pointers.items())},
            "fingerprint": self.fingerprint,
        }

    def _scope_of(self, name: str) -> str:
        """`document`, `corpus` or `sqlite` for a type; `edge` and `queries` for the rest."""
        if name.startswith("edge:"):
            return "edge"
        art_type = self.manifest.type_named(name)
        if art_type is None:
            return "queries"
        return "sqlite" if art_type.format == "sqlite" else art_type.resolved_scope

    def document_scope(
        self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]]
    ) -> list[Artifact]:
        """One artifact per source."""
        stats = self._stats(art_type.name)
        results = self._each(
            art_type, sorted(pages_by_source), lambda s: self._document(art_type, s, pages_by_source[s])
        )
        out = [a for a in results if a is not None]
        stats.count("built", len(out))
        return self._drop_duplicates(out, stats)

    def corpus_scope(
        self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]], mtimes: dict[str, float]
    ) -> list[Artifact]:
        """Map → group → reduce; for `summary`, per-source summaries reduced into one."""
        if art_type.kind == "summary":
            return self._corpus_summary(art_type, pages_by_source)
        stats = self._stats(art_type.name)
        order = sorted(pages_by_source, key=lambda s: (-mtimes.get(s, 0.0), s))  # most recent first
        mapped = self._each(art_type, order, lambda s: self._map(art_type, s, pages_by_source[s]))
        mentions: list[SourcedMention] = []
        for index, (source, found) in enumerate(zip(order, mapped, strict=True)):
            found_mentions, claims = found or ([], [])
            mentions.extend(SourcedMention(source, m, index, spans) for m, spans in found_mentions)
            self._claims.extend((source, claim) for claim in claims)  # in source order: deterministic
        stats.count("mentions", len(mentions))
        groups = group_mentions(mentions)
        floor = art_type.min_doc_count or self.config.min_doc_count
        kept = [g for g in groups if len(g.member_sources) >= floor]
        if len(groups) > len(kept):
            stats.screen("below min_doc_count", len(groups) - len(kept))
        if len(kept) > self.config.max_artifacts_per_type:
            stats.screen("over max_artifacts_per_type", len(kept) - self.config.max_artifacts_per_type)
            kept = kept[: self.config.max_artifacts_per_type]
        stats.count("groups", len(kept))
        self._groups.extend(
            {
                "type": art_type.name,
                "group_key": g.key,
                "canonical_name": g.canonical_name,
                "member_sources": g.member_sources,
                "membership_hash": g.membership_hash,
            }
            for g in kept
        )
        for g in kept:
            for seq, m in enumerate(g.mentions):
                self._pointers.setdefault(m.source_path, []).append(
                    {
                        "type": art_type.name,
                        "name": g.canonical_name,
                        "mention": m.mention.text[:200],
                        "seq": seq,
                    }
                )
        reduced = self._each(
            art_type,
            [f"subject {g.key!r}" for g in kept],
            None,
            items=kept,
            work=lambda g: self._reduce(art_type, g),
        )
        out = [a for a in reduced if a is not None]
        stats.count("built", len(out))
        return self._drop_duplicates(out, stats)

    def resolve_edges(self, artifacts: list[Artifact], pages_by_source: dict[str, list[Page]]) -> int:
        """Attach the edges the maps found whose two ends are artifacts; returns how many were made."""
        return resolve_claims(self.manifest, self._claims, artifacts, pages_by_source, self._stats)

    def sample_queries(self, artifacts: list[Artifact], count: int = 6) -> list[str]:
        """Questions written by the model from the artifacts (§5.5); empty when it gave none."""
        listed = sorted(artifacts, key=lambda a: (a.kind in DETERMINISTIC_KINDS, -a.mentions, a.name))[:60]
        if not listed:
            return []
        lines = "\n".join(f"- {a.type} ({a.kind}): {a.name}" for a in listed)
        key = cache_key("queries", prompts.PROMPT_VERSION, self.fingerprint, lines)
        try:
            reply = self._ask(
                QueriesReply,
                prompts.queries_system(count),
                f"Artifacts:\n{lines}",
                "_sample_queries",
                key,
                600,
            )
        except BudgetExhausted:
            return []
        except ModelError as exc:
            self.client.count_error("_sample_queries")
            self.errors.append(SourceError("(artifacts)", "_sample_queries", str(exc)[:500], transient(exc)))
            return []
        seen: list[str] = []
        for query in reply.queries if reply else []:
            text = " ".join(query.split())
            if text and text not in seen:
                seen.append(text)
        return seen[:count]

    # ------------------------------------------------------------------------------ the calls
    def _document(self, art_type: ArtifactType, source: str, pages: list[Page]) -> Artifact | None:
        stats = self._stats(art_type.name)
        texts, system, base = self._inputs("document", art_type, source, pages)
        replies: list[DocumentReply] = []
        for index, text in enumerate(texts):
            key = cache_key("document", *base, str(index))
            reply = self._ask(DocumentReply, system, prompts.source_text(source, text), art_type.name, key)
            if reply is not None:
                replies.append(reply)
        if not replies:
            return None
        name = next((r.name.strip() for r in replies if r.name.strip()), "")
        body = "\n\n".join(r.body.strip() for r in replies if r.body.strip())
        fields: dict[str, Any] = {}
        for reply in replies:
            for k, v in fields_for(art_type.kind, reply.fields).items():
                fields.setdefault(k, v)
        provenance = self._locate(stats, QuoteLocator(source, pages), [q for r in replies for q in r.quotes])
        if not name or not body:
            stats.screen("empty name or body")
            return None
        if prompts.is_placeholder(name) or prompts.is_placeholder(body):
            stats.screen("placeholder copied from the prompt")
            return None
        if not provenance:
            stats.screen("no verifiable quote")
            return None
        return Artifact(
            name=name,
            type=art_type.name,
            kind=art_type.kind,
            scope="document",
            body=body + "\n",
            sources=[source],
            provenance=provenance[:MAX_PROVENANCE],
            fields=fields,
            model=self.name,
        )

    def _map(
        self, art_type: ArtifactType, source: str, pages: list[Page]
    ) -> tuple[list[tuple[Mention, list[Provenance]]], list[EdgeClaim]]:
        """The mentions kept, each with the spans its quotes were found at, and the edges claimed."""
        stats = self._stats(art_type.name)
        edges = edges_of(art_type, self.manifest)
        texts, system, base = self._inputs("map", art_type, source, pages)
        locator = QuoteLocator(source, pages)
        kept: list[tuple[Mention, list[Provenance]]] = []
        claims: list[EdgeClaim] = []
        for index, text in enumerate(texts):
            key = cache_key("map", *base, str(index))
            reply = self._ask(MapReply, system, prompts.source_text(source, text), art_type.name, key)
            if reply is None:
                continue
            for mention in reply.mentions:
                located = self._locate(stats, locator, mention.quotes)
                if not mention.subject.strip():
                    stats.screen("empty name")
                    continue
                if prompts.is_placeholder(mention.subject):
                    stats.screen("placeholder copied from the prompt")
                    continue
                if not located:
                    stats.screen("no verifiable quote")
                    continue
                text_cut = mention.text.strip()[: self.config.mention_max_chars]
                fields = dict(mention.fields)
                date = fields.get("date")
                if date and not any(date_in(str(date), p.quote) for p in located):
                    # A made-up date beside a real quote would look verified: the field goes.
                    stats.count("values_rejected", 1)
                    fields = {k: v for k, v in fields.items() if k not in ("date", "date_precision")}
                quoted = mention.model_copy(
                    update={"quotes": [p.quote for p in located], "text": text_cut, "fields": fields}
                )
                kept.append((quoted, located))
            with_edges = {e.name.casefold() for e in edges}
            claims.extend(c for c in reply.edges if c.type.casefold() in with_edges)
        return kept, claims

    def _reduce(self, art_type: ArtifactType, group: Group) -> Artifact | None:
        stats = self._stats(art_type.name)
        chosen = sorted(group.mentions, key=lambda m: m.order)[: self.config.max_mentions_per_artifact]
        lines: list[str] = []
        used = 0
        for m in chosen:
            quote = m.mention.quotes[0] if m.mention.quotes else ""
            line = f'- [{m.source_path}] {m.mention.text or quote}\n  quote: "{quote}"'
            if used + len(line) > self.config.mention_context_chars and lines:
                break
            lines.append(line)
            used += len(line)
        quotes = [q for m in chosen for q in m.mention.quotes]
        if art_type.kind == "entity" and not any(_named_in(n, quotes) for n in _names_of(group)):
            # Real quotes about no one: a name none of them holds is made up, and is not reduced.
            stats.screen("name not in its quotes")
            return None
        aliases = ", ".join(group.aliases) or "(none)"
        said = "\n".join(lines)
        user = f"Subject: {group.canonical_name}\nAliases: {aliases}\n\nWhat the sources say:\n{said}"
        key = cache_key(
            "reduce", prompts.PROMPT_VERSION, self.fingerprint, type_hash(art_type, self.manifest), user
        )
        reply = self._ask(
            ReduceReply, prompts.reduce_system(art_type, self.config.max_tokens), user, art_type.name, key
        )
        if reply is None:
            return None
        # The spans the map step found the mentions' quotes at: nothing is located twice.
        provenance = list({at.key: at for m in chosen for at in m.spans}.values())
        body = reply.body.strip()
        if not body:
            stats.screen("empty name or body")
            return None
        if prompts.is_placeholder(body):
            stats.screen("placeholder copied from the prompt")
            return None
        if not provenance:
            stats.screen("no verifiable quote")
            return None
        disagreements = conflicts(art_type.kind, chosen)
        if disagreements and not _CONFLICTS_HEADING.search(body):
            body += "\n\n## Conflicts\n\n" + disagreements
        fields: dict[str, Any] = {}
        for m in chosen:
            for k, v in fields_for(art_type.kind, m.mention.fields).items():
                fields.setdefault(k, v)
        fields.update(fields_for(art_type.kind, reply.fields))
        name = reply.name.strip() or group.canonical_name
        if art_type.kind == "entity":  # the reducer's name only where a quote holds it
            name = next(n for n in (name, *_names_of(group)) if _named_in(n, quotes))
        if art_type.kind in ("entity", "topic"):
            title = name.casefold()
            known = sorted(set(fields.get("aliases", [])) | set(group.aliases))
            fields["aliases"] = [a for a in known if a.casefold() != title]
        return Artifact(
            name=name,
            type=art_type.name,
            kind=art_type.kind,
            scope="corpus",
            body=body + "\n",
            sources=group.member_sources,
            provenance=provenance[:MAX_PROVENANCE],
            fields=fields,
            group_key=group.key,
            mentions=len(group.mentions),
            model=self.name,
        )

    def _corpus_summary(
        self, art_type: ArtifactType, pages_by_source: dict[str, list[Page]]
    ) -> list[Artifact]:
        stats = self._stats(art_type.name)
        per_source = [
            a
            for a in self._each(
                art_type, sorted(pages_by_source), lambda s: self._document(art_type, s, pages_by_source[s])
            )
            if a is not None
        ]
        layer = per_source
        while len(layer) > 1:
            batches = [layer[i : i + SUMMARY_GROUP] for i in range(0, len(layer), SUMMARY_GROUP)]
            merged = [self._merge_summaries(art_type, batch) for batch in batches]
            layer = [a for a in merged if a is not None]
            if len(batches) == 1:
                break
        if not layer:
            return []
        top = dataclasses.replace(layer[0], scope="corpus", id="", group_key="_corpus")  # a corpus id
        stats.count("built", 1)
        return [top]

    def _merge_summaries(self, art_type: ArtifactType, parts: list[Artifact]) -> Artifact | None:
        if len(parts) == 1:
            return parts[0]
        user = "\n\n".join(f"[{', '.join(p.sources)}] {p.name}\n{p.body.strip()}" for p in parts)
        key = cache_key(
            "summary-reduce",
            prompts.PROMPT_VERSION,
            self.fingerprint,
            type_hash(art_type, self.manifest),
            user,
        )
        reply = self._ask(
            ReduceReply,
            prompts.reduce_system(art_type, self.config.max_tokens),
            f"Summaries:\n\n{user}",
            art_type.name,
            key,
        )
        if reply is None or not reply.body.strip():
            return None
        provenance = [p for part in parts for p in part.provenance][:MAX_PROVENANCE]
        return Artifact(
            name=reply.name.strip() or art_type.name,
            type=art_type.name,
            kind=art_type.kind,
            scope="corpus",
            body=reply.body.strip() + "\n",
            sources=sorted({s for p in parts for s in p.sources}),
            provenance=provenance,
            group_key="_corpus",
            model=self.name,
        )


def _named_in(name: str, quotes: Sequence[str]) -> bool:
    """Does `name` occur in one of `quotes` (NFKC, case, spacing, quotation marks and dashes folded)?
    An entity is a name the sources state: one built from real quotes that never say it is made up."""
    return any(text_in(name, quote) for quote in quotes)


def _names_of(group: Group) -> list[str]:
    """The names a group's mentions gave its subject: the canonical one first, then the others."""
    return [group.canonical_name, *group.aliases]
