"""`trinity bench`: the coordinator against every model of its pool, random routing and the
oracle, on held-out items, in one run.

Systems (names as they appear in every output):
    single:<model>     the model alone, one Worker turn
    selfloop:<model>   the model alone for the same turn budget: Worker, Verifier, Worker, …
                       (itself each time), stopping when its Verifier says ACCEPT
    random             uniform model and role each turn (the untrained head), over
                       `random_seeds` seeds; each item's numbers are its means over the
                       seeds. Always sampled: `greedy` does not apply to it (the argmax of
                       a uniform head is the first model and role, every time)
    head:<name>        each head given, sampling its decisions (argmax with `greedy`)
    vote               majority over the members' single answers (read as the task's scorer
                       reads them; code by its normalised text); a tie goes to the group holding
                       the earliest member in pool order. Free: it plays nothing new.
    best-per-task      for each task, the single member best on that task in this bench (ties:
                       pool order): what perfect task-aware routing to one member would score.
                       It picks with the test labels, so it is a reference, not a system.
    oracle             an item counts as solved if any single model solved it alone: the
                       best a per-question pick of one model for one Worker turn could do.
                       Not an upper bound: multi-turn systems (self-loops, heads, random)
                       can solve items no single model solves in one turn

Fixed routing (single, self-loop) goes through `episode.run_episode` like everything
else, with a `FixedSchedule` in place of the coordinator, so prompts, context fitting,
verdicts and the episode rules are exactly those of `trinity ask`. Every system shares one
pool and its rollout cache: the self-loop's first turn is the single run's only turn, and a
re-run (or a run resumed after Ctrl-C) makes no call that was made before.

Episode seeds are a function of (--seed, system, item), never of the item's position, so
adding items leaves the other episodes alone:
    seed = first 4 bytes (little endian) of sha256("<seed>:<stream>:<task>/<id>")
with stream "fixed" (single, self-loop: their decisions use no randomness), "random:<r>"
for random seed r, and "head" for every head (all heads see the same seeds).

Metrics of a system, overall and per task (`Metrics` below), over items: accuracy with a
95% Wilson interval, mean turns, mean pool calls, mean tokens (prompt + completion), mean wall seconds
and mean cost per question. Wall seconds are what the pool calls took when they were made
(a cached reply keeps the latency measured when it was computed, so a warm re-run reports
the same) plus coordinator seconds. Cost is USD for priced models, None when none is priced.
The oracle and vote have no turns; their pool calls, tokens, seconds and cost are the sums
over all single runs of the item (what it takes to obtain); best-per-task's are those of the
single run it picks. A system with several seeds (random) is first reduced to one row per
item, each number the mean over that item's seeds, so its `n` counts items and its interval
reflects how many questions were asked, not how many episodes: seeds of one item are not
independent samples. Its `correct` (the sum of the items' mean rewards) may be fractional;
the Wilson interval takes it as is, which is conservative, since a mean of rewards in
[0, 1] has at most a 0/1 reward's variance.

`systems` (`--systems`) keeps only some kinds of row; vote, best-per-task and oracle need
the single runs, which are then played even when `single` itself is not listed (and not
reported).

Run directory (`runs/run-N/`):
    bench.json      the summary below plus "episodes" (one compact record per episode)
    report.md       the same numbers as Markdown tables
    chart.png       accuracy per system (overall and per task) with 95% CI error bars
    episodes.jsonl  one line per episode: {"system", "task", "item", "seed", "reward",
                    "transcript": Transcript.to_dict()}
    run.json        {"kind": "bench", "title", "summary": <summary>, "files": [...]}, written
                    last, so an interrupted bench leaves no run behind

bench.json (format "trinity-bench/1"):
    {"format", "run", "options": BenchOptions as a dict,
     "pool": {"name", "models", "source"}, "prompt_version",
     "tasks": [task names in mix order], "items": [{"task", "id"}, ...],
     "systems": [{"name", "kind": "single"|"selfloop"|"random"|"head"|"vote"|"best-per-task"|"oracle",
                  "model": str|null, (best-per-task: {task: model}) "head": {"name", "trained", "ref"}|null,
                  "seeds": episodes per item, "max_turns"}],
     "results": {system: {"overall": Metrics, "per_task": {task: Metrics}}},
     "gaps": {system: {"overall": Gap, "per_task": {task: Gap}}}     (random and heads)
     "selection": {system: {"overall": Share, "per_task": {task: Share}}}   (random and heads)
     "per_item": {system: {"task/id": reward}}     (random: mean over its seeds)
     "best_per_task": {task: the member best-per-task picks there},
     "stats": {"pool_calls": all of this run, "cache_hits": of those, served by the cache,
               "backend_calls": of those, answered by a model, "backend_s": their seconds,
               "wall_s": the whole bench, "parallel": episodes played at once},
     "notes": [str, ...],
     "episodes": [{"system", "task", "item", "seed", "reward", "answer" (first 300 chars),
                   "turns": [[model, acting role], ...], "stop_reason", "tokens", "wall_s",
                   "cost_usd", "cached": every turn came from the cache, "error": null or
                   why the episode could not run}, ...]}
    Metrics = {"n" (items), "correct", "accuracy", "ci_low", "ci_high", "mean_turns",
               "mean_pool_calls", "mean_tokens", "mean_wall_s", "mean_cost_usd"}
    Gap     = {"best_single": system name, "vs_best_single": accuracy difference,
               "vs_oracle": accuracy difference}       (negative: the system is behind)
    Share   = {"models": {model: share of turns}, "roles": {role: share of turns}}
An episode that cannot run because the item does not fit the model's context is scored
wrong, with "error" saying so.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli import roles, tasks
from trinity_cli.config import load_pool
from trinity_cli.coordinator.head import Head
from trinity_cli.coordinator.policy import Coordinator, resolve_head
from trinity_cli.errors import ConfigError, ContextOverflow, did_you_mean
from trinity_cli.evaluate import EpisodeOutcome, EpisodeSpec, Evaluator, Runtime, make_evaluator
from trinity_cli.messages import ROLES, ChatMessage, Decision, Role, Turn
from trinity_cli.pool import Pool, open_pool
from trinity_cli.store import BenchRun, RunStore
from trinity_cli.tasks import MixEntry

BENCH_FORMAT = "trinity-bench/1"
DEFAULT_TASKS = "gsm8k:test:50,arc-challenge:test:50,mbpp:test:50"
SYSTEM_KINDS = ("single", "selfloop", "random", "head", "vote", "best-per-task", "oracle")
DERIVED = ("vote", "best-per-task", "oracle")  # computed from the single runs
Z95 = 1.959963984540054  # two-sided 95% normal quantile
ANSWER_CHARS = 300
FILES = BenchRun.FILES

ProgressFn = Callable[[str, dict[str, Any]], None]


# -- options ---------------------------------------------------------------------------
@dataclass
class BenchOptions:
    """What `trinity bench` runs: `heads` None means the shipped default head when it fits
    the pool (none otherwise); `random_seeds` 0 leaves random routing out."""

    pool: str | None = None
    tasks: str = DEFAULT_TASKS
    heads: Sequence[str] | None = None
    max_turns: int = 5
    random_seeds: int = 3
    seed: int = 0
    greedy: bool = False
    backbone: str | None = None
    device: str = "auto"
    systems: Sequence[str] | None = None

    def kinds(self) -> list[str]:
        """The kinds of row to report (`systems`, default all), in SYSTEM_KINDS order."""
        wanted = set(self.systems) if self.systems else set(SYSTEM_KINDS)
        return [k for k in SYSTEM_KINDS if k in wanted]

    def validate(self) -> list[MixEntry]:
        """Check the options; return the parsed mix, refusing splits that are not held out."""
        for kind in self.systems or ():
            if kind not in SYSTEM_KINDS:
                raise ConfigError(f"--systems: unknown kind {kind!r}", did_you_mean(kind, SYSTEM_KINDS))
        if self.max_turns < 1:
            raise ConfigError(f"--max-turns must be at least 1, got {self.max_turns}")
        if self.random_seeds < 0:
            raise ConfigError(f"--random-seeds must be 0 or more, got {self.random_seeds}")
        return held_out_mix(self.tasks)


def held_out_mix(text: str) -> list[MixEntry]:
    """Parse a mix for benchmarking: train splits (and `all` of a built-in task, which
    contains its train split) are refused, since heads are evolved on them."""
    entries = tasks.parse_mix(text)
    for entry in entries:
        count = f":{entry.n}" if entry.n is not None else ""
        if entry.split == "train":
            raise ConfigError(
                f"--tasks {entry}: bench measures held-out accuracy, and heads are evolved on train items",
                f"use {entry.task}:test{count}",
            )
        if entry.split == "all" and not entry.task.startswith("file:"):
            raise ConfigError(
                f"--tasks {entry}: 'all' includes the train split that heads are evolved on",
                f"use {entry.task}:test{count}",
            )
    return entries


# -- fixed routing -----------------------------------------------------------------------
class FixedSchedule:
    """A decision source that needs no head: model `model` every turn, in the roles of
    `plan` taken in turn (cycling). It has the two members `run_episode` uses of a
    coordinator, `models` and `decide`, so episodes run with it exactly as with a head.

    single:<m>   FixedSchedule(models, m, (Role.WORKER,)) with max_turns 1
    selfloop:<m> FixedSchedule(models, m, (Role.WORKER, Role.VERIFIER))
    """

    def __init__(self, models: Sequence[str], model: str, plan: Sequence[Role]) -> None:
        if model not in models:
            raise ConfigError(f"no model {model!r} among {list(models)}")
        if not plan:
            raise ConfigError("a fixed schedule needs at least one role")
        self.models = list(models)
        self.model = model
        self.plan = tuple(plan)

    def decide(
        self,
        task: str,
        turns: Sequence[Turn],
        rng: np.random.Generator,
        excluded: Collection[str] = (),
        context: Sequence[ChatMessage] = (),
        greedy: bool = False,
    ) -> Decision:
        if self.model in excluded:
            raise ContextOverflow(f"model {self.model!r} cannot hold this task in its context")
        role = self.plan[len(turns) % len(self.plan)]
        return Decision(
            model=self.model,
            role=role,
            model_probs=[float(m == self.model) for m in self.models],
            role_probs=[float(r is role) for r in ROLES],
        )

    def close(self) -> None:
        """Nothing to free (same interface as `Coordinator`)."""


DecisionSource = Coordinator | FixedSchedule


@dataclass
class System:
    """One row of the report. `seeds` is how many episodes each item gets (random: one per
    seed); `source` is None only for the oracle, which runs nothing itself."""

    name: str
    kind: str
    model: str | None = None
    head: dict[str, Any] | None = None
    seeds: int = 1
    max_turns: int = 1
    stream: str = "fixed"
    source: DecisionSource | None = None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "model": self.model, "head": self.head,
                "seeds": self.seeds, "max_turns": self.max_turns}


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

    @property
    def key(self) -> str:
        return f"{self.task}/{self.item}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["turns"] = [list(t) for t in self.turns]
        data["answer"] = self.answer[:ANSWER_CHARS] if self.answer else self.answer
        return data


def episode_seed(seed: int, stream: str, item_key: str) -> int:
    """The episode seed of an item in a stream (see the module docstring)."""
    digest = hashlib.sha256(f"{seed}:{stream}:{item_key}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


# -- statistics --------------------------------------------------------------------------
def wilson_interval(correct: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for `correct` successes out of `n`; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if correct <= 0 else max(0.0, centre - half)
    high = 1.0 if correct >= n else min(1.0, centre + half)  # exact at the ends, not 1 - 1e-16
    return low, high


@dataclass
class _Row:
    """One question's outcome for a system: what `metrics` averages (for a system with
    several seeds, each field is the mean over the item's seeds)."""

    reward: float
    turns: float | None
    calls: float
    tokens: float
    wall_s: float
    cost_usd: float | None


