"""Pool model kind -> backend class, imported lazily so `trinity --help` stays instant."""

from __future__ import annotations

import importlib

from trinity_cli.backends.base import Backend
from trinity_cli.errors import ConfigError, did_you_mean
from trinity_cli.pool_config import ModelConfig

KINDS: dict[str, str] = {
    "gguf": "trinity_cli.backends.llamacpp:LlamaCppBackend",
    "gguf:server": "trinity_cli.backends.llamaserver:LlamaServerBackend",
    "openai": "trinity_cli.backends.openai_api:OpenAIBackend",
    "scripted": "trinity_cli.backends.scripted:ScriptedBackend",
}


def create(config: ModelConfig) -> Backend:
    """Construct (not load) the backend for one pool model."""
    kind = "gguf:server" if config.kind == "gguf" and config.runtime == "server" else config.kind
    target = KINDS.get(kind)
    if target is None:
        raise ConfigError(f"unknown model kind {config.kind!r}", did_you_mean(config.kind, KINDS))
    module, cls = target.split(":")
    backend: Backend = getattr(importlib.import_module(module), cls)(config)
    return backend
