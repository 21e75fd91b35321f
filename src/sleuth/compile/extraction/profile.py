"""What a curate with a model will cost, before anything is spent (issue 13, item 6).

For every type a model builds, the profile counts the calls the extractor will make and the input
tokens of each, from the very prompts and text windows the extractor would send (⌈characters / 4⌉),
and takes off the calls the extraction cache already answers. What cannot be known in advance is given
as a low/high band:
- output tokens per call: from the last run of this context when it made calls of the type, else
  100 to the manifest's `max_tokens`;
- reduce calls of a corpus type (one per subject found): from the subjects per source of the last run,
  else a quarter of the sources to twelve per source (capped by `max_artifacts_per_type`);
- time: the last run's seconds per call of the type when known; else input at the prefill rate plus
  output at the generation rate, over the calls in flight at once, with the rates measured for a local
  1.5B model on this kind of machine (spec/local-llm.md: 50 and 18 tokens/s, one call at a time) for a
  loopback endpoint, and 2,000 and 60 tokens/s for a remote one.
Cost is given when the model's catalog entry has prices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlparse

from sleuth.compile import version_files
from sleuth.compile.extraction import prompts
from sleuth.compile.extraction.cache import ExtractionCache, cache_key
from sleuth.compile.extraction.extractor import SUMMARY_GROUP
from sleuth.compile.extraction.inputs import (
    call_key_parts,
    fingerprint_of,
    per_source_system,
    step_of,
    windows,
)
from sleuth.compile.manifest import DETERMINISTIC_KINDS, Manifest
from sleuth.compile.pages import Page, ParseError
from sleuth.compile.parse import parse_source
from sleuth.compile.sources import list_source_files
from sleuth.models.base import ModelConfig
from sleuth.settings import DEFAULTS
from sleuth.store.contexts.home import ContextDir
from sleuth.store.contexts.ledger import Ledger

LOCAL_RATES = (50.0, 18.0)  # prefill, generation tokens/s (spec/local-llm.md §5)
REMOTE_RATES = (2000.0, 60.0)
OUTPUT_LOW = 100


def _tokens(chars: int) -> int:
    return math.ceil(chars / 4)


@dataclass
class Band:
    low: float = 0.0
    high: float = 0.0

    def add(self, low: float, high: float) -> None:
        self.low += low
        self.high += high


@dataclass
class TypeProfile:
    type: str
    scope: str  # document | corpus | sqlite | queries
    calls: Band = field(default_factory=Band)
    cached_calls: int = 0
    input_tokens: Band = field(default_factory=Band)
    output_tokens: Band = field(default_factory=Band)
    seconds: Band = field(default_factory=Band)
    cost_usd: Band | None = None


@dataclass
class Profile:
    model: str
    sources: int
    types: list[TypeProfile]
    total: TypeProfile
    assumptions: list[str]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _local(config: ModelConfig) -> bool:
    host = urlparse(config.base_url or "").hostname or ""
    return host in ("127.0.0.1", "localhost", "::1") or host.endswith(".local")


def profile_curate(
    manifest: Manifest,
    pages_by_source: Mapping[str, list[Page]],
    config: ModelConfig,
    cache: ExtractionCache | None,
    last_run: Mapping[str, Any] | None = None,
    *,
    concurrency: int = DEFAULTS.curate_concurrency,
) -> Profile:
    """The estimate for curating `pages_by_source` under `manifest` with the model `config`, a remote
    one taking `concurrency` calls at once (the process's `curate_concurrency`)."""
    arts = manifest.curate.artifacts
    fingerprint = fingerprint_of(config)
    last = dict(last_run or {}) if (last_run or {}).get("fingerprint") == fingerprint else {}
    last_types: dict[str, Any] = last.get("types", {})
    prefill, generation = LOCAL_RATES if _local(config) else REMOTE_RATES
    in_flight = 1 if _local(config) else concurrency
    assumptions = [
        f"input tokens are ⌈characters / 4⌉ of the prompts the extractor sends; {config.id} "
        f"{'is a loopback endpoint' if _local(config) else 'is remote'}: {prefill:g} tokens/s prefill, "
        f"{generation:g} tokens/s generation, {in_flight} call(s) at once",
    ]
    if last:
        assumptions.append("output per call and subjects per source are taken from the last run")
    profiles: list[TypeProfile] = []
    sources = sorted(pages_by_source)
    wanted = [t for t in arts.artifact_types if t.kind not in DETERMINISTIC_KINDS or t.format == "sqlite"]
    if not arts.is_enabled:
        wanted = []
    for art_type in wanted:
        seen = last_types.get(art_type.name, {})
        out_high = float(arts.max_tokens)
        out_low = float(OUTPUT_LOW)
        if seen.get("calls"):
            per_call = seen["output_tokens"] / seen["calls"]
            out_low, out_high = per_call * 0.7, per_call * 1.5
        scope = "sqlite" if art_type.format == "sqlite" else art_type.resolved_scope
        tp = TypeProfile(art_type.name, scope)
        step = step_of(art_type)
        system = per_source_system(step, art_type, manifest)
        for source in sources:
            pages = pages_by_source[source]
            texts, _cut = windows(pages, arts.max_doc_chars, arts.extraction_window_chars)
            base = call_key_parts(fingerprint, art_type, manifest, source, pages)
            for index, text in enumerate(texts):
                if (
                    cache is not None
                    and (cache.directory / f"{cache_key(step, *base, str(index))}.json").is_file()
                ):
                    tp.cached_calls += 1
                    continue
                tokens = _tokens(len(system) + len(prompts.source_text(source, text)))
                tp.calls.add(1, 1)
                tp.input_tokens.add(tokens, tokens)
                tp.output_tokens.add(out_low, out_high)
        if art_type.format != "sqlite" and art_type.resolved_scope == "corpus":
            if art_type.kind == "summary":
                reduces = math.ceil(len(sources) / SUMMARY_GROUP) if len(sources) > 1 else 0
                low = high = float(reduces)
                reduce_in = _tokens(min(len(sources), SUMMARY_GROUP) * arts.max_tokens * 4) // 2
            else:
                per_source = (seen.get("groups", 0) / max(1, len(sources))) if seen.get("calls") else None
                if per_source is not None:
                    low = high = per_source * len(sources)
                    low, high = low * 0.7, high * 1.3
                else:
                    low, high = max(1.0, len(sources) / 4), 12.0 * len(sources)
                high = min(high, float(arts.max_artifacts_per_type))
                low = min(low, high)
                reduce_in = _tokens(arts.mention_context_chars) // 2 + _tokens(
                    len(prompts.reduce_system(art_type, arts.max_tokens))
                )
            tp.calls.add(low, high)
            tp.input_tokens.add(low * reduce_in, high * reduce_in)
            tp.output_tokens.add(low * out_low, high * out_high)
        _timing(tp, prefill, generation, in_flight, config)
        if seen.get("calls") and seen.get("seconds"):  # the last run's own pace
            per_call = seen["seconds"] / seen["calls"] / in_flight
            tp.seconds = Band(tp.calls.low * per_call * 0.7, tp.calls.high * per_call * 1.3)
        profiles.append(tp)
    if wanted:
        queries = TypeProfile("_sample_queries", "queries")
        queries.calls.add(1, 1)
        queries.input_tokens.add(400, 1200)
        queries.output_tokens.add(60, 300)
        _timing(queries, prefill, generation, in_flight, config)
        profiles.append(queries)
    total = TypeProfile("total", "all")
    for tp in profiles:
        total.calls.add(tp.calls.low, tp.calls.high)
        total.cached_calls += tp.cached_calls
        total.input_tokens.add(tp.input_tokens.low, tp.input_tokens.high)
        total.output_tokens.add(tp.output_tokens.low, tp.output_tokens.high)
        total.seconds.add(tp.seconds.low, tp.seconds.high)
        if tp.cost_usd is not None:
            total.cost_usd = total.cost_usd or Band()
            total.cost_usd.add(tp.cost_usd.low, tp.cost_usd.high)
    for tp in [*profiles, total]:
        for band in (tp.calls, tp.input_tokens, tp.output_tokens):
            band.low, band.high = round(band.low), round(band.high)
        tp.seconds.low, tp.seconds.high = round(tp.seconds.low, 1), round(tp.seconds.high, 1)
    return Profile(config.id, len(sources), profiles, total, assumptions)


