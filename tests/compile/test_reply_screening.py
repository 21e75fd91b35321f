"""Hostile model replies in curation (issue 22, item 9): a reply of 20 MB, one nested 200,000 deep and
one holding a lone surrogate are each screened before they are parsed or cached, counted with their
reason, and the curate goes on with every other source. The model is the scripted curator, with the
calls about one source answered by an attacker."""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

import pytest

from sleuth.compile.extraction.cache import MAX_ENTRY_BYTES, ExtractionCache
from sleuth.compile.extraction.client import MAX_REPLY_BYTES, MAX_REPLY_DEPTH, ReplyRefused, screen_reply
from sleuth.compile.extraction.extractor import ModelExtractor
from sleuth.compile.manifest import parse_manifest
from sleuth.compile.pipeline import CompileReport, compile_context
from sleuth.format.front_matter import read_front_matter
from sleuth.models.base import CompletionParams, Message, Reply, TokenUsage, ToolSpec
from sleuth.settings import current
from sleuth.store.contexts.home import ContextDir, Home
from tests.compile.curator import CuratorModel, write_corpus

HOSTILE_SOURCE = "acme-msa.md"
#: 20 MB of body, as the issue's model answered (built once: the test stays cheap).
HUGE = '{"name": "About it", "body": "' + "a" * 20_000_000 + '", "quotes": []}'
#: Nested 200,000 deep: `json.loads` would raise `RecursionError`.
DEEP = '{"name": "Deep", "body": ' + "[" * 200_000 + "]" * 200_000 + "}"
#: Valid JSON whose body decodes to a lone surrogate, with a real quote: it would otherwise be kept.
SURROGATE = (
    '{"name": "About acme", "body": "Acme \\ud800 pumps", '
    '"quotes": ["Acme Corp is a supplier of industrial pumps."]}'
)
#: The same with the surrogate itself in the text (a provider's decoder let it through).
RAW_SURROGATE = SURROGATE.replace("\\ud800", "\ud800")
ALL_TYPES = ("Agreement", "Company", "Payment")
#: The peak memory a curate over these replies may add (generous: the bodies themselves are 20 MB and
#: a copy of each may be alive at once; before the screen it grew by gigabytes).
RSS_GROWTH_BOUND = 600 * 1024 * 1024


