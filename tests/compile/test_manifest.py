from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from sleuth.compile.manifest import ManifestError, load_manifest, parse_manifest, snake_case
from sleuth.format.names import slugify


def problems(data: object) -> list[str]:
    with pytest.raises(ManifestError) as info:
        parse_manifest(data)
    return info.value.problems


def test_empty_manifest_takes_documented_defaults() -> None:
    m = parse_manifest({})
    chunks = m.curate.chunks
    assert chunks.enabled is True
    assert chunks.embedding_model == "default"
    assert chunks.chunking.strategy == "markdown_heading"
    assert (chunks.chunking.target_size, chunks.chunking.overlap) == (256, 0)
    assert chunks.chunking.vectors == "windows"
    assert chunks.chunking.respect_sections is True
    assert chunks.keyword.enabled is True
    arts = m.curate.artifacts
    assert arts.enabled is None and arts.is_enabled is False
    assert arts.artifact_model == "lite"
    assert (arts.min_doc_count, arts.max_tokens, arts.max_doc_chars) == (1, 1500, 60000)
    assert (arts.extraction_window_chars, arts.mention_max_chars) == (0, 400)
    assert (arts.max_mentions_per_artifact, arts.mention_context_chars) == (40, 8000)
    assert arts.max_artifacts_per_type == 10000
    assert m.optimize.schedule == "0 * * * *"
    assert m.optimize.latency_threshold_ms == 60000
    assert m.optimize.min_group_size == 2
    assert m.optimize.eval_pass_rate_threshold == 1
    assert m.optimize.max_iterations == 20
    assert m.search.instructions is None


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        (("curate", "chunks", "chunking", "target_size"), 63, "curate.chunks.chunking.target_size"),
        (("curate", "chunks", "chunking", "target_size"), 4097, "curate.chunks.chunking.target_size"),
        (("curate", "chunks", "chunking", "overlap"), 1025, "curate.chunks.chunking.overlap"),
        (("curate", "chunks", "chunking", "strategy"), "words", "curate.chunks.chunking.strategy"),
        (("curate", "artifacts", "min_doc_count"), 65, "curate.artifacts.min_doc_count"),
        (("curate", "artifacts", "max_tokens"), 127, "curate.artifacts.max_tokens"),
        (("curate", "artifacts", "max_doc_chars"), 999, "curate.artifacts.max_doc_chars"),
        (("curate", "artifacts", "mention_max_chars"), 4001, "curate.artifacts.mention_max_chars"),
        (("optimize", "latency_threshold_ms"), 600_001, "optimize.latency_threshold_ms"),
        (("optimize", "eval_pass_rate_threshold"), 1.5, "optimize.eval_pass_rate_threshold"),
        (("search", "instructions"), "x" * 16001, "search.instructions"),
    ],
)
def test_bounds_are_enforced_and_named(path: tuple[str, ...], value: object, fragment: str) -> None:
    data: dict[str, object] = {}
    node = data
    for key in path[:-1]:
        node = node.setdefault(key, {})  # type: ignore[assignment]
    node[path[-1]] = value
    found = problems(data)
    assert any(p.startswith(fragment) for p in found), found


def test_unknown_field_is_rejected_not_ignored() -> None:
    found = problems({"curate": {"chunks": {"chunkng": {}}}})
    assert any("curate.chunks.chunkng" in p for p in found)


def test_every_problem_is_reported_at_once() -> None:
    found = problems({"curate": {"chunks": {"chunking": {"target_size": 10, "overlap": -1}}}})
    assert len(found) == 2


def test_overlap_must_be_below_target() -> None:
    found = problems({"curate": {"chunks": {"chunking": {"target_size": 128, "overlap": 128}}}})
    assert any("overlap" in p and "< target_size" in p for p in found)


def test_no_index_at_all_is_rejected() -> None:
    found = problems({"curate": {"chunks": {"enabled": False, "keyword": {"enabled": False}}}})
    assert any("nothing to search" in p for p in found)


def test_unknown_embedding_model_lists_available() -> None:
    found = problems({"curate": {"chunks": {"embedding_model": "text-embedding-3-large"}}})
    assert any("available: default" in p for p in found)


def types(*entries: Mapping[str, object], edges: list[dict[str, object]] | None = None) -> dict[str, object]:
    return {"curate": {"artifacts": {"artifact_types": list(entries), "edge_types": edges or []}}}


