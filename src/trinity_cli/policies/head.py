"""A head's policy: the coordinator reads the conversation and picks a member and a role
every turn (episode/loop.py), the head read by the backbone `backbone` (None: its own)."""

from __future__ import annotations

from dataclasses import dataclass

from trinity_cli.coordinator.head import Head
from trinity_cli.episode.loop import run_episode
from trinity_cli.messages import Transcript
from trinity_cli.policies.base import Engines, Episode


@dataclass
class HeadPolicy:
    head: Head
    backbone: str | None = None
    name = "head"

    def play(self, engines: Engines, episode: Episode) -> Transcript:
        e = episode
        return run_episode(e.task, engines.pool, engines.coordinator(self.head, self.backbone), max_turns=e.max_turns,
                           seed=e.seed, exclude=e.exclude, context=e.context, greedy=e.greedy, progress=e.progress,
                           token_budget=e.token_budget, cost_budget=e.cost_budget, kind=e.kind, examples=e.examples,
                           usable=e.usable)
