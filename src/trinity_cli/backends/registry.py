"""Pool model kind -> backend class, imported lazily so `trinity --help` stays instant.

Built-in kinds are named in `KINDS` as "module:Class". Any other kind comes from an installed
package that registers it in the entry-point group `trinity_cli.backends` (the way `llm`
plugins and lm-evaluation-harness models register), its name the kind and its value the
backend class: `[project.entry-points."trinity_cli.backends"] mykind = "my_pkg:MyBackend"`.
A plugin backend subclasses `Backend` and may declare `config_model`, a pydantic model of its
member's fields (the common ones of pool_config's `_ModelBase` and its own); the member's
entry is checked against it when the backend is made, with the pool file's field names.
How to write one: docs/extending.md (a test installs its example and asks through it).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from pydantic import ValidationError

from trinity_cli.backends.base import Backend
from trinity_cli.errors import ConfigError, did_you_mean
from trinity_cli.pool_config import BACKEND_GROUP, BUILT_IN_KINDS, ModelConfig, PluginModel, plugin_kinds

KINDS: dict[str, str] = {
    "gguf": "trinity_cli.backends.llamacpp:LlamaCppBackend",
    "gguf:server": "trinity_cli.backends.llamaserver:LlamaServerBackend",
    "openai": "trinity_cli.backends.openai_api:OpenAIBackend",
    "scripted": "trinity_cli.backends.scripted:ScriptedBackend",
}


def backend_class(kind: str) -> type[Backend]:
    """The backend class of model kind `kind`: a built-in one, or an installed plugin's."""
    target = KINDS.get(kind)
    if target is not None:
        module, name = target.split(":")
        cls: type[Backend] = getattr(importlib.import_module(module), name)
        return cls
    found = [ep for ep in entry_points(group=BACKEND_GROUP) if ep.name == kind]
    if not found:
        raise ConfigError(f"unknown model kind {kind!r}", did_you_mean(kind, [*BUILT_IN_KINDS, *plugin_kinds()]))
    try:
        loaded: Any = found[0].load()
    except Exception as exc:  # a broken plugin: say which, not a traceback
        raise ConfigError(f"the backend of model kind {kind!r} ({found[0].value}) cannot be imported: {exc}",
                          "reinstall or fix the package that provides it") from None
    if not (isinstance(loaded, type) and issubclass(loaded, Backend)):
        raise ConfigError(f"model kind {kind!r}: {found[0].value} is not a trinity_cli Backend class",
                          "the entry point must name a subclass of trinity_cli.backends.base.Backend")
    return loaded


def create(config: ModelConfig) -> Backend:
    """Construct (not load) the backend for one pool model."""
    runtime = getattr(config, "runtime", None)
    kind = "gguf:server" if config.kind == "gguf" and runtime == "server" else config.kind
    cls = backend_class(kind)
    if isinstance(config, PluginModel):
        schema = getattr(cls, "config_model", None)
        if schema is not None:
            try:
                config = schema.model_validate(config.model_dump())
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "its entry"
                raise ConfigError(f"model {config.name!r} (kind {kind!r}): {where}: {first['msg']}",
                                  "fix that field in the pool file") from None
    factory: Any = cls  # every backend class is made from its member's config (Backend's contract)
    backend: Backend = factory(config)
    return backend
