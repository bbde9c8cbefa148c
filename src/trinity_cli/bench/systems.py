"""The systems a bench compares (rows of its report), the episode seeds, and one
episode's result reduced to what the report needs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from trinity_cli import seeds
from trinity_cli.bench.options import ANSWER_CHARS, DERIVED, NEEDS_SINGLES, BenchOptions
from trinity_cli.conductor.workflow import ConductorSpec
from trinity_cli.coordinator.head import DEFAULT_DECISIONS, Head, turn_budget
from trinity_cli.coordinator.policy import resolve_head
from trinity_cli.coordinator.reader import Reader
from trinity_cli.episode.schedules import AGREE_TURNS, FixedSchedule, agree
from trinity_cli.errors import ConfigError, did_you_mean, option
from trinity_cli.evaluators.local import EpisodeSpec
from trinity_cli.messages import Role
from trinity_cli.pool.pool import Pool
from trinity_cli.tasks import TaskItem

# What a row's episodes are played by (EpisodeSpec.router): a head (read by the row's
# `backbone`), a reader, a fixed schedule, or the conductor.
Router = Head | Reader | FixedSchedule | ConductorSpec


@dataclass
class System:
    """One row of the report. `seeds` is how many episodes each item gets (random: one per
    seed); `router` is None for the rows built on the single runs: vote, best-per-task and
    the oracle, which play nothing, moa, whose aggregator episodes the runner plays once
    the single runs are done (its `model` is the aggregator, set then: bench/moa.py), and
    `sc:best@K`, whose member (the best single row) is set then too. The `conductor` row's
    router is a ConductorSpec and its `model` the conductor."""

    name: str
    kind: str
    model: str | None = None
    head: dict[str, Any] | None = None
    seeds: int = 1
    max_turns: int = 1
    stream: str = "fixed"
    router: Router | None = None
    backbone: str | None = None  # head rows: the coordinator backbone that reads the head (None: its own)
    greedy: bool = False

    def spec(self, item: TaskItem, seed: int) -> EpisodeSpec:
        """One episode of this row on `item` (a row with a router); a task that fits no
        usable context is scored wrong."""
        assert self.router is not None
        return EpisodeSpec(item=item, seed=seed, router=self.router, max_turns=self.max_turns, backbone=self.backbone,
                           greedy=self.greedy, overflow_scores_zero=True)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "model": self.model, "head": self.head,
                "seeds": self.seeds, "max_turns": self.max_turns, "greedy": self.greedy}


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


def _head_systems(options: BenchOptions, heads: list[tuple[str | None, Head | Reader]]) -> list[System]:
    """A row per head and decision mode: `head:<name>` in the default mode, `head:<name>/<mode>`
    in the other (`--decisions both`); both modes play the same episode seeds."""
    systems: list[System] = []
    taken: set[str] = set()
    for head_ref, head in heads:
        name = f"head:{head.manifest.get('name') or 'unnamed'}"
        base, k = name, 2
        while name in taken:
            name, k = f"{base}#{k}", k + 1
        taken.add(name)
        info = {"name": head.manifest.get("name"), "trained": head.learned, "ref": head_ref}
        for mode in options.decision_modes():
            row = name if mode == DEFAULT_DECISIONS else f"{name}/{mode}"
            # Left to the default, an untrained head is sampled (head.default_greedy).
            greedy = mode == "greedy" and (head.learned or options.decisions is not None)
            systems.append(System(row, "head", head=info, max_turns=turn_budget(options.max_turns, head),
                                  stream="head", router=head, backbone=options.backbone, greedy=greedy))
    return systems


def sc_source(models: list[str], model: str) -> FixedSchedule:
    """Self-consistency of `model`: its Worker replies from the task alone, one per turn."""
    return FixedSchedule(models, model, (Role.WORKER,), alone=True)


def _sc_systems(options: BenchOptions, models: list[str], budget: int) -> list[System]:
    """The `sc:<member>@K` rows of `options.sc` (`sc:best@K`'s member is set later)."""
    systems: list[System] = []
    for who, k in options.sc_specs():
        turns = k or budget
        if who not in ("all", "best") and who not in models:
            raise ConfigError(f"{option('sc')}: the pool has no model {who!r}", did_you_mean(who, models))
        for model in models if who == "all" else [who]:
            name = f"sc:{model}@{turns}"
            if all(s.name != name for s in systems):
                router = None if model == "best" else sc_source(models, model)
                systems.append(System(name, "sc", model=None if model == "best" else model, max_turns=turns,
                                      stream="fresh", router=router))
    return systems


def plan_systems(options: BenchOptions, pool: Pool) -> tuple[list[System], list[str]]:
    """The systems of a bench in run order (derived rows last), and notes for the report.
    Single runs are played whenever a reported row needs them (see `systems`). Turn
    budgets: see BenchOptions.max_turns."""
    pool_name, models = pool.config.name, pool.names
    kinds = options.kinds()
    heads, notes = _heads(options, pool_name, models) if "head" in kinds else ([], [])
    budget = turn_budget(options.max_turns, heads[0][1] if heads else None)  # self-loops and random
    systems: list[System] = []
    best_sc = "sc" in kinds and any(who == "best" for who, _ in options.sc_specs())
    if "single" in kinds or best_sc or any(k in kinds for k in NEEDS_SINGLES):
        systems += [System(f"single:{m}", "single", model=m, router=FixedSchedule(models, m, (Role.WORKER,)))
                    for m in models]
    if "selfloop" in kinds:
        systems += [System(f"selfloop:{m}", "selfloop", model=m, max_turns=budget,
                           router=FixedSchedule(models, m, (Role.WORKER, Role.VERIFIER))) for m in models]
    if "sc" in kinds:
        systems += _sc_systems(options, models, budget)
    if "agree" in kinds:
        # `ask --mode agree`'s budget, whatever the heads': the row is that command
        systems.append(System("agree", "agree", max_turns=options.max_turns or AGREE_TURNS, stream="fresh",
                              router=agree(models)))
    if options.random_seeds and "random" in kinds:
        untrained = resolve_head("untrained", pool_name, models, options.backbone)
        systems.append(System("random", "random", seeds=options.random_seeds, max_turns=budget,
                              stream="random", router=untrained, backbone=options.backbone))
    systems += _head_systems(options, heads)
    if "moa" in kinds:
        systems.append(System("moa", "moa", max_turns=len(models) + 1))
    if "conductor" in kinds:
        spec = ConductorSpec(options.conductor, options.conductor_depth)
        systems.append(System("conductor", "conductor", model=spec.name(pool), max_turns=spec.max_steps,
                              stream="conductor", router=spec))
    systems += [System(kind, kind) for kind in DERIVED if kind in kinds]
    return systems, notes

