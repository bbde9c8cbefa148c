"""The policy kinds that are rows of bench's report and answer no question (kinds.py's
`PolicyKind`, `asks` False), registered by name in registry.py as the others are: each member
alone (`single`, the single runs), each member as worker and verifier in turn (`selfloop`),
self-consistency (`sc`), random routing (`random`), and the rows built on the single runs:
mixture-of-agents (`moa`, played by the best single member once they are in) and those computed
from them with no call of their own (`vote`, `best-per-task`, `oracle`: `derive`), with the best
member they pick (`best_member`, `best_per_task`).

Light on purpose, as kinds.py is: what a row plays is imported when its rows are made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from trinity_cli.errors import ConfigError, option
from trinity_cli.messages import Role
from trinity_cli.policies.kinds import BenchPlan, Derived, PolicyKind, Row, Run, SingleRun, head_policy

if TYPE_CHECKING:
    from trinity_cli.policies.base import Policy
    from trinity_cli.tasks.items import TaskItem


class RandomKind(PolicyKind):
    name = "random"
    summary = "an untrained head: a member and a role drawn at random every turn (one row per --random-seeds)"
    asks = False
    in_bench = True
    routes = True

    def rows(self, plan: BenchPlan) -> list[Row]:
        from trinity_cli.coordinator.policy import resolve_head

        if not plan.options.random_seeds:
            return []
        pool = plan.pool
        untrained = resolve_head("untrained", pool.config.name, pool.names, plan.options.backbone)
        return [Row("random", "random", seeds=plan.options.random_seeds, max_turns=plan.budget, stream="random",
                    policy=head_policy(untrained, plan.options.backbone), stream_per_seed=True)]


class SingleKind(PolicyKind):
    name = "single"
    summary = "each member alone, one reply (a row per member)"
    asks = False
    in_bench = True
    single_runs = True

    def rows(self, plan: BenchPlan) -> list[Row]:
        from trinity_cli.policies.fixed import schedule_policy

        models = plan.pool.names
        return [Row(f"single:{m}", "single", model=m, policy=schedule_policy(models, m, (Role.WORKER,)))
                for m in models]


class SelfLoopKind(PolicyKind):
    name = "selfloop"
    summary = "each member alone as worker and verifier in turn (a row per member)"
    asks = False
    in_bench = True

    def rows(self, plan: BenchPlan) -> list[Row]:
        from trinity_cli.policies.fixed import schedule_policy

        models = plan.pool.names
        return [Row(f"selfloop:{m}", "selfloop", model=m, max_turns=plan.budget,
                    policy=schedule_policy(models, m, (Role.WORKER, Role.VERIFIER))) for m in models]


class ScKind(PolicyKind):
    name = "sc"
    summary = "self-consistency: K replies of one member, each from the task alone, settled by plurality (--sc)"
    asks = False
    in_bench = True

    def rows(self, plan: BenchPlan) -> list[Row]:
        """The `sc:<member>@K` rows of `--sc` (`sc:best@K` waits for the single runs: its member
        is their best, `played_by`)."""
        from trinity_cli.errors import did_you_mean
        from trinity_cli.policies.fixed import sc_policy

        models = plan.pool.names
        rows: list[Row] = []
        for who, k in plan.options.sc_specs():
            turns = k or plan.budget
            if who not in ("all", "best") and who not in models:
                raise ConfigError(f"{option('sc')}: the pool has no model {who!r}", did_you_mean(who, models))
            for model in models if who == "all" else [who]:
                name = f"sc:{model}@{turns}"
                if all(r.name != name for r in rows):
                    best = model == "best"
                    rows.append(Row(name, "sc", model=None if best else model, max_turns=turns, stream="fresh",
                                    policy=None if best else sc_policy(models, model), by_best_single=best))
        return rows

    def played_by(self, row: Row, member: str, models: Sequence[str]) -> Policy:
        from trinity_cli.policies.fixed import sc_policy

        return sc_policy(models, member)


def best_member(singles: Mapping[str, Sequence[SingleRun]], task: str | None = None) -> str | None:
    """The member whose single runs (on `task`; None: on every task) have the best mean
    reward, ties going to the first in `singles`' order (pool order); None when no member has
    a run there."""
    scores = []
    for i, (member, runs) in enumerate(singles.items()):
        mine = [r.reward for r in runs if task is None or r.task == task]
        if mine:
            scores.append((sum(mine) / len(mine), -i, member))
    return max(scores)[2] if scores else None



def singles_kind() -> PolicyKind:
    """The kind whose rows are the single runs (`single_runs`), which bench plays whenever a
    row it reports is built on them."""
    return SINGLE


class BuiltOnSingles(PolicyKind):
    """A bench row built on the single runs, which are then played: mixture-of-agents (its
    aggregator's episodes, bench/moa.py) or computed from them with no further call (vote,
    best-per-task, the oracle: `derive`)."""

    asks = False
    in_bench = True
    needs_singles = True

    def __init__(self, name: str, summary: str) -> None:
        self.name = name
        self.summary = summary

    def rows(self, plan: BenchPlan) -> list[Row]:
        return [Row(self.name, self.name)]


def _by_item(singles: Mapping[str, Sequence[Run]]) -> dict[str, list[Run]]:
    """Item key -> the single runs on it, in pool order."""
    by_item: dict[str, list[Run]] = {}
    for runs in singles.values():
        for run in runs:
            by_item.setdefault(run.key, []).append(run)
    return by_item


class OracleKind(BuiltOnSingles):
    """An item counts as solved when any single run solved it; it costs every single run."""

    def derive(self, row: Row, items: Sequence[TaskItem],
               singles: Mapping[str, Sequence[Run]]) -> list[Derived[Run]]:
        by_item = _by_item(singles)
        return [Derived(item.task, item.key, 1.0 if any(r.reward >= 1.0 for r in runs) else 0.0, tuple(runs))
                for item in items for runs in [by_item.get(item.key, [])]]


class VoteKind(BuiltOnSingles):
    """The plurality of the single answers of an item, each read as its kind reads it (code by its
    normalised text); a tie goes to the group holding the earliest member in pool order, whose
    answer is scored. It costs every single run."""

    def derive(self, row: Row, items: Sequence[TaskItem],
               singles: Mapping[str, Sequence[Run]]) -> list[Derived[Run]]:
        from trinity_cli.answer_kinds import score_item

        by_item = _by_item(singles)
        out = []
        for item in items:
            runs = by_item.get(item.key, [])
            groups: dict[str, list[Run]] = {}
            for run in runs:
                key = _vote_key(run.answer, item)
                if key is not None:
                    groups.setdefault(key, []).append(run)
            reward = 0.0
            if groups:
                # max() keeps the first of equal counts, and groups are in pool order of first member.
                winner = max(groups.values(), key=len)
                reward = float(score_item(item, winner[0].answer or ""))
            out.append(Derived(item.task, item.key, reward, tuple(runs)))
        return out


def _vote_key(answer: str | None, item: TaskItem) -> str | None:
    """What a member's single answer counts as in the vote (its kind's `vote_key`); None: no
    readable answer, or a scorer that is no answer kind's."""
    from trinity_cli.answer_kinds import KINDS, answer_kind

    if not answer or item.scorer not in KINDS:
        return None
    return answer_kind(item.scorer).vote_key(answer, item.reference)


