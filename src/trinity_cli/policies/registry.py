"""Policies by name: one `Registry` (registry.py), entry-point group `trinity_cli.policies`.

A name stands for a `PolicyKind` (kinds.py; bench's own rows: bench_rows.py): `ask --mode NAME`,
serve's model `trinity/NAME` and `bench --systems NAME` find it here and nowhere else. The kinds trinity ships register
below exactly as a package registers its own, as "module:attribute":

    [project.entry-points."trinity_cli.policies"]
    until-number = "trinity_numeric:UntilNumber"

A package's entry may name a `PolicyKind` instance or a policy class (base.LoopPolicy made
with no arguments: `PolicyClass` is its kind). Names are listed in registration order (the
order of bench's report), then installed ones; `head` is bench's name for the coordinator's
rows. A package's kind that fails (it cannot be imported, or its code raises where trinity
builds its policy, engine or rows) is named and set aside (registry.py): listings go on without
it, and a command that names it fails in one line naming the package and the fix. The listings
(`trinity pools`, help, serve's models) also make a package's policy class once, with no
arguments as ask makes it (`_made`), so one whose construction raises is named there rather
than offered; a kind instance's policy needs a pool, and is made when a command asks for it.
How to write one: docs/extending.md (a test installs its example and plays it).
"""

from __future__ import annotations

import functools
from typing import Any

from trinity_cli.errors import ConfigError, TrinityError, did_you_mean, option
from trinity_cli.policies.kinds import PolicyClass, PolicyKind
from trinity_cli.registry import Registry

GROUP = "trinity_cli.policies"


def _is_policy(found: Any) -> bool:
    return isinstance(found, PolicyKind) or (isinstance(found, type) and callable(getattr(found, "play", None)))


POLICIES: Registry[Any] = Registry(
    GROUP, "policy", check=_is_policy,
    expected="a PolicyKind instance (trinity_cli.policies.kinds) or a policy class (trinity_cli.policies.base)")

_KINDS, _ROWS = "trinity_cli.policies.kinds", "trinity_cli.policies.bench_rows"
for _name, _target in (
    ("single", f"{_ROWS}:SINGLE"), ("selfloop", f"{_ROWS}:SELFLOOP"), ("sc", f"{_ROWS}:SC"),
    ("agree", f"{_KINDS}:AGREE"), ("random", f"{_ROWS}:RANDOM"), ("coordinator", f"{_KINDS}:COORDINATOR"),
    ("head", f"{_KINDS}:COORDINATOR"), ("moa", f"{_ROWS}:MOA"), ("conductor", f"{_KINDS}:CONDUCTOR"),
    ("vote", f"{_ROWS}:VOTE"), ("best-per-task", f"{_ROWS}:BEST_PER_TASK"), ("oracle", f"{_ROWS}:ORACLE"),
):
    POLICIES.register(_name, _target)
POLICIES.register("drafts", "trinity_cli.policies.drafts:DRAFTS")
POLICIES.register("drafts-told", "trinity_cli.policies.drafts:DRAFTS_TOLD")


def policy_kind(name: str, flag: str = "systems", asking: bool = False) -> PolicyKind:
    """The kind named `name`, built in or installed; an unknown name raises ConfigError naming
    the option `flag` and the close matches (among those that answer questions, `asking`). An
    installed one that cannot be imported raises the registry's one line naming its package;
    one whose own code raises later is set aside the same way (`Contained`)."""
    if name not in POLICIES:
        raise ConfigError(f"{option(flag)}: unknown policy {name!r}", did_you_mean(name, policy_names(asking)))
    return _kind(name, POLICIES.get(name))


def _kind(name: str, found: Any) -> PolicyKind:
    if name in POLICIES.built_in():
        built: PolicyKind = found
        return built
    held = _CONTAINED.get(name)
    if held is None or held[0] is not found:
        held = (found, Contained(name, found if isinstance(found, PolicyKind) else PolicyClass(name, found)))
        _CONTAINED[name] = held
    return held[1]


