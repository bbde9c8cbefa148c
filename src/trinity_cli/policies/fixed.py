"""A fixed schedule's policy (episode/schedules.py: single, self-loops, `sc`, `agree`, the
rotation a start imitates): the same loop as a head's, decided without a head."""

from __future__ import annotations

from dataclasses import dataclass

from trinity_cli.episode.schedules import FixedSchedule
from trinity_cli.messages import Transcript
from trinity_cli.policies.base import Engines, Episode, play_loop


@dataclass
class FixedPolicy:
    schedule: FixedSchedule
    name = "fixed"

    def play(self, engines: Engines, episode: Episode) -> Transcript:
        return play_loop(engines.pool, self.schedule, episode)