def test_type_rules() -> None:
    cases: list[tuple[dict[str, object], str]] = [
        (types({"name": "Doc"}, {"name": "doc"}), "duplicates artifact_types[0]"),
        (types({"name": "_hidden"}), "must not start with '_'"),
        (types({"name": "SQLite Stat1"}), "names starting sqlite_ are SQLite's"),
        (types({"name": "Meeting Log"}, {"name": "meeting-log"}), "table name 'meeting_log' collides"),
        (types({"name": "D", "kind": "doc", "scope": "corpus"}), "allows scope document"),
        (types({"name": "G", "kind": "glossary"}), "needs at least one section"),
        (
            types({"name": "S", "kind": "summary", "format": "sqlite", "columns": [{"name": "a"}]}),
            "allows format markdown",
        ),
        (types({"name": "T", "format": "sqlite"}), "at least one column"),
        (types({"name": "T", "columns": [{"name": "a"}]}), "only allowed with format 'sqlite'"),
        (types({"name": "T", "natural_key": ["a"]}), "only allowed with format 'sqlite'"),
        (
            types({"name": "T", "format": "sqlite", "columns": [{"name": "a"}], "natural_key": ["b"]}),
            "'b' is not a declared column",
        ),
        (types({"name": "T", "sections": ["Glossary"]}), "only allowed with kind 'glossary'"),
        (
            types({"name": "Party", "kind": "entity"}, edges=[{"name": "e", "from": "Party", "to": "Nope"}]),
            "'Nope' is not a declared artifact type",
        ),
        (
            types(
                {"name": "R", "kind": "entity", "format": "sqlite", "columns": [{"name": "a"}]},
                {"name": "D", "kind": "doc"},
                edges=[{"name": "e", "from": "D", "to": "R"}],
            ),
            "edges join markdown types only",
        ),
        (types({"name": "x" * 65}), "artifact_types[0].name"),
        (types(*({"name": f"T{i}", "kind": "doc"} for i in range(33))), "curate.artifacts.artifact_types"),
    ]
    for data, fragment in cases:
        found = problems(data)
        assert any(fragment in p for p in found), (fragment, found)


def test_scope_defaults_follow_the_kind() -> None:
    m = parse_manifest(
        types(
            {"name": "D", "kind": "doc"},
            {"name": "G", "kind": "glossary", "sections": ["Glossary"]},
            {"name": "E", "kind": "entity"},
        )
    )
    scopes = [t.resolved_scope for t in m.curate.artifacts.artifact_types]
    assert scopes == ["document", "corpus", "corpus"]
    assert m.curate.artifacts.is_enabled  # absent + types declared = on


def test_explicit_false_turns_artifacts_off() -> None:
    m = parse_manifest(
        {"curate": {"artifacts": {"enabled": False, "artifact_types": [{"name": "D", "kind": "doc"}]}}}
    )
    assert m.curate.artifacts.is_enabled is False


def test_edge_from_is_read_from_the_json_name() -> None:
    m = parse_manifest(
        types(
            {"name": "D", "kind": "doc"},
            edges=[{"name": "cites", "from": "D", "to": "D", "attributes": ["role"]}],
        )
    )
    assert m.curate.artifacts.edge_types[0].from_ == "D"
    dumped = m.model_dump(by_alias=True)
    assert dumped["curate"]["artifacts"]["edge_types"][0]["from"] == "D"


def test_non_object_and_bad_json_files(tmp_path: Path) -> None:
    assert problems([]) == ["(root): must be a JSON object, not list"]
    bad = tmp_path / "m.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ManifestError, match="not valid JSON"):
        load_manifest(bad)
    good = tmp_path / "ok.json"
    good.write_text(json.dumps({"search": {"instructions": "Be brief."}}), encoding="utf-8")
    assert load_manifest(good).search.instructions == "Be brief."


def test_name_normalization() -> None:
    assert snake_case("Meeting Attendance") == "meeting_attendance"
    assert snake_case("Price (USD)") == "price_usd"
    assert snake_case("launchYear") == "launch_year"
    assert snake_case("2024 Figures") == "t_2024_figures"
    assert slugify("Acme Corporation, Inc.") == "acme-corporation-inc"
    assert len(slugify("x" * 200)) == 80
