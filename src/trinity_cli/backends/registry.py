"""Pool member kind -> backend class: one `Registry` (registry.py), entry-point group
`trinity_cli.backends`, imported lazily so `trinity --help` stays instant.

The built-in kinds register below exactly as a package registers its own, a kind's name and
its backend class as "module:Class":

    [project.entry-points."trinity_cli.backends"]
    mykind = "my_pkg:MyBackend"

A backend class subclasses `Backend` and declares `config_model`, the schema of its member's
entry (`MemberBase`'s common fields and its own, `kind: Literal["mykind"]`): pool_config.py
checks every member against its kind's schema when the pool file is read, so a wrong field is
one line naming the file, the member and the field. `Backend.create(config)` makes the
member's backend (the `gguf` kind picks llama.cpp's server for `runtime: server`). A package's
kind that cannot be imported or whose construction raises is named, with its package and the
fix, by the pools that use it and set aside; pools of other kinds never import it. How to write
one: docs/extending.md (a test installs its example and asks through it).
"""

from __future__ import annotations

from typing import Any

from trinity_cli.backends.base import Backend
from trinity_cli.member_config import MemberBase
from trinity_cli.registry import Registry

GROUP = "trinity_cli.backends"


def _is_backend(found: Any) -> bool:
    return isinstance(found, type) and issubclass(found, Backend) and issubclass(found.config_model, MemberBase)


MODEL_KINDS: Registry[type[Backend]] = Registry(
    GROUP, "model kind", check=_is_backend,
    expected="a subclass of trinity_cli.backends.base.Backend with a config_model")

for _name, _target in (
    ("gguf", "trinity_cli.backends.llamacpp:LlamaCppBackend"),
    ("openai", "trinity_cli.backends.openai_api:OpenAIBackend"),
    ("scripted", "trinity_cli.backends.scripted:ScriptedBackend"),
):
    MODEL_KINDS.register(_name, _target)


def backend_class(kind: str) -> type[Backend]:
    """The backend class of member kind `kind`, built in or installed; an unknown kind raises
    ConfigError with the close matches."""
    return MODEL_KINDS.get(kind)


def config_model(kind: str) -> type[MemberBase]:
    """The schema of a `kind` member's entry in the pool file."""
    return backend_class(kind).config_model


def create(config: MemberBase) -> Backend:
    """Construct (not load) the backend of one pool member. A package's backend that raises
    here (anything but a TrinityError, which says what to fix) is set aside and named in one
    line with its package and the fix (registry.py); pools without that kind never construct it."""
    cls = backend_class(config.kind)
    with MODEL_KINDS.guard(config.kind, f"making member {config.name!r}'s backend"):
        return cls.create(config)
