"""Policies by name: one `Registry` (registry.py), entry-point group `trinity_cli.policies`.

A name stands for a `PolicyKind` (kinds.py): `ask --mode NAME`, serve's model `trinity/NAME`
and `bench --systems NAME` find it here and nowhere else. The kinds trinity ships register
below exactly as a package registers its own, as "module:attribute":

    [project.entry-points."trinity_cli.policies"]
    until-number = "trinity_numeric:UntilNumber"

A package's entry may name a `PolicyKind` instance or a policy class (base.LoopPolicy made
with no arguments: `PolicyClass` is its kind). Names are listed in registration order (the
order of bench's report), then installed ones; `head` is bench's name for the coordinator's
rows. How to write one: docs/extending.md (a test installs its example and plays it).
"""

from __future__ import annotations

from typing import Any

from trinity_cli.errors import ConfigError, did_you_mean, option
from trinity_cli.policies.kinds import PolicyClass, PolicyKind
from trinity_cli.registry import Registry

GROUP = "trinity_cli.policies"


def _is_policy(found: Any) -> bool:
    return isinstance(found, PolicyKind) or (isinstance(found, type) and callable(getattr(found, "play", None)))


POLICIES: Registry[Any] = Registry(
    GROUP, "policy", check=_is_policy,
    expected="a PolicyKind instance (trinity_cli.policies.kinds) or a policy class (trinity_cli.policies.base)")

for _name, _target in (
    ("single", "SINGLE"), ("selfloop", "SELFLOOP"), ("sc", "SC"), ("agree", "AGREE"), ("random", "RANDOM"),
    ("coordinator", "COORDINATOR"), ("head", "COORDINATOR"), ("moa", "MOA"), ("conductor", "CONDUCTOR"),
    ("vote", "VOTE"), ("best-per-task", "BEST_PER_TASK"), ("oracle", "ORACLE"),
):
    POLICIES.register(_name, f"trinity_cli.policies.kinds:{_target}")


def policy_kind(name: str, flag: str = "systems", asking: bool = False) -> PolicyKind:
    """The kind named `name`, built in or installed; an unknown name raises ConfigError naming
    the option `flag` and the close matches (among those that answer questions, `asking`)."""
    if name not in POLICIES:
        raise ConfigError(f"{option(flag)}: unknown policy {name!r}", did_you_mean(name, policy_names(asking)))
    found = POLICIES.get(name)  # an installed one that cannot be imported: the registry's own words
    kind: PolicyKind = found if isinstance(found, PolicyKind) else PolicyClass(name, found)
    return kind


def answering_kind(name: str) -> PolicyKind:
    """The kind that answers `ask --mode NAME` (serve's `trinity/NAME`): one that `asks`."""
    kind = policy_kind(name, "mode", asking=True)
    if not kind.asks:
        raise ConfigError(f"{option('mode')} {name}: {kind.summary}, a row of bench's report, not a way to answer",
                          "use one of: " + ", ".join(policy_names(asking=True)))
    return kind


def policy_names(asking: bool = False, built_in: bool = False) -> list[str]:
    """The policy names to list: built-in ones under their own name (not `head`, bench's alias),
    only those that answer questions with `asking`, then the installed ones (not imported:
    a package's policy is taken to answer questions) unless `built_in`."""
    names = []
    for name in POLICIES.built_in():
        kind = POLICIES.get(name)
        if kind.name == name and (kind.asks or not asking):
            names.append(name)
    return names if built_in else [*names, *sorted(POLICIES.installed())]


def summaries() -> dict[str, str]:
    """Each name of `policy_names()` -> its one-line summary (installed ones imported to read
    it; one that cannot be imported says why)."""
    found: dict[str, str] = {}
    for name in policy_names():
        try:
            found[name] = policy_kind(name).summary
        except ConfigError as exc:
            found[name] = f"cannot be used: {exc.message}"
    return found


def in_bench() -> list[PolicyKind]:
    """The kinds of a bench that names no `--systems`: the built-in ones that say so, in order."""
    kinds: list[PolicyKind] = []
    for name in POLICIES.built_in():
        kind = policy_kind(name, "systems")
        if kind.in_bench and kind not in kinds:
            kinds.append(kind)
    return kinds
