"""A reader's policy (coordinator/reader.py): members asked from the task alone, each at most
once, until the reader's score of what their replies show says stop; its final answer."""

from __future__ import annotations

from dataclasses import dataclass, replace

from trinity_cli.coordinator.reader import Reader, ReaderSource
from trinity_cli.messages import Transcript
from trinity_cli.policies.base import Engines, Episode, play_loop


@dataclass
class ReaderPolicy:
    reader: Reader
    name = "reader"

    def play(self, engines: Engines, episode: Episode) -> Transcript:
        source = ReaderSource(self.reader)
        return play_loop(engines.pool, source, replace(episode, max_turns=min(episode.max_turns, source.max_calls)))
