"""A fixed schedule's policy (episode/schedules.py: single, self-loops, `sc`, `agree`, the
rotation a start imitates): the same loop as a head's, decided without a head."""

from __future__ import annotations

from dataclasses import dataclass

from trinity_cli.episode.loop import run_episode
from trinity_cli.episode.schedules import FixedSchedule
from trinity_cli.messages import Transcript
from trinity_cli.policies.base import Engines, Episode


@dataclass
class FixedPolicy:
    schedule: FixedSchedule
    name = "fixed"

    def play(self, engines: Engines, episode: Episode) -> Transcript:
        e = episode
        return run_episode(e.task, engines.pool, self.schedule, max_turns=e.max_turns, seed=e.seed, exclude=e.exclude,
                           context=e.context, greedy=e.greedy, progress=e.progress, token_budget=e.token_budget,
                           cost_budget=e.cost_budget, kind=e.kind, examples=e.examples, usable=e.usable)