def _row(ep: EpisodeResult) -> _Row:
    return _Row(ep.reward, len(ep.turns), len(ep.turns), ep.tokens, ep.wall_s, ep.cost_usd)


def _item_mean(rows: Sequence[_Row]) -> _Row:
    """One item's row from its episodes' rows (one per seed): the mean of each field."""
    k = len(rows)
    costs = [r.cost_usd for r in rows if r.cost_usd is not None]
    turns = [r.turns for r in rows if r.turns is not None]
    return _Row(
        reward=sum(r.reward for r in rows) / k,
        turns=sum(turns) / k if len(turns) == k else None,
        calls=sum(r.calls for r in rows) / k,
        tokens=sum(r.tokens for r in rows) / k,
        wall_s=sum(r.wall_s for r in rows) / k,
        cost_usd=sum(costs) / k if costs else None,
    )


def metrics(rows: Sequence[_Row]) -> dict[str, Any]:
    """The Metrics dict of the module docstring for a list of outcomes, one per item."""
    n = len(rows)
    total = sum(r.reward for r in rows)
    # Whole for one episode per item; a sum of per-item means over seeds may be fractional.
    correct: float = int(round(total)) if abs(total - round(total)) < 1e-9 else total
    low, high = wilson_interval(correct, n)

    def mean(values: Sequence[float]) -> float | None:
        return float(sum(values) / len(values)) if values else None

    costs = [r.cost_usd for r in rows if r.cost_usd is not None]
    turns = [r.turns for r in rows if r.turns is not None]
    return {
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else None,
        "ci_low": low,
        "ci_high": high,
        "mean_turns": mean(turns) if len(turns) == n else None,
        "mean_pool_calls": mean([r.calls for r in rows]),
        "mean_tokens": mean([r.tokens for r in rows]),
        "mean_wall_s": mean([r.wall_s for r in rows]),
        "mean_cost_usd": (sum(costs) / n) if costs and n else None,
    }