class HostileCurator(CuratorModel):
    """The careful curator, except every call about `HOSTILE_SOURCE` gets `text`; records the size of
    every message a call was sent, so the repair's echo can be checked."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.sent_chars: list[int] = []

    def complete(self, messages: list[Message], tools: list[ToolSpec], params: CompletionParams) -> Reply:
        user = messages[1].content
        if f"Document: uploads/corpus/{HOSTILE_SOURCE}" not in user:
            return super().complete(messages, tools, params)
        with self._lock:
            self.calls.append((messages[0].content, user))
            self.sent_chars.append(sum(len(m.content) for m in messages))
        usage = TokenUsage(input_tokens=100, output_tokens=100)
        return Reply(text=self.text, usage=usage, model=self.config.id, finish_reason="stop")


def _curate(tmp_path: Path, model: CuratorModel) -> tuple[ContextDir, CompileReport]:
    home = Home(tmp_path / "home")
    folder = write_corpus(tmp_path)
    ctx, _ = home.find_or_create("deals")
    manifest = parse_manifest(json.loads((tmp_path / "manifest.json").read_text()))
    settings = current()  # read once, as `sleuth compile` does at its start
    extractor = ModelExtractor(model, manifest, ExtractionCache(ctx.extraction_cache), settings=settings)
    return ctx, compile_context(
        "deals", [folder], tmp_path / "manifest.json", home=home, extractor=extractor, settings=settings
    )


def _artifact_files(ctx: ContextDir) -> list[Path]:
    return sorted((ctx.version_dir(ctx.live_version() or "") / "knowledge" / "artifacts").rglob("*.md"))


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


@pytest.mark.parametrize(
    ("text", "reason", "screened"),
    [
        (HUGE, f"over {MAX_REPLY_BYTES} bytes", ALL_TYPES),
        (DEEP, f"nested over {MAX_REPLY_DEPTH} deep", ALL_TYPES),
        # Only a summary has a body to decode: for the map and the rows the reply is a valid empty one.
        (SURROGATE, "not valid Unicode (a lone surrogate)", ("Agreement",)),
        (RAW_SURROGATE, "not valid Unicode (a lone surrogate)", ALL_TYPES),
    ],
    ids=["20MB", "deep", "surrogate", "raw-surrogate"],
)
def test_hostile_replies_are_screened_and_the_curate_goes_on(
    tmp_path: Path, text: str, reason: str, screened: tuple[str, ...]
) -> None:
    model = HostileCurator(text)
    before = _peak_rss_bytes()
    began = time.process_time()
    ctx, report = _curate(tmp_path, model)
    cpu = time.process_time() - began
    assert report.flipped, report.warnings  # the curate ended ok
    extraction = report.counts["extraction"]
    types = extraction["types"]
    # Every type's calls about the hostile source were refused twice (the reply, then the repair's),
    # each counted with its reason, and the item counted as errored.
    for name in screened:
        assert types[name]["reply_reasons"] == {reason: 2}, (name, types[name])
        assert types[name]["replies_screened"] == 2 and types[name]["errored"] >= 1
    assert extraction["replies_screened"] == 2 * len(screened)
    assert len(model.sent_chars) == len(ALL_TYPES) + len(screened)
    # The repair echoes only the head of a refused reply, never the reply itself.
    assert max(model.sent_chars) < 20_000
    # Every other source was built as usual.
    names = {read_front_matter(p.read_text("utf-8"))["name"] for p in _artifact_files(ctx)}
    assert "About globex-memo.md" in names and "About acme-msa.md" not in names
    # The cache holds no refused reply: it stays small.
    cache_bytes = sum(p.stat().st_size for p in ctx.extraction_cache.rglob("*") if p.is_file())
    assert cache_bytes < 100_000, cache_bytes
    assert not list(ctx.extraction_cache.glob(".tmp-*"))
    growth = _peak_rss_bytes() - before
    assert growth < RSS_GROWTH_BOUND, growth
    print(f"\n{reason}: cpu {cpu:.2f} s, peak RSS growth {growth / 2**20:.0f} MiB, cache {cache_bytes} B")


def test_the_screen_counts_brackets_outside_strings_only() -> None:
    inside = json.dumps({"body": "[" * 1000 + "{" * 1000, "quotes": []})
    screen_reply(inside)  # brackets in a string are text, not nesting
    screen_reply("[" * MAX_REPLY_DEPTH + "]" * MAX_REPLY_DEPTH)
    with pytest.raises(ReplyRefused, match="nested"):
        screen_reply("[" * (MAX_REPLY_DEPTH + 1))
    with pytest.raises(ReplyRefused, match="bytes"):
        screen_reply('{"body": "' + "é" * (MAX_REPLY_BYTES // 2 + 1) + '"}')  # under the cap in characters
    with pytest.raises(ReplyRefused, match="surrogate"):
        screen_reply('{"body": "\ud800"}')


def test_the_cache_refuses_oversize_entries_and_survives_surrogates(tmp_path: Path) -> None:
    cache = ExtractionCache(tmp_path / "cache")
    assert not cache.put("big", {"body": "x" * MAX_ENTRY_BYTES})
    assert not list((tmp_path / "cache").glob("*"))
    assert cache.put("odd", {"body": "a\ud800b"})  # escaped, not a crash
    assert cache.get("odd") == {"body": "a\ud800b"}
    (tmp_path / "cache" / "old.json").write_text(json.dumps({"reply": {"body": "y" * (2 * MAX_ENTRY_BYTES)}}))
    assert cache.get("old") is None  # an entry an older run left over the cap is a miss, not read
