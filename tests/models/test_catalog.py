"""The model catalog: config.toml parsing and validation, specs, tiers, defaults, the public view and
building adapters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.models.anthropic_messages import AnthropicModel
from sleuth.models.base import ModelConfig
from sleuth.models.catalog import (
    OFFLINE_ID,
    QUERY_DEFAULTS,
    Catalog,
    CatalogError,
    build_model,
    parse_spec,
)
from sleuth.models.keys import resolve_api_key
from sleuth.models.openai_chat import OpenAIChatModel

FULL = """
default = "anthropic/sonnet"

[models."local/qwen2.5-coder-1.5b"]
provider = "openai-compatible"
base_url = "http://127.0.0.1:8080/v1"
api_key = "unused"
model = "qwen2.5-coder-1.5b"
tool_protocol = "text"
prompt_profile = "small"
temperature = 0
seed = 1
context_window = 8192

[models."anthropic/sonnet"]
provider = "anthropic"
model = "claude-sonnet-test"
label = "Claude Sonnet"
price_input_per_token = 3e-6
price_output_per_token = 1.5e-5

[models."openai/gpt"]
provider = "openai"
model = "gpt-test"
api_key_env = "MY_OPENAI_KEY"

[tiers]
lite = "local/qwen2.5-coder-1.5b"
pro = "openai/gpt"
"""


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")
    return home


def test_nothing_configured_means_offline_everywhere(tmp_path: Path) -> None:
    catalog = Catalog.load(tmp_path / "empty-home", env={})
    assert catalog.default == OFFLINE_ID
    assert catalog.resolve(None).id == OFFLINE_ID
    for tier in ("lite", "standard", "pro"):
        assert catalog.resolve(tier).id == OFFLINE_ID
    public = catalog.public()
    assert public["default"] == OFFLINE_ID
    assert public["tiers"] == {"lite": OFFLINE_ID, "standard": OFFLINE_ID, "pro": OFFLINE_ID}
    assert public["models"] == [
        {
            "id": OFFLINE_ID,
            "label": "Sleuth offline planner (no model)",
            "provider": "offline",
            "available": True,
            "tool_protocol": "native",
            "context_window": 128_000,
        }
    ]
    assert public["query_defaults"] == QUERY_DEFAULTS
    assert public["query_defaults"]["max_steps"] == {"search": 8, "search_cc": 8, "search_rag": 2}


def test_full_config(tmp_path: Path) -> None:
    catalog = Catalog.load(write(tmp_path, FULL), env={"ANTHROPIC_API_KEY": "ak-123"})
    qwen = catalog.resolve("local/qwen2.5-coder-1.5b")
    assert qwen == ModelConfig(
        id="local/qwen2.5-coder-1.5b",
        provider="openai-compatible",
        model="qwen2.5-coder-1.5b",
        base_url="http://127.0.0.1:8080/v1",
        api_key="unused",
        tool_protocol="text",
        prompt_profile="small",
        context_window=8192,
        temperature=0.0,
        seed=1,
    )
    sonnet = catalog.resolve("anthropic/sonnet")
    assert (sonnet.tool_protocol, sonnet.context_window, sonnet.api_key_env) == (
        "native",
        128_000,
        "ANTHROPIC_API_KEY",
    )
    assert sonnet.price_output_per_token == pytest.approx(1.5e-5)
    assert catalog.resolve(None).id == "anthropic/sonnet"
    assert catalog.resolve("lite").id == "local/qwen2.5-coder-1.5b"
    assert catalog.resolve("standard").id == "anthropic/sonnet"  # unmapped tier → the default
    assert catalog.resolve("pro").id == "openai/gpt"

    public = catalog.public()
    assert public["default"] == "anthropic/sonnet"
    by_id = {m["id"]: m for m in public["models"]}
    assert list(by_id) == [OFFLINE_ID, "local/qwen2.5-coder-1.5b", "anthropic/sonnet", "openai/gpt"]
    assert by_id["anthropic/sonnet"]["label"] == "Claude Sonnet"
    assert by_id["anthropic/sonnet"]["available"] is True  # its key is in the environment
    assert by_id["openai/gpt"]["available"] is False  # MY_OPENAI_KEY is not
    assert by_id["local/qwen2.5-coder-1.5b"]["available"] is True  # needs no key
    assert set(by_id["openai/gpt"]) == {
        "id",
        "label",
        "provider",
        "available",
        "tool_protocol",
        "context_window",
    }  # no prices configured: no pricing
    assert by_id["anthropic/sonnet"]["pricing"] == {"input_per_token": 3e-6, "output_per_token": 1.5e-5}


def test_public_view_never_contains_keys(tmp_path: Path) -> None:
    text = FULL.replace('api_key = "unused"', 'api_key = "sk-very-secret-inline"')
    catalog = Catalog.load(write(tmp_path, text), env={"ANTHROPIC_API_KEY": "ak-env-secret"})
    dumped = json.dumps(catalog.public())
    assert "sk-very-secret-inline" not in dumped and "ak-env-secret" not in dumped
    assert "api_key" not in dumped


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[models."x"]\nprovider = "mystery"\nmodel = "m"\n', "unknown provider 'mystery'"),
        ('[models."x"]\nprovider = "openai-compatible"\nmodel = "m"\n', "requires base_url"),
        ('[models."x"]\nprovider = "openai"\nmodel = "m"\ncontext = 5\n', "unknown key(s) context"),
        ('[models."x"]\nprovider = "openai"\n', "model is required"),
        ('[models."x"]\nmodel = "m"\n', "provider is required"),
        ('[models."x"]\nprovider = "openai"\nmodel = "m"\ncontext_window = "big"\n', "must be an integer"),
        ('[models."x"]\nprovider = "openai"\nmodel = "m"\ntemperature = "hot"\n', "must be a number"),
        (
            '[models."x"]\nprovider = "openai"\nmodel = "m"\ntool_protocol = "xml"\n',
            "must be one of native, text",
        ),
        ('[models."x"]\nprovider = "openai"\nmodel = "m"\nbase_url = "ftp://h"\n', "http:// or https://"),
        ('[models."sleuth/offline"]\nprovider = "openai"\nmodel = "m"\n', "built in"),
        ('[models."pro"]\nprovider = "openai"\nmodel = "m"\n', "tier name"),
        ('[tiers]\nultra = "sleuth/offline"\n', "unknown tier(s) ultra"),
        ('[tiers]\npro = "nope"\n', "unknown model 'nope'"),
        ('default = "nope"\n', "unknown model 'nope'"),
        ("[server]\nport = 1\n", "unknown key(s) server"),
        ("[models.x\n", "not valid TOML"),
    ],
)
def test_invalid_config_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(CatalogError) as info:
        Catalog.load(write(tmp_path, text), env={})
    assert message in str(info.value)
    assert "config.toml" in str(info.value)


def test_default_without_explicit_default(tmp_path: Path) -> None:
    one = (
        '[models."a"]\nprovider = "openai"\nmodel = "m"\n[models."b"]\nprovider = "anthropic"\nmodel = "n"\n'
    )
    assert Catalog.load(write(tmp_path / "h1", one), env={}).default == "a"  # first configured model
    tiered = one + '[tiers]\nstandard = "b"\n'
    assert Catalog.load(write(tmp_path / "h2", tiered), env={}).default == "b"  # the standard tier


def test_specs() -> None:
    openai = parse_spec("openai:gpt-4.1")
    assert openai is not None
    assert (openai.id, openai.provider, openai.model, openai.base_url) == (
        "openai:gpt-4.1",
        "openai",
        "gpt-4.1",
        None,
    )
    assert (openai.tool_protocol, openai.context_window, openai.api_key_env) == (
        "native",
        128_000,
        "OPENAI_API_KEY",
    )

    claude = parse_spec("anthropic:claude-x")
    assert claude is not None and claude.api_key_env == "ANTHROPIC_API_KEY" and claude.provider == "anthropic"

    local = parse_spec("openai-compatible:qwen2.5-coder-1.5b@http://127.0.0.1:8080/v1")
    assert local is not None
    assert local.id == "openai-compatible:qwen2.5-coder-1.5b"
    assert (local.base_url, local.tool_protocol, local.context_window) == (
        "http://127.0.0.1:8080/v1",
        "text",
        8192,
    )
    assert local.prompt_profile == "small"  # an 8,192-token window: the short rules fit it
    assert claude.prompt_profile == "standard"
    assert resolve_api_key(local, {"OPENAI_API_KEY": "real-key"}) == "unused"  # never the OpenAI key

    assert parse_spec("local/qwen") is None  # an id, not a spec
    with pytest.raises(CatalogError, match="needs the server"):
        parse_spec("openai-compatible:qwen")
    with pytest.raises(CatalogError, match="names no model"):
        parse_spec("openai:")


def test_spec_adds_an_entry_and_http_callers_cannot_use_specs(tmp_path: Path) -> None:
    catalog = Catalog.load(tmp_path, env={})
    with pytest.raises(CatalogError) as info:
        catalog.resolve("openai-compatible:qwen@http://127.0.0.1:8080/v1", allow_specs=False)
    assert "available: sleuth/offline" in str(info.value)

    added = catalog.resolve("openai-compatible:qwen@http://127.0.0.1:8080/v1")
    assert added.id == "openai-compatible:qwen"
    assert catalog.resolve("openai-compatible:qwen", allow_specs=False) is added  # now a catalog id
    assert "openai-compatible:qwen" in [m["id"] for m in catalog.public()["models"]]
    # A request can never point an existing id at another URL.
    with pytest.raises(CatalogError):
        catalog.resolve("openai-compatible:qwen@http://evil.example/v1", allow_specs=False)


def test_unknown_name_lists_the_choices(tmp_path: Path) -> None:
    catalog = Catalog.load(write(tmp_path, FULL), env={})
    with pytest.raises(CatalogError) as info:
        catalog.resolve("gpt-9")
    assert "unknown model 'gpt-9'" in str(info.value)
    assert "anthropic/sonnet" in str(info.value) and "sleuth/offline" in str(info.value)


def test_sleuth_model_environment(tmp_path: Path) -> None:
    home = write(tmp_path, FULL)
    by_id = Catalog.load(home, env={"SLEUTH_MODEL": "openai/gpt"})
    assert by_id.default == "openai/gpt" and by_id.resolve(None).id == "openai/gpt"

    by_spec = Catalog.load(home, env={"SLEUTH_MODEL": "openai-compatible:tiny@http://127.0.0.1:9999/v1"})
    assert by_spec.default == "openai-compatible:tiny"
    assert by_spec.public()["default"] == "openai-compatible:tiny"
    assert by_spec.resolve("standard").id == "openai-compatible:tiny"  # the default of unmapped tiers

    with pytest.raises(CatalogError, match="SLEUTH_MODEL=nope"):
        Catalog.load(home, env={"SLEUTH_MODEL": "nope"})


def test_api_key_resolution() -> None:
    explicit = ModelConfig(id="a", provider="openai", model="m", api_key="k1", api_key_env="E")
    assert resolve_api_key(explicit, {"E": "k2"}) == "k1"
    named = ModelConfig(id="a", provider="openai", model="m", api_key_env="E")
    assert resolve_api_key(named, {"E": "k2"}) == "k2"
    assert resolve_api_key(named, {}) is None
    defaulted = ModelConfig(id="a", provider="anthropic", model="m")
    assert resolve_api_key(defaulted, {"ANTHROPIC_API_KEY": "k3"}) == "k3"
    local_named = ModelConfig(
        id="a", provider="openai-compatible", model="m", base_url="http://h", api_key_env="E"
    )
    assert resolve_api_key(local_named, {}) is None  # an explicitly named key must be present


def test_build_model(tmp_path: Path) -> None:
    catalog = Catalog.load(write(tmp_path, FULL), env={})
    local = build_model(catalog.resolve("lite"), env={})
    assert isinstance(local, OpenAIChatModel) and local.config.id == "local/qwen2.5-coder-1.5b"
    claude = build_model(catalog.resolve("anthropic/sonnet"), env={"ANTHROPIC_API_KEY": "ak-1"})
    assert isinstance(claude, AnthropicModel) and claude.config.id == "anthropic/sonnet"
    gpt = build_model(catalog.resolve("openai/gpt"), env={"MY_OPENAI_KEY": "ok-1"})
    assert isinstance(gpt, OpenAIChatModel)
    # The resolved key travels beside the config, so printing a model's config never shows it.
    assert gpt.config.api_key is None and "ok-1" not in repr(gpt.config) + repr(catalog)
    with pytest.raises(CatalogError, match="offline planner"):
        build_model(catalog.resolve(OFFLINE_ID))


def test_a_small_window_gets_the_small_prompt_profile_unless_the_entry_names_one(tmp_path: Path) -> None:
    """The standard rules and reference take most of an 8,192-token window (issue 46)."""
    entries = {
        "local/a": "context_window = 8192",
        "local/b": 'context_window = 8192\nprompt_profile = "standard"',
        "local/c": "context_window = 32768",
        "local/d": "",  # openai-compatible's default window, 8,192
    }
    text = "".join(
        f'[models."{mid}"]\nprovider = "openai-compatible"\nmodel = "m"\n'
        f'base_url = "http://127.0.0.1:8080/v1"\n{extra}\n\n'
        for mid, extra in entries.items()
    )
    catalog = Catalog.load(write(tmp_path / "home", text))
    profiles = {mid: catalog.models[mid].prompt_profile for mid in entries}
    assert profiles == {"local/a": "small", "local/b": "standard", "local/c": "standard", "local/d": "small"}