def _by_task(rows: Sequence[tuple[str, _Row]], task_names: Sequence[str]) -> dict[str, Any]:
    return {
        "overall": metrics([r for _, r in rows]),
        "per_task": {t: metrics([r for task, r in rows if task == t]) for t in task_names},
    }


def _oracle_rows(
    singles: Sequence[EpisodeResult], items: Sequence[tasks.TaskItem]
) -> list[tuple[tasks.TaskItem, _Row]]:
    by_item: dict[str, list[EpisodeResult]] = {}
    for ep in singles:
        by_item.setdefault(ep.key, []).append(ep)
    rows = []
    for item in items:
        eps = by_item.get(item.key, [])
        costs = [e.cost_usd for e in eps if e.cost_usd is not None]
        solved = any(e.reward >= 1.0 for e in eps)
        rows.append((item, _Row(
            reward=1.0 if solved else 0.0,
            turns=None,
            calls=sum(len(e.turns) for e in eps),
            tokens=sum(e.tokens for e in eps),
            wall_s=sum(e.wall_s for e in eps),
            cost_usd=sum(costs) if costs else None,
        )))
    return rows


def _vote_key(answer: str | None, item: tasks.TaskItem) -> str | None:
    """What a member's single answer counts as in the vote; None: no readable answer."""
    if not answer:
        return None
    if item.scorer == "code":
        code = tasks.scoring.extract_code(answer, (item.reference or {}).get("entry_point"))
        return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip()) or None
    found = tasks.scoring.final_answer(answer, item.scorer)
    return f"{found.kind}:{found.value}" if found is not None else None


