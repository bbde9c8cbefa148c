"""Policies by name, imported lazily ("module:Class", as backends/registry.py does), and the
one place that turns what a caller holds (a `Head`, a `FixedSchedule`, a `ConductorSpec`) into
the policy that plays it. A new policy is one module and one line in `POLICIES`."""

from __future__ import annotations

import importlib
from typing import Any

from trinity_cli.conductor.workflow import ConductorSpec
from trinity_cli.coordinator.head import Head
from trinity_cli.coordinator.policy import Coordinator
from trinity_cli.coordinator.reader import Reader, ReaderSource
from trinity_cli.episode.schedules import FixedSchedule
from trinity_cli.errors import ConfigError, did_you_mean
from trinity_cli.policies.base import Policy

POLICIES: dict[str, str] = {
    "head": "trinity_cli.policies.head:HeadPolicy",
    "fixed": "trinity_cli.policies.fixed:FixedPolicy",
    "conductor": "trinity_cli.policies.conductor:ConductorPolicy",
    "reader": "trinity_cli.policies.reader:ReaderPolicy",
}


def policy_class(name: str) -> Any:
    """The class of the policy named `name`; an unknown name answers with the close matches."""
    target = POLICIES.get(name)
    if target is None:
        raise ConfigError(f"unknown policy {name!r}", did_you_mean(name, POLICIES))
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)


def make(name: str, *args: Any, **kwargs: Any) -> Policy:
    policy: Policy = policy_class(name)(*args, **kwargs)
    return policy


def engine_of(head: Head | Reader, backbone: str | None = None, device: str = "auto") -> Coordinator | ReaderSource:
    """What reads the conversation for `head`, as `ask` and `serve` keep it between questions:
    the coordinator that reads a head with its backbone, or a reader's decision source (no
    backbone). Either has `head`, `backbone_ref` and `close()`."""
    if isinstance(head, Reader):
        return ReaderSource(head)
    return Coordinator(head, backbone_ref=backbone, device=device)


def policy_of(router: Any, backbone: str | None = None) -> Policy:
    """The policy that plays `router`: a head (read by `backbone`), a reader, a fixed schedule,
    the conductor's spec, or a policy already."""
    if isinstance(router, Head):
        return make("head", router, backbone)
    if isinstance(router, FixedSchedule):
        return make("fixed", router)
    if isinstance(router, ConductorSpec):
        return make("conductor", router)
    if isinstance(router, Reader):
        return make("reader", router)
    if callable(getattr(router, "play", None)):
        policy: Policy = router
        return policy
    raise ConfigError(f"nothing plays an episode with {type(router).__name__}",
                      "give a head, a fixed schedule, the conductor's spec or a policy")
