"""A fixed schedule's policy (episode/schedules.py: single, self-loops, `sc`, `agree`, the
rotation a start imitates): the same loop as a head's, decided without a head."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trinity_cli.episode.schedules import FixedSchedule, sc
from trinity_cli.messages import Role, Transcript
from trinity_cli.policies.base import Engines, Episode, play_loop


@dataclass
class FixedPolicy:
    schedule: FixedSchedule
    name = "fixed"

    def play(self, engines: Engines, episode: Episode) -> Transcript:
        return play_loop(engines.pool, self.schedule, episode)


def schedule_policy(models: Sequence[str], model: str, plan: Sequence[Role], alone: bool = False) -> FixedPolicy:
    """`model` of the pool's `models` in the roles of `plan` taken in turn (bench's single and
    self-loop rows: FixedSchedule's docstring)."""
    return FixedPolicy(FixedSchedule(models, model, tuple(plan), alone=alone))


def sc_policy(models: Sequence[str], model: str) -> FixedPolicy:
    """Self-consistency of `model` (episode/schedules.sc)."""
    return FixedPolicy(sc(models, model))