def _vote_rows(
    singles: Sequence[EpisodeResult], items: Sequence[tasks.TaskItem], models: Sequence[str]
) -> list[tuple[tasks.TaskItem, _Row]]:
    """Majority vote over the single answers of each item (module docstring); the winning
    group's first answer in pool order is scored as the vote's reply."""
    order = {f"single:{m}": i for i, m in enumerate(models)}
    by_item: dict[str, list[EpisodeResult]] = {}
    for ep in singles:
        by_item.setdefault(ep.key, []).append(ep)
    rows = []
    for item in items:
        eps = sorted(by_item.get(item.key, []), key=lambda e: order.get(e.system, len(order)))
        groups: dict[str, list[EpisodeResult]] = {}
        for ep in eps:
            key = _vote_key(ep.answer, item)
            if key is not None:
                groups.setdefault(key, []).append(ep)
        reward = 0.0
        if groups:
            # max() keeps the first of equal counts, and groups are in pool order of first member.
            winner = max(groups.values(), key=len)
            reward = float(tasks.score_item(item, winner[0].answer or ""))
        costs = [e.cost_usd for e in eps if e.cost_usd is not None]
        rows.append((item, _Row(reward, None, sum(len(e.turns) for e in eps), sum(e.tokens for e in eps),
                                sum(e.wall_s for e in eps), sum(costs) if costs else None)))
    return rows


def best_per_task(
    singles: Sequence[EpisodeResult], task_names: Sequence[str], models: Sequence[str]
) -> dict[str, str]:
    """task -> the member whose single runs scored best on it (ties: pool order)."""
    best: dict[str, str] = {}
    for task in task_names:
        scores = []
        for i, model in enumerate(models):
            eps = [e for e in singles if e.system == f"single:{model}" and e.task == task]
            if eps:
                scores.append((sum(e.reward for e in eps) / len(eps), -i, model))
        if scores:
            best[task] = max(scores)[2]
    return best


def _share(counts: dict[str, int], names: Sequence[str]) -> dict[str, float]:
    total = sum(counts.values())
    return {n: (counts.get(n, 0) / total if total else 0.0) for n in names}


def selection(
    episodes: Sequence[EpisodeResult], models: Sequence[str], task_names: Sequence[str]
) -> dict[str, Any]:
    """Share of turns given to each model and each (acting) role, overall and per task."""
    role_names = [r.value for r in ROLES]

    def shares(eps: Sequence[EpisodeResult]) -> dict[str, dict[str, float]]:
        m_counts: dict[str, int] = {}
        r_counts: dict[str, int] = {}
        for ep in eps:
            for model, role in ep.turns:
                m_counts[model] = m_counts.get(model, 0) + 1
                r_counts[role] = r_counts.get(role, 0) + 1
        return {"models": _share(m_counts, models), "roles": _share(r_counts, role_names)}

    return {
        "overall": shares(episodes),
        "per_task": {t: shares([e for e in episodes if e.task == t]) for t in task_names},
    }


def _gap(
    results: dict[str, Any], name: str, singles: Sequence[str], scope: str | None
) -> dict[str, Any] | None:
    """The Gap of `name` overall (`scope` None) or on task `scope`; None when unscored."""
    def acc(system: str) -> float | None:
        block = results[system]["overall"] if scope is None else results[system]["per_task"][scope]
        value: float | None = block["accuracy"]
        return value

    mine, oracle = acc(name), acc("oracle") if "oracle" in results else None
    scored = [(acc(s), -i, s) for i, s in enumerate(singles) if acc(s) is not None]
    if mine is None or not scored:
        return None
    best_acc, _, best = max(scored)
    return {
        "best_single": best,
        "vs_best_single": mine - float(best_acc or 0.0),
        "vs_oracle": None if oracle is None else mine - oracle,
    }


