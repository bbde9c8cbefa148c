"""One way to register what a user can add: policies, backends, answer kinds, task families.

A `Registry` maps a name to a target, given either as an object or, lazily, as a
"module:attribute" string imported on first use, so that `trinity --help` stays instant.
Built-ins register through the same `register` call another package's code would make, and
an installed package registers through its entry-point group, one entry per name:

    [project.entry-points."trinity_cli.answer_kinds"]
    haiku = "my_pkg.kinds:HAIKU"

The groups are `trinity_cli.backends`, `trinity_cli.policies`, `trinity_cli.answer_kinds` and
`trinity_cli.tasks` (each registry names its own in `group`). Contract:

- `names()` lists built-in and installed names without importing anything; the installed
  entry points are listed once per registry and process (`refresh()` lists them again);
- `get(name)` returns the target, importing it once; an unknown name raises `ConfigError`
  with the close matches ("did you mean ..."); a built-in name wins over an entry point of
  the same name (a package cannot replace one silently); registering a name twice in code
  replaces the earlier target (tests rely on it).

A plugin that fails is the plugin's problem, never every command's. An entry that cannot be
imported, is not what the registry holds (`check`), or whose own code raises where trinity
calls it (`guard`, `tolerate`: a kind's `detect`, a backend's construction, a policy's build)
is *set aside*: from then on `get(name)` raises one `ConfigError` naming the entry, its
package (the entry point's distribution) and the fix (`pip uninstall PKG`, or fix it), so a
command that needs it fails in that one line; `usable()`, what detection and the name lists of
help and serve walk, leaves it out and logs one warning (a `logging` warning of
"trinity_cli.registry", once per entry and process; the command line renders it as one line).
`trinity pools` lists it with `why` and `fix` instead. A built-in's own code is not guarded:
its failure is a bug in trinity and surfaces as one.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from trinity_cli.errors import ConfigError, TrinityError, did_you_mean

T = TypeVar("T")

log = logging.getLogger(__name__)


def load_target(target: str) -> Any:
    """The object a "module:attribute" string names (attribute may be dotted)."""
    module, _, attribute = target.partition(":")
    found: Any = importlib.import_module(module)
    for part in attribute.split(".") if attribute else ():
        found = getattr(found, part)
    return found


def _said(exc: BaseException) -> str:
    """An exception as one line: its type and message."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
        self._aside: dict[str, str] = {}  # name -> why it is set aside
        self._warned: set[str] = set()
        self._listed: dict[str, EntryPoint] | None = None  # the group's entry points, listed once

    def register(self, name: str, target: T | str) -> None:
        """Register `target` (an object, or "module:attribute" imported when first asked for)."""
        self._targets[name] = target
        self._loaded.pop(name, None)
        self._aside.pop(name, None)

    def built_in(self) -> list[str]:
        return list(self._targets)

    def refresh(self) -> None:
        """List the installed entry points again on next use: for a process that installs or
        removes a package after it first asked (targets already loaded stay loaded)."""
        self._listed = None

    def _entry_points(self) -> dict[str, EntryPoint]:
        # Listing entry points reads every installed distribution's metadata (about 12 ms with a
        # few hundred installed), and detection asks on every request: list once per process.
        # A name registered in code later still wins, since built-ins are filtered out per call.
        if self._listed is None:
            self._listed = {ep.name: ep for ep in entry_points(group=self.group)}
        return {name: ep for name, ep in self._listed.items() if name not in self._targets}

    def installed(self) -> dict[str, str]:
        """Entry points of `group` not shadowed by a built-in name: name -> "module:attr"."""
        return {name: ep.value for name, ep in self._entry_points().items()}

    def names(self) -> list[str]:
        """Every name `get` accepts: built-ins in registration order, then installed ones sorted."""
        return [*self._targets, *sorted(self.installed())]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._targets or name in self.installed())

    def package(self, name: str) -> str:
        """The distribution that provides `name`: "trinity-cli" for a built-in, else its entry
        point's ("" when the entry point belongs to none)."""
        if name in self._targets:
            return "trinity-cli"
        dist = getattr(self._entry_points().get(name), "dist", None)
        return str(getattr(dist, "name", "") or "")

    def fix(self, name: str) -> str:
        """What a user does about `name` failing: fix or remove its package."""
        package = self.package(name)
        if name in self._targets:
            return "reinstall trinity: pip install --force-reinstall trinity-cli"
        if not package:
            return f"fix or remove the package whose entry point {self.group} names {name!r}"
        return f"fix {package}, or remove it: pip uninstall {package}"

    def _named(self, name: str) -> str:
        package = self.package(name)
        return f"the {self.what} {name!r}" + (f" (package {package})" if package else "")

    def why(self, name: str) -> str | None:
        """Why `name` is set aside, or None while it is not."""
        return self._aside.get(name)

    def set_aside(self, name: str, reason: str, warn: bool = True) -> None:
        """Set `name` aside for `reason` (module docstring); with `warn`, say so in one warning
        line the first time."""
        self._aside.setdefault(name, reason)
        self._loaded.pop(name, None)
        if warn and name not in self._warned:
            self._warned.add(name)
            log.warning("%s set aside: %s; %s", self._named(name), self._aside[name], self.fix(name))

    def failure(self, name: str) -> ConfigError:
        """The one-line error of a command that needs `name`, which is set aside."""
        return ConfigError(f"{self._named(name)} cannot be used: {self._aside.get(name, 'it failed')}",
                           self.fix(name))

    def get(self, name: str) -> T:
        if name in self._loaded:
            return self._loaded[name]
        if name in self._aside:
            raise self.failure(name)
        target: Any = self._targets.get(name)
        if target is None:
            installed = self.installed()
            if name not in installed:
                raise ConfigError(f"unknown {self.what} {name!r}", did_you_mean(name, self.names()))
            target = installed[name]
        loaded: Any = target
        if isinstance(target, str):
            try:
                loaded = load_target(target)
            except Exception as exc:  # a broken plugin: say which, not a traceback
                self.set_aside(name, f"{target} cannot be imported ({_said(exc)})", warn=False)
                raise self.failure(name) from None
        if self._check is not None and not self._check(loaded):
            self.set_aside(name, f"{target if isinstance(target, str) else type(target).__name__} is not "
                                 f"{self._expected or 'usable here'}", warn=False)
            raise self.failure(name)
        self._loaded[name] = loaded
        result: T = loaded
        return result

    def usable(self, names: Iterable[str] | None = None) -> dict[str, T]:
        """name -> target for every name (`names`, else all of them) that loads: one that fails
        is set aside with a warning and left out. An unknown name among `names` raises."""
        found: dict[str, T] = {}
        for name in self.names() if names is None else names:
            try:
                found[name] = self.get(name)
            except ConfigError:
                if name not in self._aside:
                    raise
                self.set_aside(name, self._aside[name])
        return found

    def tolerate(self, name: str, doing: str, exc: Exception) -> None:
        """`name`'s own code failed while `doing` (e.g. "its detect") with `exc`, where a
        command can go on without it: an installed entry is set aside with a warning; a
        built-in's `exc` is raised again (trinity's own bug)."""
        if name in self._targets:
            raise exc
        self.set_aside(name, f"{doing} raised {_said(exc)}")

    @contextmanager
    def guard(self, name: str, doing: str) -> Iterator[None]:
        """Run an installed entry's own code where the command needs it (`doing`, e.g.
        "making member 'calc''s backend"): an exception other than a `TrinityError` sets it
        aside and is raised as its one-line `failure`. A built-in's exceptions pass unchanged."""
        try:
            yield
        except TrinityError:
            raise
        except Exception as exc:
            if name in self._targets:
                raise
            self.set_aside(name, f"{doing} raised {_said(exc)}", warn=False)
            raise self.failure(name) from exc
