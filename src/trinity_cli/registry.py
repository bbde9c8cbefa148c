"""One way to register what a user can add: policies, backends, answer kinds, task families.

A `Registry` maps a name to a target, given either as an object or, lazily, as a
"module:attribute" string imported on first use, so that `trinity --help` stays instant.
Built-ins register through the same `register` call another package's code would make, and
an installed package registers through its entry-point group, one entry per name:

    [project.entry-points."trinity_cli.answer_kinds"]
    haiku = "my_pkg.kinds:HAIKU"

The groups are `trinity_cli.backends`, `trinity_cli.policies`, `trinity_cli.answer_kinds` and
`trinity_cli.tasks` (each registry names its own in `group`). Contract:

- `names()` lists built-in and installed names without importing anything;
- `get(name)` returns the target, importing it once; an unknown name raises `ConfigError`
  with the close matches ("did you mean ..."), a target that cannot be imported or fails
  `check` raises `ConfigError` naming the package's entry;
- a built-in name wins over an entry point of the same name (a package cannot replace one
  silently); registering a name twice in code replaces the earlier target (tests rely on it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from trinity_cli.errors import ConfigError, did_you_mean

T = TypeVar("T")


def load_target(target: str) -> Any:
    """The object a "module:attribute" string names (attribute may be dotted)."""
    module, _, attribute = target.partition(":")
    found: Any = importlib.import_module(module)
    for part in attribute.split(".") if attribute else ():
        found = getattr(found, part)
    return found


class Registry(Generic[T]):
    """Names -> targets of one kind (`what`, e.g. "answer kind"), built in or installed."""

    def __init__(self, group: str, what: str, check: Callable[[Any], bool] | None = None,
                 expected: str = "") -> None:
        self.group = group
        self.what = what
        self._check = check
        self._expected = expected
        self._targets: dict[str, T | str] = {}
        self._loaded: dict[str, T] = {}

    def register(self, name: str, target: T | str) -> None:
        """Register `target` (an object, or "module:attribute" imported when first asked for)."""
        self._targets[name] = target
        self._loaded.pop(name, None)

    def built_in(self) -> list[str]:
        return list(self._targets)

    def installed(self) -> dict[str, str]:
        """Entry points of `group` not shadowed by a built-in name: name -> "module:attr"."""
        return {ep.name: ep.value for ep in entry_points(group=self.group) if ep.name not in self._targets}

    def names(self) -> list[str]:
        """Every name `get` accepts: built-ins in registration order, then installed ones sorted."""
        return [*self._targets, *sorted(self.installed())]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._targets or name in self.installed())

    def get(self, name: str) -> T:
        if name in self._loaded:
            return self._loaded[name]
        target: Any = self._targets.get(name)
        source = "trinity_cli"
        if target is None:
            installed = self.installed()
            if name not in installed:
                raise ConfigError(f"unknown {self.what} {name!r}", did_you_mean(name, self.names()))
            target, source = installed[name], f"the entry point {name} = {installed[name]!r}"
        loaded: Any = target
        if isinstance(target, str):
            try:
                loaded = load_target(target)
            except Exception as exc:  # a broken plugin: say which, not a traceback
                raise ConfigError(f"the {self.what} {name!r} ({target}) cannot be imported: {exc}",
                                  "reinstall or fix the package that provides it") from None
        if self._check is not None and not self._check(loaded):
            raise ConfigError(f"{self.what} {name!r}: {source} is not {self._expected or 'usable here'}",
                              f"the entry point must name {self._expected or 'the right kind of object'}")
        self._loaded[name] = loaded
        result: T = loaded
        return result
