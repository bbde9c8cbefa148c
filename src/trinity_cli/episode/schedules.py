"""Fixed schedules: decision sources that need no head, played by `episode.run_episode`
exactly like a coordinator (bench's single, self-loop, sc and agree systems)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

import numpy as np

from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.answer_kinds.short import SHORT
from trinity_cli.errors import ConfigError, ContextOverflow
from trinity_cli.messages import ROLES, ChatMessage, Decision, Role, Turn
from trinity_cli.turns.source_rules import SourceRules


class FixedSchedule(SourceRules):
    """A decision source that needs no head: the members of `model` (one name, or several
    asked in turn, cycling) in the roles of `plan` taken in turn (cycling). It has what
    `run_episode` uses of a decision source (episode/loop.py's `DecisionSource`), so
    episodes run with it exactly as with a head.

    single:<m>   FixedSchedule(models, m, (Role.WORKER,)) with max_turns 1
    selfloop:<m> FixedSchedule(models, m, (Role.WORKER, Role.VERIFIER))
    sc:<m>@k     FixedSchedule(models, m, (Role.WORKER,), alone=True) with max_turns k:
                 the greedy reply and k-1 fresh attempts, each from the task alone,
                 settled by plurality (turns/settle.py)
    agree        agree(models): every member in pool order, round-robin, from the task
                 alone, until two answers agree (code: one passes its examples); on a kind
                 settled by a Verifier's verdict (answer_kinds/base.py `agree_by_verdict`:
                 free-form) it is draft, judge, revise instead: the first usable member writes, the next one
                 judges the latest answer, the first revises, ... until an ACCEPT

    `alone`: every call is made from the task alone (Decision.alone); `stop_when_agreed`:
    the episode ends at the first agreement (turns/source_rules.py). Members `run_episode` masks
    (their context cannot hold the task) are skipped; with none left, ContextOverflow.
    """

    stop_when_checks_settle = False  # rule 5 is a head's (turns/source_rules.py)

    def __init__(self, models: Sequence[str], model: str | Sequence[str], plan: Sequence[Role],
                 alone: bool = False, stop_when_agreed: bool = False) -> None:
        order = [model] if isinstance(model, str) else list(model)
        unknown = [m for m in order if m not in models]
        if unknown or not order:
            raise ConfigError(f"no model {unknown[0]!r} among {list(models)}" if unknown
                              else "a fixed schedule needs at least one model")
        if not plan:
            raise ConfigError("a fixed schedule needs at least one role")
        self.models = list(models)
        self.order = order
        self.plan = tuple(plan)
        self.alone = alone
        self.stop_when_agreed = stop_when_agreed

    def can_pick(self, models: Sequence[str], excluded: Collection[str]) -> bool:
        """Rule 6 (turns/source_rules.py): whether a member of this schedule is left."""
        return any(m not in excluded for m in self.order)

    def decide(
        self,
        task: str,
        turns: Sequence[Turn],
        rng: np.random.Generator,
        excluded: Collection[str] = (),
        context: Sequence[ChatMessage] = (),
        greedy: bool = False,
        kind: AnswerKind = SHORT,
    ) -> Decision:
        usable = [m for m in self.order if m not in excluded]
        if not usable:
            who = f"model {self.order[0]!r} cannot" if len(self.order) == 1 else "no model of this schedule can"
            raise ContextOverflow(f"{who} hold this task in its context, or answer it in its style "
                                  f"(a {kind.name} answer: answer_kinds/)")
        # `agree` on a kind settled by a verdict (answer_kinds/base.py `agree_by_verdict`):
        # draft, judge, revise.
        if self.stop_when_agreed and kind.agree_by_verdict:
            drafts = len(turns) % 2 == 0
            model, role = usable[0 if drafts else 1 % len(usable)], Role.WORKER if drafts else Role.VERIFIER
            return Decision(model=model, role=role, model_probs=[float(m == model) for m in self.models],
                            role_probs=[float(r is role) for r in ROLES], alone=False)
        model = usable[len(turns) % len(usable)]
        role = self.plan[len(turns) % len(self.plan)]
        return Decision(
            model=model,
            role=role,
            model_probs=[float(m == model) for m in self.models],
            role_probs=[float(r is role) for r in ROLES],
            alone=self.alone,
        )


# `agree`'s turn budget in ask and serve when none is given: the budget it is validated and
# benchmarked at beside the shipped head (the head's max_turns).
AGREE_TURNS = 4


def agree(models: Sequence[str], order: Sequence[str] | None = None) -> FixedSchedule:
    """bench's `agree` row (FixedSchedule's docstring): the pool's `models`, asked in `order`
    (default: all of them, in pool order)."""
    return FixedSchedule(models, order if order is not None else models, (Role.WORKER,), alone=True,
                         stop_when_agreed=True)


def sc(models: Sequence[str], model: str) -> FixedSchedule:
    """bench's `sc:<model>@K` row (FixedSchedule's docstring): `model`'s Worker replies from the
    task alone, one per turn."""
    return FixedSchedule(models, model, (Role.WORKER,), alone=True)


class DraftSchedule(FixedSchedule):
    """Drafts until one passes (bench/drafts.py's `until-pass@N/<fallback>`, N the episode's
    `max_turns`): the members of `order` asked in turn, each from the task alone (a member asked
    again makes a fresh attempt: the matrix's calls, in bench/drafts.py `drafts_of`'s order); the
    episode stops at the first draft that passes the request's stated checks, or at the first
    draft when the request states none trinity reads, unless it degenerates (turns/choose.py
    `Draft`: repeats past the limits, cut at the token cap); without a passing draft the answer
    is the `fallback` rule's pick among the drafts that do not degenerate (all of them when
    every one does; `pick`), its repeats trimmed (`Draft.printed`)."""

    stop_reason = "drafted"

    def __init__(self, models: Sequence[str], order: Sequence[str], fallback: str = "first",
                 told: bool = False) -> None:
        from trinity_cli.turns.choose import CHOOSERS

        if fallback not in CHOOSERS:
            raise ConfigError(f"unknown way of choosing among drafts {fallback!r}",
                              hint="use one of " + ", ".join(CHOOSERS))
        super().__init__(models, order, (Role.WORKER,), alone=True)
        self.fallback = fallback
        self.told = told

    def decide(self, task: str, turns: Sequence[Turn], rng: np.random.Generator, excluded: Collection[str] = (),
               context: Sequence[ChatMessage] = (), greedy: bool = False, kind: AnswerKind = SHORT) -> Decision:
        """The next member in `order`; with `told`, a draft after one that failed its checks is
        that draft redrawn, told what failed (`Decision.told`; episode/loop.py `told_messages`
        reads what failed). Every draft after the first follows one that failed (`stop` ends the
        episode at the first that does not), unless that call itself failed."""
        decision = super().decide(task, turns, rng, excluded, context, greedy, kind)
        return replace(decision, told=True) if self.told and turns and turns[-1].error is None else decision

    def stop(self, turns: Sequence[Turn], kind: AnswerKind) -> int | None:
        from trinity_cli.turns.choose import Draft

        last = turns[-1] if turns else None
        if last is None or last.error is not None:
            return None
        return last.index if Draft.of(last).passed is not False else None

    def final(self, turns: Sequence[Turn], kind: AnswerKind) -> str | None:
        from trinity_cli.turns.choose import Draft, pick

        drafts = [Draft.of(t) for t in turns if t.error is None and t.reply.strip()]
        if not drafts:
            return None
        return drafts[pick(self.fallback, drafts)].printed
