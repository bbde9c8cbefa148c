"""The conductor's policy (conductor/run.py): one model writes the whole workflow and trinity
runs it; the episode's turn budget, seed and decision mode do not apply."""

from __future__ import annotations

from dataclasses import dataclass

from trinity_cli.conductor.run import run_conductor
from trinity_cli.conductor.workflow import ConductorSpec
from trinity_cli.messages import Transcript
from trinity_cli.policies.base import Engines, Episode


@dataclass
class ConductorPolicy:
    spec: ConductorSpec
    name = "conductor"

    def play(self, engines: Engines, episode: Episode) -> Transcript:
        e = episode
        return run_conductor(e.task, engines.pool, self.spec, exclude=e.exclude, context=e.context, kind=e.kind,
                             examples=e.examples, progress=e.progress, usable=e.usable)