class BestPerTaskKind(BuiltOnSingles):
    """Each task's best single member (`best_member`, ties: pool order), picked with the bench's
    own labels: on each item of a task, that member's single run itself."""

    def derive(self, row: Row, items: Sequence[TaskItem],
               singles: Mapping[str, Sequence[Run]]) -> list[Derived[Run]]:
        picks = best_per_task(singles, [item.task for item in items])
        return [Derived(run.task, run.key, run.reward, (run,), is_run=True)
                for member, runs in singles.items() for run in runs if picks.get(run.task) == member]


def best_per_task(singles: Mapping[str, Sequence[SingleRun]], tasks: Sequence[str]) -> dict[str, str]:
    """Task -> the member whose single runs scored best on it (`best_member`), for each of
    `tasks` some member has a run on."""
    picks = {}
    for task in dict.fromkeys(tasks):
        member = best_member(singles, task)
        if member is not None:
            picks[task] = member
    return picks


class MoaKind(BuiltOnSingles):
    """Mixture-of-agents: once the single runs are in, their best member aggregates every
    member's single answer to an item as a Worker (bench/moa.py)."""

    aggregates_singles = True

    def rows(self, plan: BenchPlan) -> list[Row]:
        return [Row(self.name, self.name, max_turns=len(plan.pool.names) + 1, by_best_single=True)]

    def played_by(self, row: Row, member: str, models: Sequence[str]) -> Policy:
        from trinity_cli.policies.fixed import schedule_policy

        return schedule_policy(models, member, (Role.WORKER,))


RANDOM = RandomKind()
SINGLE = SingleKind()
SELFLOOP = SelfLoopKind()
SC = ScKind()
MOA = MoaKind("moa", "mixture-of-agents: one member aggregates every member's single reply")
VOTE = VoteKind("vote", "the plurality of the single replies (no further call)")
BEST_PER_TASK = BestPerTaskKind("best-per-task", "each task's best single member (chosen on the bench's own labels)")
ORACLE = OracleKind("oracle", "right when any single reply is right (an upper bound)")
