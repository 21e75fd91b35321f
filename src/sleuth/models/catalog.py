"""The model catalog (spec/runtime.md §12, spec/api.md §10.2): `$SLEUTH_HOME/config.toml` plus model specs.

```toml
default = "local/qwen"                     # optional; a catalog id

[models."local/qwen"]
provider = "openai-compatible"             # openai | anthropic | openai-compatible
base_url = "http://127.0.0.1:8080/v1"      # required for openai-compatible
model = "qwen2.5-coder-1.5b"
tool_protocol = "text"

[tiers]                                    # lite / standard / pro → ids; unmapped → the default
standard = "local/qwen"
```

A spec (`openai:NAME`, `anthropic:NAME`, `openai-compatible:NAME@URL`) adds an entry whose id is the
spec without `@URL`. Specs are accepted from the CLI and `SLEUTH_MODEL` only: over HTTP the caller passes
`allow_specs=False`, so a request can never make the server call a URL of its choosing.

`sleuth/offline` (the planner, spec/runtime.md §10) is always present; with nothing configured it is the
default and every tier maps to it. With models configured and no `default`, the default is the
`standard` tier's model, else the first model in the file: configuring a model means wanting it used.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, get_args

from sleuth.errors import Invalid, ToldInvalid
from sleuth.models.base import Model, ModelConfig, PromptProfile, Provider, ToolProtocol
from sleuth.models.keys import DEFAULT_KEY_ENV, resolve_api_key
from sleuth.settings import TOOL_OUTPUT_CHARS

OFFLINE_ID = "sleuth/offline"
TIERS = ("lite", "standard", "pro")
CONFIGURABLE_PROVIDERS = ("openai", "anthropic", "openai-compatible")
SDK_MODULE: dict[str, str] = {"openai": "openai", "openai-compatible": "openai", "anthropic": "anthropic"}

# `GET /models` query_defaults (spec/api.md §10.2, spec/runtime.md §12).
QUERY_DEFAULTS: dict[str, Any] = {
    "max_steps": {"search": 8, "search_cc": 8, "search_rag": 2},
    "thinking_levels": ["minimal", "low", "medium", "high"],
    "thinking_level": "low",
    "max_tool_output_chars": TOOL_OUTPUT_CHARS,
}

_TOP_KEYS = {"default", "models", "tiers"}
_ENTRY_KEYS = {
    "provider",
    "model",
    "base_url",
    "api_key",
    "api_key_env",
    "tool_protocol",
    "prompt_profile",
    "context_window",
    "temperature",
    "seed",
    "price_input_per_token",
    "price_output_per_token",
    "label",
}

OFFLINE = ModelConfig(
    id=OFFLINE_ID,
    provider="offline",
    model="offline",
    tool_protocol="native",
    label="Sleuth offline planner (no model)",
)


class ModelUnavailable(ToldInvalid, ValueError):
    """A model a request names cannot run on this server: unknown, or missing its key or its SDK
    (`400 model_unavailable`, `field: model`)."""

    def __init__(self, message: str) -> None:
        super().__init__("model_unavailable", message, field="model")


class CatalogError(Invalid, ValueError):
    """The catalog or a model name is invalid; the message says what to fix."""


def _defaults(provider: str) -> tuple[ToolProtocol, int]:
    """Per-provider defaults of spec/runtime.md §12: (tool_protocol, context_window)."""
    if provider == "openai-compatible":
        return "text", 8192
    return "native", 128_000


#: Below this many tokens a model gets the `small` prompt profile unless its entry names one: the
#: standard rules and reference alone take about 3,500 tokens, most of an 8,192-token window
#: (spec/runtime.md §12).
SMALL_WINDOW = 16_384


def _profile(context_window: int) -> PromptProfile:
    return "small" if context_window < SMALL_WINDOW else "standard"


def _check_url(url: str, where: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise CatalogError(f"{where}: base_url must start with http:// or https://; got {url!r}")
    return url


def parse_spec(spec: str) -> ModelConfig | None:
    """`openai:NAME`, `anthropic:NAME` or `openai-compatible:NAME@URL` → an entry; None if `spec` is not
    a spec at all. An `openai-compatible` spec without `@URL` is an error: it names no server."""
    provider, sep, rest = spec.partition(":")
    if not sep or provider not in CONFIGURABLE_PROVIDERS:
        return None
    name, at, url = rest.partition("@")
    if provider != "openai-compatible" and at:
        name, url = rest, ""  # an `@` in a hosted model name is part of the name
    name = name.strip()
    if not name:
        raise CatalogError(f"model spec {spec!r} names no model")
    model_id = f"{provider}:{name}"
    if provider == "openai-compatible":
        if not url:
            raise CatalogError(
                f"model spec {spec!r} needs the server: openai-compatible:NAME@URL "
                "(e.g. openai-compatible:qwen2.5-coder-1.5b@http://127.0.0.1:8080/v1)"
            )
        base_url: str | None = _check_url(url.strip(), f"model spec {spec!r}")
    else:
        base_url = None
    tool_protocol, context_window = _defaults(provider)
    return ModelConfig(
        id=model_id,
        provider=cast(Provider, provider),  # checked against CONFIGURABLE_PROVIDERS above
        model=name,
        base_url=base_url,
        api_key_env=DEFAULT_KEY_ENV.get(provider),
        tool_protocol=tool_protocol,
        prompt_profile=_profile(context_window),
        context_window=context_window,
    )


def _entry(model_id: str, table: object, where: str) -> ModelConfig:
    """One `[models."<id>"]` table, validated with messages that name the table and the key."""
    here = f'{where}: [models."{model_id}"]'
    if not isinstance(table, dict):
        raise CatalogError(f"{here} must be a table")
    unknown = sorted(set(table) - _ENTRY_KEYS)
    if unknown:
        raise CatalogError(
            f"{here}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_ENTRY_KEYS))}"
        )
    if model_id == OFFLINE_ID:
        raise CatalogError(f"{here}: {OFFLINE_ID} is built in and cannot be configured")
    if model_id in TIERS:
        raise CatalogError(f"{here}: {model_id!r} is a tier name; choose another id")
    if not model_id.strip():
        raise CatalogError(f"{where}: a model id is empty")

    def text(key: str, required: bool = False) -> str | None:
        value = table.get(key)
        if value is None:
            if required:
                raise CatalogError(f"{here}: {key} is required")
            return None
        if not isinstance(value, str) or not value.strip():
            raise CatalogError(f"{here}: {key} must be a non-empty string")
        return value

    def number(key: str) -> float | None:
        value = table.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise CatalogError(f"{here}: {key} must be a number")
        return float(value)

    def integer(key: str) -> int | None:
        value = table.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise CatalogError(f"{here}: {key} must be an integer")
        return value

    def choice(key: str, allowed: tuple[str, ...]) -> str | None:
        value = table.get(key)
        if value is None:
            return None
        if value not in allowed:
            raise CatalogError(f"{here}: {key} must be one of {', '.join(allowed)}; got {value!r}")
        return str(value)

    provider = text("provider", required=True)
    if provider not in CONFIGURABLE_PROVIDERS:
        raise CatalogError(
            f"{here}: unknown provider {provider!r}; use one of {', '.join(CONFIGURABLE_PROVIDERS)}"
        )
    default_protocol, default_window = _defaults(provider)
    base_url = text("base_url")
    if base_url is not None:
        _check_url(base_url, here)
    elif provider == "openai-compatible":
        raise CatalogError(
            f"{here}: provider openai-compatible requires base_url (e.g. http://127.0.0.1:8080/v1)"
        )
    context_window = integer("context_window")
    if context_window is not None and context_window <= 0:
        raise CatalogError(f"{here}: context_window must be positive")
    prices = {k: number(k) for k in ("price_input_per_token", "price_output_per_token")}
    for key, price in prices.items():
        if price is not None and price < 0:
            raise CatalogError(f"{here}: {key} must not be negative")
    api_key = text("api_key")
    api_key_env = text("api_key_env")
    if api_key is None and api_key_env is None:
        api_key_env = DEFAULT_KEY_ENV.get(provider)
    return ModelConfig(
        id=model_id,
        provider=cast(Provider, provider),  # checked against CONFIGURABLE_PROVIDERS above
        model=text("model", required=True) or "",
        base_url=base_url,
        api_key=api_key,
        api_key_env=api_key_env,
        tool_protocol=cast(ToolProtocol, choice("tool_protocol", get_args(ToolProtocol)) or default_protocol),
        prompt_profile=cast(
            PromptProfile,
            choice("prompt_profile", get_args(PromptProfile)) or _profile(context_window or default_window),
        ),
        context_window=context_window or default_window,
        temperature=number("temperature"),
        seed=integer("seed"),
        price_input_per_token=prices["price_input_per_token"],
        price_output_per_token=prices["price_output_per_token"],
        label=text("label"),
    )


@dataclass
class Catalog:
    """Configured models by id, tier mapping and default. Build it with `Catalog.load`."""

    models: dict[str, ModelConfig] = field(default_factory=lambda: {OFFLINE_ID: OFFLINE})
    tiers: dict[str, str] = field(default_factory=dict)
    default: str = OFFLINE_ID
    env: Mapping[str, str] = field(default_factory=lambda: os.environ, repr=False)  # holds keys
    where: str = "config.toml"  # the file it was read from, as errors and notes name it

    @classmethod
    def load(cls, home_root: Path, env: Mapping[str, str] | None = None) -> Catalog:
        """Read `home_root/config.toml` (absent = nothing configured), then apply `SLEUTH_MODEL`, which
        becomes the default (a spec there adds its entry)."""
        env = os.environ if env is None else env
        path = Path(home_root) / "config.toml"
        data: dict[str, Any] = {}
        if path.is_file():
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise CatalogError(f"{path}: not valid TOML: {exc}") from None
        catalog = cls.from_dict(data, where=str(path), env=env)
        chosen = env.get("SLEUTH_MODEL", "").strip()
        if chosen:
            try:
                catalog.default = catalog.resolve(chosen).id
            except CatalogError as exc:
                raise CatalogError(f"SLEUTH_MODEL={chosen}: {exc}") from None
        return catalog

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], where: str = "config.toml", env: Mapping[str, str] | None = None
    ) -> Catalog:
        """Validate parsed config.toml data."""
        unknown = sorted(set(data) - _TOP_KEYS)
        if unknown:
            raise CatalogError(
                f"{where}: unknown key(s) {', '.join(unknown)}; allowed: default, models, tiers"
            )
        tables = data.get("models", {})
        if not isinstance(tables, dict):
            raise CatalogError(f'{where}: models must be tables: [models."<id>"]')
        models: dict[str, ModelConfig] = {OFFLINE_ID: OFFLINE}
        for model_id, table in tables.items():
            models[model_id] = _entry(model_id, table, where)

        def known(model_id: object, here: str) -> str:
            if not isinstance(model_id, str) or model_id not in models:
                raise CatalogError(f"{here}: unknown model {model_id!r}; available: {', '.join(models)}")
            return model_id

        raw_tiers = data.get("tiers", {})
        if not isinstance(raw_tiers, dict):
            raise CatalogError(f"{where}: tiers must be a table: [tiers]")
        bad = sorted(set(raw_tiers) - set(TIERS))
        if bad:
            raise CatalogError(
                f"{where}: [tiers]: unknown tier(s) {', '.join(bad)}; tiers are {', '.join(TIERS)}"
            )
        tiers = {tier: known(model_id, f"{where}: [tiers] {tier}") for tier, model_id in raw_tiers.items()}
        if "default" in data:
            default = known(data["default"], f"{where}: default")
        elif "standard" in tiers:
            default = tiers["standard"]
        else:
            default = next((m for m in models if m != OFFLINE_ID), OFFLINE_ID)
        return cls(
            models=models, tiers=tiers, default=default, env=os.environ if env is None else env, where=where
        )

    def tier(self, name: str) -> str:
        """The id a tier maps to; an unmapped tier maps to the default."""
        return self.tiers.get(name, self.default)

    def resolve(self, name: str | None = None, allow_specs: bool = True) -> ModelConfig:
        """A catalog id, tier or (with `allow_specs`) spec → its entry. None → `SLEUTH_MODEL`, else the
        default. Specs add their entry, so later lookups by id (and `public()`) see it."""
        if name is None:
            name = self.env.get("SLEUTH_MODEL", "").strip() or self.default
        name = name.strip()
        if name in self.models:
            return self.models[name]
        if name in TIERS:
            return self.models[self.tier(name)]
        if allow_specs:
            spec = parse_spec(name)
            if spec is not None:
                existing = self.models.get(spec.id)
                if existing is not None and (spec.base_url is None or spec.base_url == existing.base_url):
                    return existing
                self.models[spec.id] = spec
                return spec
        raise CatalogError(
            f"unknown model {name!r}; available: {', '.join(self.models)} (or a tier: {', '.join(TIERS)})"
        )

    def usable(self, name: str | None) -> ModelConfig:
        """The entry a request names (an id or a tier, never a spec; None: the default), checked that it
        can run here now; `ModelUnavailable` saying why not. The one check of a client's `model`, for
        a turn, a curate and a template's design."""
        try:
            config = self.resolve(name, allow_specs=False)
        except CatalogError as exc:
            raise ModelUnavailable(str(exc)) from None
        if not self.available(config):
            raise ModelUnavailable(f"model {config.id!r} is not available on this server")
        return config

    def available(self, config: ModelConfig) -> bool:
        """Usable now: the offline planner always; others need their key (or none) and their SDK."""
        if config.provider == "offline":
            return True
        return missing_part(config, self.env) is None and resolve_api_key(config, self.env) is not None

    def missing(self, config: ModelConfig) -> str | None:
        """What a provider model lacks here, as a person reads it (its SDK extra, its key), or None: a turn
        is refused with it before anything is stored (issue 26, item 2)."""
        return missing_part(config, self.env)

    def public(self) -> dict[str, Any]:
        """The `GET /models` catalog (spec/api.md §10.2), never keys. `embedding_models` is the server's to
        add: it comes from the embedders, not from this file."""
        return {
            "default": self.default,
            "models": [{**c.public(), "available": self.available(c)} for c in self.models.values()],
            "tiers": {tier: self.tier(tier) for tier in TIERS},
            # A manifest's default `artifact_model` is the `lite` tier; curation uses it only where
            # config.toml maps it (offline: the model kinds are skipped).
            "phase_defaults": {
                "search": self.default,
                "synthesis": self.default,
                "curate": self.tiers.get("lite", OFFLINE_ID),
            },
            "supported_curate_models": [
                c.id for c in self.models.values() if c.provider == "offline" or self.available(c)
            ],
            "query_defaults": copy.deepcopy(QUERY_DEFAULTS),
        }