def _timing(tp: TypeProfile, prefill: float, generation: float, in_flight: int, config: ModelConfig) -> None:
    tp.seconds.add(
        (tp.input_tokens.low / prefill + tp.output_tokens.low / generation) / in_flight,
        (tp.input_tokens.high / prefill + tp.output_tokens.high / generation) / in_flight,
    )
    if config.price_input_per_token is not None and config.price_output_per_token is not None:
        tp.cost_usd = Band(
            tp.input_tokens.low * config.price_input_per_token
            + tp.output_tokens.low * config.price_output_per_token,
            tp.input_tokens.high * config.price_input_per_token
            + tp.output_tokens.high * config.price_output_per_token,
        )


def current_pages(ctx: ContextDir, *, max_text_bytes: int = DEFAULTS.max_text_bytes) -> dict[str, list[Page]]:
    """The pages a curate would read now: the live version's for sources unchanged since it was
    built (same size and mtime as the ledger says), a fresh parse for the rest (no model, no index;
    `max_text_bytes` is the process's setting)."""
    ledger = Ledger.load(ctx.ledger_file)
    live = ctx.live_version()
    knowledge = ctx.version_dir(live) / "knowledge" if live else None
    out: dict[str, list[Page]] = {}
    for rel in list_source_files(ctx.sources):
        path = ctx.sources / rel
        known = ledger.manifest.get(rel)
        st = path.stat()
        stored = knowledge / version_files.pages_rel(rel) if knowledge is not None else None
        if (
            known
            and stored is not None
            and stored.is_file()
            and (known.size, known.mtime) == (st.st_size, st.st_mtime)
        ):
            out[rel] = version_files.load_pages(knowledge, rel)  # type: ignore[arg-type]
            continue
        try:
            out[rel] = parse_source(path, max_text_bytes=max_text_bytes).pages
        except ParseError:
            continue  # what a curate would skip or fail costs no model call
    return out
