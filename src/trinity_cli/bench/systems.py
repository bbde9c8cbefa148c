"""The systems a bench compares (rows of its report), the episode seeds, and one
episode's result reduced to what the report needs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from trinity_cli import seeds
from trinity_cli.bench.options import ANSWER_CHARS, BenchOptions
from trinity_cli.coordinator.head import Head, turn_budget
from trinity_cli.coordinator.policy import resolve_head
from trinity_cli.coordinator.reader import Reader
from trinity_cli.evaluators.local import EpisodeSpec
from trinity_cli.policies.bench_rows import singles_kind
from trinity_cli.policies.kinds import BenchPlan, PolicyKind, Row
from trinity_cli.pool.pool import Pool
from trinity_cli.tasks import TaskItem

# A row of the report (policies/kinds.py: each policy kind makes its own rows).
System = Row


def spec(system: Row, item: TaskItem, seed: int) -> EpisodeSpec:
    """One episode of `system` on `item` (a row with a policy); a task that fits no usable
    context is scored wrong."""
    assert system.policy is not None
    return EpisodeSpec(item=item, seed=seed, policy=system.policy, max_turns=system.max_turns, greedy=system.greedy,
                       overflow_scores_zero=True)


@dataclass
class EpisodeResult:
    """One episode of one system on one item, reduced to what the report needs."""

    system: str
    task: str
    item: str
    seed: int
    reward: float
    answer: str | None
    turns: list[tuple[str, str]]
    stop_reason: str
    tokens: int
    wall_s: float
    cost_usd: float | None
    cached: bool
    error: str | None = None
    workflow: dict[str, Any] | None = None  # conductor rows: `workflow_summary`
    failed: bool = False  # it made calls and every one failed (its members' backends raised: Turn.error)

    @property
    def key(self) -> str:
        return f"{self.task}/{self.item}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["turns"] = [list(t) for t in self.turns]
        data["answer"] = self.answer[:ANSWER_CHARS] if self.answer else self.answer
        return data


def workflow_summary(workflow: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the report needs of a conductor episode's workflow record (conductor/run.py):
    {"topology", "steps", "repaired": some entry was read leniently, "fallback": it was
    refused and the agree procedure ran, "reasked": its last step was asked again for a
    missing answer, "constrained": it was written under its JSON schema}; None outside
    conductor mode."""
    if workflow is None:
        return None
    return {"topology": workflow["topology"], "steps": len(workflow["steps"]), "repaired": bool(workflow["repairs"]),
            "fallback": workflow["fallback"] is not None,
            "reasked": any(step.get("reasked") for step in workflow["steps"]),
            "constrained": bool(workflow.get("constrained"))}


def episode_seed(seed: int, stream: str, item_key: str) -> int:
    """The episode seed of an item in a stream (see the module docstring)."""
    return seeds.seed(f"{seed}:{stream}:{item_key}")


def _heads(options: BenchOptions, pool_name: str,
           models: list[str]) -> tuple[list[tuple[str | None, Head | Reader]], list[str]]:
    """The heads to benchmark with the refs they were named by (None: the shipped head)."""
    if options.heads:
        return [(ref, resolve_head(ref, pool_name, models, options.backbone)) for ref in options.heads], []
    head = resolve_head(None, pool_name, models, options.backbone)
    if head.learned:
        return [(None, head)], []
    return [], [f"no trained head ships for pool {pool_name!r}, so no head was benchmarked "
                "(an untrained head routes like `random`); evolve one and pass --head"]


def plan_systems(options: BenchOptions, pool: Pool) -> tuple[list[Row], list[str]]:
    """The rows of a bench in run order (the policies registry's order: rows derived from the
    single runs last), each owned by the kind that made it (policies/kinds.py: what bench does
    with a row is its kind's to say), and notes for the report. The single runs
    (`singles_kind`) are played whenever a reported row is built on them (its kind
    `needs_singles`, or it waits for their best member: `by_best_single`), reported only when
    asked for. Turn budgets: see BenchOptions.max_turns."""
    kinds = options.kinds()
    heads, notes = _heads(options, pool.config.name, pool.names) if any(k.takes_head for k in kinds) else ([], [])
    plan = BenchPlan(pool, options, heads, turn_budget(options.max_turns, heads[0][1] if heads else None))
    rows = [_owned(row, kind) for kind in kinds for row in kind.rows(plan)]
    singles = singles_kind()
    if singles not in kinds and any(row.owner.needs_singles or row.by_best_single for row in rows):
        rows = [*(_owned(row, singles, reported=False) for row in singles.rows(plan)), *rows]
    return rows, notes


def _owned(row: Row, kind: PolicyKind, reported: bool = True) -> Row:
    row.owner = kind
    row.reported = row.reported and reported
    return row
