"""A head's policy: the coordinator reads the conversation and picks a member and a role
every turn (episode/loop.py), the head read by the backbone `backbone` (None: its own)."""

from __future__ import annotations

from dataclasses import dataclass

from trinity_cli.coordinator.head import Head
from trinity_cli.messages import Transcript
from trinity_cli.policies.base import Engines, Episode, play_loop


@dataclass
class HeadPolicy:
    head: Head
    backbone: str | None = None
    name = "head"

    def play(self, engines: Engines, episode: Episode) -> Transcript:
        return play_loop(engines.pool, engines.coordinator(self.head, self.backbone), episode)