def summarize(
    systems: Sequence[System],
    episodes: Sequence[EpisodeResult],
    items: Sequence[tasks.TaskItem],
    models: Sequence[str],
    task_order: Sequence[str] = (),
) -> dict[str, Any]:
    """tasks, results, gaps, selection and per_item of bench.json from the episodes;
    tasks are listed in `task_order` (the mix's order), then any others as items have them."""
    present = set(item.task for item in items)
    task_names = list(dict.fromkeys([*(t for t in task_order if t in present), *(i.task for i in items)]))
    by_system: dict[str, list[EpisodeResult]] = {}
    for ep in episodes:
        by_system.setdefault(ep.system, []).append(ep)
    results: dict[str, Any] = {}
    per_item: dict[str, dict[str, float]] = {}
    singles = [f"single:{m}" for m in models]
    single_eps = [e for s in singles for e in by_system.get(s, [])]
    picks = best_per_task(single_eps, task_names, models)
    for system in systems:
        if system.kind in ("oracle", "vote"):
            derived = (_oracle_rows if system.kind == "oracle" else
                       lambda eps, its: _vote_rows(eps, its, models))(single_eps, items)
            rows = [(item.task, row) for item, row in derived]
            per_item[system.name] = {item.key: row.reward for item, row in derived}
        elif system.kind == "best-per-task":
            picked = [e for e in single_eps if picks.get(e.task) and e.system == f"single:{picks[e.task]}"]
            rows = [(e.task, _row(e)) for e in picked]
            per_item[system.name] = {e.key: e.reward for e in picked}
        else:
            by_item: dict[str, list[EpisodeResult]] = {}
            for ep in by_system.get(system.name, []):
                by_item.setdefault(ep.key, []).append(ep)
            item_rows = {key: _item_mean([_row(e) for e in eps]) for key, eps in by_item.items()}
            rows = [(eps[0].task, item_rows[key]) for key, eps in by_item.items()]
            per_item[system.name] = {key: row.reward for key, row in item_rows.items()}
        results[system.name] = _by_task(rows, task_names)
    singles = [s for s in singles if s in results]  # reported singles only
    routed = [s.name for s in systems if s.kind in ("random", "head")]
    gaps = {
        name: {"overall": _gap(results, name, singles, None),
               "per_task": {t: _gap(results, name, singles, t) for t in task_names}}
        for name in routed
    }
    chosen = {name: selection(by_system.get(name, []), models, task_names) for name in routed}
    return {"tasks": task_names, "results": results, "gaps": gaps, "selection": chosen, "per_item": per_item,
            "best_per_task": picks}


# -- running -----------------------------------------------------------------------------
def _spec(system: System, item: tasks.TaskItem, seed: int, greedy: bool) -> EpisodeSpec:
    """What to play for one episode of `system`: its head (read by its coordinator's
    backbone) or its fixed schedule. A task that fits no usable context is scored wrong."""
    source = system.source
    assert source is not None
    if isinstance(source, Coordinator):
        return EpisodeSpec(item=item, seed=seed, router=source.head, max_turns=system.max_turns,
                           backbone=source.backbone_ref, greedy=greedy, overflow_scores_zero=True)
    return EpisodeSpec(item=item, seed=seed, router=source, max_turns=system.max_turns, greedy=greedy,
                       overflow_scores_zero=True)


def _result(system: System, item: tasks.TaskItem, seed: int, outcome: EpisodeOutcome) -> EpisodeResult:
    """One episode reduced to what the report needs."""
    transcript = outcome.transcript
    if transcript is None:
        return EpisodeResult(system.name, item.task, item.id, seed, 0.0, None, [], "error", 0, 0.0, None,
                             False, error=outcome.error)
    return EpisodeResult(
        system=system.name,
        task=item.task,
        item=item.id,
        seed=seed,
        reward=outcome.reward,
        answer=transcript.answer,
        turns=[(t.model, t.role.value) for t in transcript.turns],
        stop_reason=transcript.stop_reason,
        tokens=transcript.prompt_tokens + transcript.completion_tokens,
        wall_s=transcript.pool_seconds + transcript.coordinator_seconds,
        cost_usd=transcript.cost_usd,
        cached=bool(transcript.turns) and all(t.cached for t in transcript.turns),
    )


def _head_systems(options: BenchOptions, pool_name: str, models: list[str]) -> tuple[list[System], list[str]]:
    notes: list[str] = []
    heads: list[tuple[str | None, Head]] = []
    if options.heads:
        for ref in options.heads:
            heads.append((ref, resolve_head(ref, pool_name, models, options.backbone)))
    else:
        head = resolve_head(None, pool_name, models, options.backbone)
        if head.trained:
            heads.append((None, head))
        else:
            notes.append(f"no trained head ships for pool {pool_name!r}, so no head was benchmarked "
                         "(an untrained head routes like `random`); evolve one and pass --head")
    systems: list[System] = []
    taken: set[str] = set()
    for head_ref, head in heads:
        name = f"head:{head.manifest.get('name') or 'unnamed'}"
        base, k = name, 2
        while name in taken:
            name, k = f"{base}#{k}", k + 1
        taken.add(name)
        source = Coordinator(head, backbone_ref=options.backbone, device=options.device)
        info = {"name": head.manifest.get("name"), "trained": head.trained, "ref": head_ref}
        systems.append(System(name, "head", head=info, max_turns=options.max_turns, stream="head",
                              source=source))
    return systems, notes


