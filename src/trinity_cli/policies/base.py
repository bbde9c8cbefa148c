"""The policy seam: one protocol for whatever plays an episode, what it plays with, and what a
policy's registered name stands for.

A `Policy` turns one question into a transcript: `play(engines, episode)`. Everything an
episode needs besides the policy is in `Episode` (the task, its seed, turn budget, how
decisions are taken, the answer kind and shown examples, the earlier conversation, the
members left out, budgets and progress). Its `kind` is the `AnswerKind` object (answer_kinds/base.py),
resolved once when the `Episode` is made from a name or from the task's wording; a policy, the
turn loop and the conductor read that object. `Engines` is where a policy finds the pool and, for
a head, the coordinator that reads it (evaluators/local.Runtime shares one backbone per
reference between episodes; `ask` gives the one it built). A policy is plain data that
pickles, so it travels to threads and Ray actors inside an `EpisodeSpec`.

Contract: the transcript a policy returns holds every call it made (each `Turn` with its
tokens, seconds and cost: bench and evolve count them), and it honours the episode's
`max_turns`, `exclude`, `usable`, budgets and `progress`. `LoopPolicy` gives all of that by
playing the turn loop (episode/loop.py) with a decision source of the policy's own: a policy
that subclasses it writes only `source(engines, episode)`.

A policy's name stands for a `PolicyKind` (kinds.py, registered in registry.py): how `ask`,
`serve` and `bench` make the policy of that name.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from trinity_cli.answer_kinds import resolve_kind
from trinity_cli.answer_kinds.base import AnswerKind, Checks
from trinity_cli.coordinator.head import Head
from trinity_cli.coordinator.policy import Coordinator
from trinity_cli.episode.loop import DecisionSource, run_episode
from trinity_cli.events import ProgressFn
from trinity_cli.messages import ChatMessage, Transcript
from trinity_cli.pool.pool import Pool


@dataclass(frozen=True)
class Episode:
    """One question to play (episode/loop.run_episode's parameters: its docstring).

    `kind`: given as an `AnswerKind`, a kind's name (a task item's `scorer`) or None (the kind
    the task's wording asks for); once made, always the resolved `AnswerKind`
    (answer_kinds.resolve_kind), which is what plays the episode."""

    task: str
    seed: int = 0
    max_turns: int = 5
    greedy: bool = False
    kind: AnswerKind | str | None = None
    examples: Checks | None = None
    context: Sequence[ChatMessage] = ()
    exclude: Collection[str] = ()
    usable: Collection[str] | None = None
    progress: ProgressFn | None = None
    token_budget: int | None = None
    cost_budget: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", resolve_kind(self.kind, self.task))


def play_loop(pool: Pool, source: DecisionSource, episode: Episode) -> Transcript:
    """`episode` played by the turn loop (episode/loop.py) with `source` deciding each turn."""
    e = episode
    return run_episode(e.task, pool, source, max_turns=e.max_turns, seed=e.seed, exclude=e.exclude,
                       context=e.context, greedy=e.greedy, progress=e.progress, token_budget=e.token_budget,
                       cost_budget=e.cost_budget, kind=e.kind, examples=e.examples, usable=e.usable)


class Engines(Protocol):
    """What a policy plays with: the pool, and the coordinator that reads a head."""

    @property
    def pool(self) -> Pool: ...

    def coordinator(self, head: Head, backbone: str | None = None) -> Coordinator: ...


class Policy(Protocol):
    """Whatever plays an episode (module docstring). `name`: its registry name."""

    name: str

    def play(self, engines: Engines, episode: Episode) -> Transcript: ...


class LoopPolicy:
    """A policy that plays the turn loop (episode/loop.py) with a decision source of its own:
    every call is a turn of the one transcript (counted by bench and evolve), and the
    episode's `max_turns`, `exclude`, budgets and progress hold, because the loop applies
    them. A subclass writes `source`; `max_turns` is its turn budget when none is given."""

    name: str = ""
    max_turns: int = 5

    def source(self, engines: Engines, episode: Episode) -> DecisionSource:
        raise NotImplementedError(f"{type(self).__name__} must define source(engines, episode)")

    def play(self, engines: Engines, episode: Episode) -> Transcript:
        return play_loop(engines.pool, self.source(engines, episode), episode)