def missing_part(config: ModelConfig, env: Mapping[str, str] | None = None) -> str | None:
    """Why a provider model cannot run here: its SDK is not installed (`pip install 'sleuth[openai]'`),
    or the variable that holds its key is not set. None for the offline planner and test doubles."""
    module = SDK_MODULE.get(config.provider)
    if module is None:
        return None
    if importlib.util.find_spec(module) is None:
        return f"{config.id} needs the {module} extra, which is not installed: pip install 'sleuth[{module}]'"
    name = config.api_key_env or DEFAULT_KEY_ENV.get(config.provider)
    if resolve_api_key(config, env) is None and name:
        return f"{config.id} needs an API key: set {name}"
    return None


def build_model(config: ModelConfig, env: Mapping[str, str] | None = None) -> Model:
    """The adapter for a catalog entry, its key resolved now (from `env`, default the process's) and
    handed over beside the config, never inside it."""
    if config.provider == "offline":
        raise CatalogError(f"{config.id} is the offline planner: the agent builds it, not build_model")
    if config.provider not in CONFIGURABLE_PROVIDERS:
        raise CatalogError(f"{config.id}: provider {config.provider!r} has no adapter here")
    key = resolve_api_key(config, env)
    if config.provider == "anthropic":
        from sleuth.models.anthropic_messages import AnthropicModel

        return AnthropicModel(config, api_key=key)
    from sleuth.models.openai_chat import OpenAIChatModel

    return OpenAIChatModel(config, api_key=key)