def plan_systems(options: BenchOptions, pool_name: str, models: list[str]) -> tuple[list[System], list[str]]:
    """The systems of a bench in run order (derived rows last), and notes for the report.
    Single runs are played whenever a reported row needs them (see `systems`)."""
    kinds = options.kinds()
    systems: list[System] = []
    if "single" in kinds or any(k in kinds for k in DERIVED):
        systems += [System(f"single:{m}", "single", model=m, source=FixedSchedule(models, m, (Role.WORKER,)))
                    for m in models]
    if "selfloop" in kinds:
        systems += [System(f"selfloop:{m}", "selfloop", model=m, max_turns=options.max_turns,
                           source=FixedSchedule(models, m, (Role.WORKER, Role.VERIFIER))) for m in models]
    if options.random_seeds and "random" in kinds:
        untrained = resolve_head("untrained", pool_name, models, options.backbone)
        source = Coordinator(untrained, backbone_ref=options.backbone, device=options.device)
        systems.append(System("random", "random", seeds=options.random_seeds, max_turns=options.max_turns,
                              stream="random", source=source))
    heads, notes = _head_systems(options, pool_name, models) if "head" in kinds else ([], [])
    systems += heads
    systems += [System(kind, kind) for kind in DERIVED if kind in kinds]
    return systems, notes


def _stream(system: System, r: int) -> str:
    return f"random:{r}" if system.kind == "random" else system.stream


@dataclass
class BenchResult:
    run_id: str
    run_dir: Path
    data: dict[str, Any] = field(default_factory=dict)


def _run_systems(
    pool: Pool, runnable: Sequence[System], items: Sequence[tasks.TaskItem], options: BenchOptions,
    run_dir: Path, emit: ProgressFn, evaluator: Evaluator,
) -> list[EpisodeResult]:
    """Every episode of every system, played by `evaluator`; results and episodes.jsonl in
    system, seed, item order whatever order they finished in."""
    plan = [(system, item, episode_seed(options.seed, _stream(system, r), item.key))
            for system in runnable for r in range(system.seeds) for item in items]
    announced: list[str] = []

    def progress(kind: str, data: dict[str, Any]) -> None:
        system, item, _ = plan[data["index"]]
        if kind == "started" and system.name not in announced:
            announced.append(system.name)
            emit("system", {"name": system.name, "episodes": system.seeds * len(items),
                            "in_flight": data["in_flight"]})
        elif kind == "finished":
            out = data["outcome"]
            turns = out.transcript.turns if out.transcript is not None else []
            emit("episode", {"system": system.name, "task": item.task, "item": item.id, "reward": out.reward,
                             "cached": bool(turns) and all(t.cached for t in turns),
                             "cache_hits": pool.stats.cache_hits, "pool_calls": pool.stats.calls,
                             "in_flight": data["in_flight"]})

    # --greedy is for heads: random routing stays random.
    specs = [_spec(system, item, seed, options.greedy and system.kind == "head") for system, item, seed in plan]
    outcomes = evaluator.evaluate(specs, progress)
    episodes = [_result(system, item, seed, outcome)
                for (system, item, seed), outcome in zip(plan, outcomes, strict=True)]
    BenchRun(run_dir).write_episodes(
        {"system": system.name, "task": item.task, "item": item.id, "seed": seed, "reward": result.reward,
         "transcript": outcome.transcript.to_dict() if outcome.transcript else None}
        for (system, item, seed), outcome, result in zip(plan, outcomes, episodes, strict=True))
    return episodes