class Contained(PolicyKind):
    """A package's policy kind as trinity uses it: every attribute is the kind's own, and every
    method runs under the registry's guard (registry.py), so a package's kind that raises while
    it builds its policy (`make`), its engine or its bench rows fails in one line naming its
    package, and is set aside, instead of ending the command with an unexpected error."""

    def __init__(self, name: str, inner: PolicyKind) -> None:
        self._entry, self._inner = name, inner

    def __getattribute__(self, attr: str) -> Any:
        # Forwarded, not copied: attributes a kind gains later are read from the package's kind.
        if attr.startswith("_"):
            return object.__getattribute__(self, attr)
        found = getattr(object.__getattribute__(self, "_inner"), attr)
        if not callable(found) or isinstance(found, type):
            return found
        entry = object.__getattribute__(self, "_entry")

        @functools.wraps(found)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            with POLICIES.guard(entry, f"its {attr}()"):
                return found(*args, **kwargs)

        return guarded


# A package's kind, wrapped once per name, so the same name gives the same object.
_CONTAINED: dict[str, tuple[Any, Contained]] = {}


def answering_kind(name: str) -> PolicyKind:
    """The kind that answers `ask --mode NAME` (serve's `trinity/NAME`): one that `asks`."""
    kind = policy_kind(name, "mode", asking=True)
    if not kind.asks:
        raise ConfigError(f"{option('mode')} {name}: {kind.summary}, a row of bench's report, not a way to answer",
                          "use one of: " + ", ".join(policy_names(asking=True)))
    return kind


def _listed() -> list[str]:
    """Built-in names under their own name (not `head`, bench's alias), then installed ones."""
    return [*(name for name in POLICIES.built_in() if POLICIES.get(name).name == name), *sorted(POLICIES.installed())]


def policy_names(asking: bool = False, built_in: bool = False) -> list[str]:
    """The policy names to list: built-in ones under their own name (not `head`, bench's alias),
    then the installed ones unless `built_in`; only those that answer questions with `asking`.
    An installed one that cannot be imported is left out, set aside with one warning
    (registry.py), so what lists the policies (help, serve's models) works without it."""
    listed = [name for name in _listed() if name in POLICIES.built_in()] if built_in else _listed()
    usable = POLICIES.usable(name for name in listed if _made(name, warn=True))
    return [name for name in listed if name in usable and (not asking or _kind(name, usable[name]).asks)]


_MADE: set[str] = set()  # the package policy classes made once in this process


def _made(name: str, warn: bool = False) -> bool:
    """Whether `name` can be listed: a built-in or a package's kind instance always; a package's
    policy class once it has been made with no arguments, as `ask` makes it (once per process).
    One whose construction raises is set aside (a warning with `warn`) and is not."""
    if name in POLICIES.built_in() or name in _MADE:
        return True
    try:
        found = POLICIES.get(name)
    except ConfigError:
        return True  # it cannot be imported: `usable` and `policy_kind` say so
    if not isinstance(found, type):
        return True
    try:
        with POLICIES.guard(name, "its make()"):  # as Contained words it when ask makes one
            found()
    except TrinityError:
        if POLICIES.why(name) is None:
            return True  # a TrinityError of its own: the user's to fix, shown when a command makes it
        if warn:
            POLICIES.set_aside(name, POLICIES.why(name) or "")
        return False
    _MADE.add(name)
    return True


def summaries() -> dict[str, str]:
    """Each built-in and installed policy name -> its one-line summary (installed ones imported
    to read it; one that cannot be used says why and what to do, without a warning: this is
    the listing where a user looks)."""
    found: dict[str, str] = {}
    for name in _listed():
        try:
            if not _made(name):
                raise POLICIES.failure(name)
            found[name] = policy_kind(name).summary
        except ConfigError:
            found[name] = f"cannot be used: {POLICIES.why(name)} ({POLICIES.fix(name)})"
    return found


def in_bench() -> list[PolicyKind]:
    """The kinds of a bench that names no `--systems`: the built-in ones that say so, in order."""
    kinds: list[PolicyKind] = []
    for name in POLICIES.built_in():
        kind = policy_kind(name, "systems")
        if kind.in_bench and kind not in kinds:
            kinds.append(kind)
    return kinds
