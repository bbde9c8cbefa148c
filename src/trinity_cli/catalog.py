"""What a user can name, from the registries themselves: pools, model kinds, policies, answer
kinds and task families, each built in or from an installed package (`trinity pools`); and a
pool file checked as a run would read it (`trinity pools --check FILE`).

An installed entry that cannot be used is listed with why and what to do, not raised, and
so is a pool file that cannot be read (the other pools are listed): the listing is where a
user looks to find out. Besides importing every entry, it tries what is cheap and needs no
pool: each package answer kind's `detect` on sample questions (answer_kinds/registry.listed)
and each package policy class made once (policies/registry.py); a backend is made when a pool
file of its kind is checked (`check_pool`), a task family's loader runs when its tasks are
asked for (it may read or download data), and either is named then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trinity_cli.answer_kinds import KINDS as ANSWER_KINDS
from trinity_cli.answer_kinds.registry import listed as listed_kind
from trinity_cli.backends import registry as backends
from trinity_cli.errors import TrinityError
from trinity_cli.policies import registry as policies
from trinity_cli.pool_config import PoolConfig, available_pools, load_pool
from trinity_cli.registry import Registry
from trinity_cli.tasks.registry import FAMILIES


@dataclass(frozen=True)
class Entry:
    """One name a registry holds: `source` "built in", or the package entry ("module:attr")."""

    name: str
    summary: str
    source: str = "built in"


@dataclass
class PoolListing:
    """A pool: its name, file, and members as (name, "kind, style[, conductor][, not a member]");
    `unreadable`: why the file cannot be read (then no members), else None."""

    name: str
    path: str
    members: list[tuple[str, str]]
    unreadable: str | None = None


@dataclass
class Catalog:
    pools: list[PoolListing] = field(default_factory=list)
    sections: dict[str, list[Entry]] = field(default_factory=dict)  # "model kinds", "policies", ...


def _first_sentence(text: str | None) -> str:
    return " ".join((text or "").split()).split(". ")[0].rstrip(".")


def _entries(registry: Registry[Any], names: list[str], summary: Callable[[Any], str],
             get: Callable[[str], Any] | None = None) -> list[Entry]:
    """Each of `names` with its `summary`, or why it cannot be used: `get` (default: the
    registry's) is what finds out, and may try the entry's own code."""
    installed = registry.installed()
    found = []
    for name in names:
        try:
            said = summary((get or registry.get)(name))
        except TrinityError as exc:
            why = registry.why(name)
            said = f"cannot be used: {why} ({registry.fix(name)})" if why else f"cannot be used: {exc.message}"
        found.append(Entry(name, said, installed.get(name, "built in")))
    return found


def _pool_listing(path: Path) -> PoolListing:
    """The pool file at `path` listed, or marked unreadable with the reason (its own file's
    name left off: the listing shows the path)."""
    try:
        return pool_listing(load_pool(str(path)), str(path))
    except TrinityError as exc:
        return PoolListing(path.stem, str(path), [], exc.message.removeprefix(f"{path}: "))


def pool_listing(config: PoolConfig, path: str) -> PoolListing:
    conductor = config.conductor_name
    return PoolListing(config.name, path, [
        (m.name, f"{m.kind}, {m.style}" + (", conductor" if m.name == conductor else "")
         + ("" if m.name in config.names else ", not a member")) for m in config.all_models])


def catalog() -> Catalog:
    """Every pool (bundled, then the user's; one that cannot be read marked so) and every name
    the registries hold."""
    found = Catalog([_pool_listing(path) for path in available_pools().values()])
    found.sections["model kinds"] = _entries(
        backends.MODEL_KINDS, backends.MODEL_KINDS.names(),
        lambda cls: cls.summary or _first_sentence(cls.__doc__ or cls.config_model.__doc__))
    installed = policies.POLICIES.installed()
    found.sections["policies"] = [Entry(name, summary, installed.get(name, "built in"))
                                  for name, summary in policies.summaries().items()]
    found.sections["answer kinds"] = _entries(ANSWER_KINDS, ANSWER_KINDS.names(), lambda kind: kind.summary,
                                              get=listed_kind)
    found.sections["task families"] = _entries(FAMILIES, FAMILIES.names(), lambda family: family.description)
    return found


def check_pool(ref: str) -> PoolListing:
    """The pool file (or name) `ref` read as a run reads it: every member checked against its
    kind's schema and its backend made (nothing loads); a problem raises ConfigError naming
    the file, the member and the field."""
    config = load_pool(ref)
    for member in config.all_models:
        backends.create(member)
    return pool_listing(config, config.source)