def bench(
    options: BenchOptions, progress: ProgressFn | None = None, store: RunStore | None = None,
    parallel: int | None = None,
) -> BenchResult:
    """Run every system on the items of `options.tasks` and write the run directory (see
    the module docstring); returns bench.json's content. `parallel` episodes run at once
    (None: the pool file's `parallel`); bench.json is the same for any value but for its
    timings and `stats.parallel`. Progress events: ("start", {"run", "items", "systems",
    "episodes", "parallel"}), then ("system", {"name", "episodes", "in_flight"}) as a
    system's first episode starts and per finished episode ("episode", {"system", "task",
    "item", "reward", "cached", "cache_hits", "pool_calls", "in_flight"}), the pool counts
    being its calls so far; with parallel > 1 episodes finish out of order.
    Ctrl-C removes the run directory; the rollout cache keeps every finished call, so
    running the same command again resumes where it stopped."""
    entries = options.validate()
    emit = progress or (lambda kind, data: None)
    config = load_pool(options.pool)
    items = tasks.sample_items(entries, seed=options.seed)
    if not items:
        raise ConfigError(f"--tasks {options.tasks!r} selects no items")
    tasks.check_code_sandbox(items, strict_sandbox=config.sandbox == "strict")
    store = store or RunStore()
    parallel = parallel or config.parallel
    if parallel < 1:
        raise ConfigError(f"--parallel must be at least 1, got {parallel}")
    pool = open_pool(config)
    runtime = Runtime(pool, device=options.device)
    systems: list[System] = []
    started = time.perf_counter()
    try:
        pool.check_assets()
        systems, notes = plan_systems(options, config.name, config.names)
        if any(e.split == "val" for e in entries):
            notes.append("val items were used to pick the best head during `trinity evolve`: "
                         "test items are the held-out ones")
        runnable = [s for s in systems if s.source is not None]
        kinds = options.kinds()
        reported = [s for s in systems if s.kind in kinds]
        with store.new_run() as run_dir:
            emit("start", {"run": run_dir.name, "items": len(items), "systems": [s.name for s in systems],
                           "episodes": sum(s.seeds for s in runnable) * len(items), "parallel": parallel})
            episodes = _run_systems(pool, runnable, items, options, run_dir, emit, make_evaluator(runtime, parallel))
            errors = sum(e.error is not None for e in episodes)
            if errors:
                notes.append(f"{errors} episodes could not run (the item does not fit the model's context) "
                             "and count as wrong")
            summary = {
                "format": BENCH_FORMAT,
                "run": run_dir.name,
                "options": {**asdict(options), "heads": list(options.heads or [])},
                "pool": {"name": config.name, "models": config.names, "source": config.source},
                "prompt_version": roles.PROMPT_VERSION,
                "items": [{"task": i.task, "id": i.id} for i in items],
                "systems": [s.describe() for s in reported],
                **summarize(reported, episodes, items, config.names, [e.task for e in entries]),
                "stats": {
                    "pool_calls": pool.stats.calls,
                    "cache_hits": pool.stats.cache_hits,
                    "backend_calls": pool.stats.calls - pool.stats.cache_hits,
                    "backend_s": pool.stats.seconds,
                    "wall_s": time.perf_counter() - started,
                    "parallel": parallel,
                },
                "notes": notes,
            }
            write_outputs(run_dir, summary, episodes)
            title = f"bench {config.name} on {options.tasks} ({len(items)} items)"
            store.save(run_dir, {"kind": "bench", "title": title, "summary": summary, "files": list(FILES)})
            data = {**summary, "episodes": [e.to_dict() for e in episodes]}
            return BenchResult(run_dir.name, run_dir, data)
    finally:
        runtime.close()
        for system in systems:
            if system.source is not None:
                system.source.close()
        pool.close()
        if pool.cache is not None:
            pool.cache.close()


# -- outputs -----------------------------------------------------------------------------
def write_outputs(run_dir: Path, summary: dict[str, Any], episodes: Sequence[EpisodeResult]) -> None:
    """bench.json, report.md and chart.png of a finished bench (episodes.jsonl is written
    while it runs)."""
    BenchRun(run_dir).write_outputs({**summary, "episodes": [e.to_dict() for e in episodes]},
                                    report_markdown(summary), lambda path: plot_accuracy(summary, path))


def short_task(task: str) -> str:
    """A task name for tables: `file:` tasks by their file name alone."""
    return "file:" + Path(task[5:]).name if task.startswith("file:") else task


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f} pts"


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines


def report_markdown(summary: dict[str, Any]) -> str:
    """The bench report as Markdown: accuracy with CIs, costs, gaps, selection shares."""
    o = summary["options"]
    pool = summary["pool"]
    results = summary["results"]
    task_names = summary["tasks"]
    out = [f"# trinity bench — {summary['run']}", ""]
    out.append(f"Pool `{pool['name']}` ({', '.join(pool['models'])}) · tasks `{o['tasks']}` "
               f"({len(summary['items'])} items) · max turns {o['max_turns']} · random routing over "
               f"{o['random_seeds']} seeds · seed {o['seed']}" + (" · heads greedy" if o["greedy"] else ""))
    out += ["", "## Accuracy and cost per question", ""]
    per_task_cols = task_names if len(task_names) > 1 else []
    header = ["system", "accuracy", "95% CI", *[short_task(t) for t in per_task_cols],
              "turns", "pool calls", "tokens", "wall s", "cost $"]
    rows = []
    for system in summary["systems"]:
        block = results[system["name"]]
        m = block["overall"]
        rows.append([system["name"], _pct(m["accuracy"]), f"{_pct(m['ci_low'])} – {_pct(m['ci_high'])}",
                     *[_pct(block["per_task"][t]["accuracy"]) for t in per_task_cols],
                     _num(m["mean_turns"]), _num(m["mean_pool_calls"]), _num(m["mean_tokens"], "{:.0f}"),
                     _num(m["mean_wall_s"]), _num(m["mean_cost_usd"], "{:.5f}")])
    out += _md_table(header, rows)
    if len(task_names) > 1:
        out += ["", "## Per task (accuracy, 95% CI, n)", ""]
        rows = []
        for system in summary["systems"]:
            cells = []
            for t in task_names:
                m = results[system["name"]]["per_task"][t]
                ci = f"{_pct(m['ci_low'])} – {_pct(m['ci_high'])}"
                cells.append(f"{_pct(m['accuracy'])} ({ci}, n={m['n']})")
            rows.append([system["name"], *cells])
        out += _md_table(["system", *[short_task(t) for t in task_names]], rows)
    if summary["gaps"]:
        out += ["", "## Gaps (accuracy difference, percentage points)", ""]
        rows = []
        for name, gap in summary["gaps"].items():
            g = gap["overall"]
            if g is None:
                continue
            rows.append([name, "all", g["best_single"], _signed(g["vs_best_single"]),
                         _signed(g["vs_oracle"])])
            if len(task_names) > 1:
                for t in task_names:
                    gt = gap["per_task"][t]
                    if gt is not None:
                        rows.append([name, short_task(t), gt["best_single"], _signed(gt["vs_best_single"]),
                                     _signed(gt["vs_oracle"])])
        out += _md_table(["system", "tasks", "best single model", "vs best single", "vs oracle"], rows)
    if summary["selection"]:
        out += ["", "## Selection share (turns given to each model and role)"]
        role_names = [r.value for r in ROLES]
        for name, sel in summary["selection"].items():
            scopes = [("all", sel["overall"])]
            if len(task_names) > 1:
                scopes += [(short_task(t), sel["per_task"][t]) for t in task_names]
            rows = [[label, *[_pct(share["models"][m]) for m in pool["models"]],
                     *[_pct(share["roles"][r]) for r in role_names]] for label, share in scopes]
            out += ["", f"### {name}", "", *_md_table(["tasks", *pool["models"], *role_names], rows)]
    st = summary["stats"]
    out += ["", "## Notes", "",
            "- single: the model alone, one Worker turn. selfloop: the model alone for the same turn budget, "
            "Worker and Verifier in turn, stopping on ACCEPT. random: uniform model and role each turn, always "
            "sampled; each item scores its mean over the seeds. vote: majority over the single answers (ties: "
            "pool order). best-per-task: per task, the member best on it here (chosen with the test labels: a "
            "reference, not a system). oracle: an item counts as solved if any single model solved it alone in "
            "one Worker turn, i.e. the best per-question pick of one model; it is a reference, not a system, "
            "and not a ceiling: multi-turn systems can solve items that no single model does.",
            "- 95% CI: Wilson score interval over items (random: over items, each scored by its mean over "
            "the seeds). Wall s: seconds the pool calls took when they were made plus coordinator seconds. "
            "Oracle pool calls, tokens, seconds and cost: sums over all single runs.",
            f"- This run: {st['pool_calls']} pool calls, {st['cache_hits']} from the rollout cache, "
            f"{st['backend_calls']} to a model ({st['backend_s']:.1f} s), {st['wall_s']:.1f} s in all."]
    out += [f"- {note}" for note in summary["notes"]]
    return "\n".join(out) + "\n"


def plot_accuracy(summary: dict[str, Any], path: Path) -> None:
    """Bar chart of accuracy per system (overall, and per task when there are several)
    with 95% Wilson error bars, as a PNG (matplotlib, headless)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s["name"] for s in summary["systems"]]
    task_names = summary["tasks"]
    def on_task(task: str) -> Callable[[str], dict[str, Any]]:
        return lambda s: summary["results"][s]["per_task"][task]

    groups: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
        ("overall", lambda s: summary["results"][s]["overall"])
    ]
    if len(task_names) > 1:
        groups += [(short_task(t), on_task(t)) for t in task_names]
    width = 0.8 / len(groups)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(names) * max(1, len(groups) / 2) + 2), 4.5), dpi=100)
    x = np.arange(len(names))
    for g, (label, get) in enumerate(groups):
        acc = np.array([get(n)["accuracy"] or 0.0 for n in names])
        low = np.array([get(n)["ci_low"] for n in names])
        high = np.array([get(n)["ci_high"] for n in names])
        ax.bar(x + (g - (len(groups) - 1) / 2) * width, acc, width, label=label,
               yerr=[np.clip(acc - low, 0, None), np.clip(high - acc, 0, None)], capsize=3)
    ax.set_xticks(x)
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_ylabel("accuracy (95% Wilson CI)")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"trinity bench {summary['run']}: pool {summary['pool']['name']}")
    ax.grid(axis="y", alpha=0.3)
    if len(groups) > 1:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
