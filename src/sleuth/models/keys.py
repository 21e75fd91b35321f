"""Which API key a model uses: the catalog checks that one is set, the provider adapters send it.
A module of its own so that neither imports the other."""

from __future__ import annotations

import os
from collections.abc import Mapping

from sleuth.models.base import ModelConfig

DEFAULT_KEY_ENV: dict[str, str] = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
NO_KEY = "unused"  # what an OpenAI-compatible local server gets: it checks no key, the SDK wants one


def resolve_api_key(config: ModelConfig, env: Mapping[str, str] | None = None) -> str | None:
    """The key for `config`: the explicit `api_key`, else the variable `api_key_env` names (default
    OPENAI_API_KEY / ANTHROPIC_API_KEY). An `openai-compatible` entry with neither gets a placeholder:
    local servers check no key, and sending the user's OpenAI key to an arbitrary URL would leak it."""
    env = os.environ if env is None else env
    if config.api_key:
        return config.api_key
    name = config.api_key_env or DEFAULT_KEY_ENV.get(config.provider)
    if name:
        return env.get(name) or None
    if config.provider == "openai-compatible":
        return NO_KEY
    return None
