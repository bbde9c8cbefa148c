"""Bench statistics: Wilson intervals, metrics per system and task, gaps, paired tests and
selection shares, and `summarize`, which builds the `tasks`, `results`, `gaps`, `paired`,
`selection`, `per_item` and `best_per_task` of bench.json. What each row is (played, derived
from the single runs, routed, paired with what) is its kind's to say (policies/kinds.py:
`Row.owner`); a row whose every call failed is marked `failed` in its metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trinity_cli import tasks
from trinity_cli.bench.systems import EpisodeResult, System
from trinity_cli.policies.bench_rows import best_per_task
from trinity_cli.policies.kinds import Derived
from trinity_cli.runs.selection import turn_shares

Z95 = 1.959963984540054  # two-sided 95% normal quantile


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


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for paired 0/1 outcomes: `b` items only the first
    system got right, `c` only the second. Under the null each of the n = b + c discordant
    items falls either way with probability 1/2, so p = min(1, 2 P(X <= min(b, c))) for X
    ~ Binomial(n, 1/2); 1.0 when no item is discordant."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts cannot be negative")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)  # exact integers; one correctly rounded division


def paired_test(mine: dict[str, float], other: dict[str, float], other_name: str) -> dict[str, Any]:
    """The Paired record of two systems' per-item rewards on the items both have (a reward
    of 0.5 or more counts as right; these rows score 0 or 1)."""
    keys = [k for k in mine if k in other]
    b = sum(mine[k] >= 0.5 and other[k] < 0.5 for k in keys)
    c = sum(mine[k] < 0.5 and other[k] >= 0.5 for k in keys)
    return {"other": other_name, "n": len(keys), "b": b, "c": c, "p_value": mcnemar_exact(b, c)}


@dataclass
class _Row:
    """One question's outcome for a system: what `metrics` averages (for a system with
    several seeds, each field is the mean over the item's seeds); `answered` False when every
    call it made failed."""

    reward: float
    turns: float | None
    calls: float
    tokens: float
    wall_s: float
    cost_usd: float | None
    answered: bool = True


def _row(ep: EpisodeResult) -> _Row:
    return _Row(ep.reward, len(ep.turns), len(ep.turns), ep.tokens, ep.wall_s, ep.cost_usd, not ep.failed)


def _derived_row(derived: Derived[EpisodeResult]) -> _Row:
    """A derived row's outcome on one item: the single run it is, or the sums over those it
    took (no turns of its own)."""
    if derived.is_run:
        return _row(derived.uses[0])
    eps = derived.uses
    costs = [e.cost_usd for e in eps if e.cost_usd is not None]
    return _Row(derived.reward, None, sum(len(e.turns) for e in eps), sum(e.tokens for e in eps),
                sum(e.wall_s for e in eps), sum(costs) if costs else None,
                answered=not eps or any(not e.failed for e in eps))


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
        answered=any(r.answered for r in rows),
    )


def metrics(rows: Sequence[_Row]) -> dict[str, Any]:
    """The Metrics dict of the module docstring for a list of outcomes, one per item, with
    "failed": True when there are some and every call of every one failed."""
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
        **({"failed": True} if rows and not any(r.answered for r in rows) else {}),
    }


def _by_task(rows: Sequence[tuple[str, _Row]], task_names: Sequence[str]) -> dict[str, Any]:
    return {
        "overall": metrics([r for _, r in rows]),
        "per_task": {t: metrics([r for task, r in rows if task == t]) for t in task_names},
    }


def selection(
    episodes: Sequence[EpisodeResult], models: Sequence[str], task_names: Sequence[str]
) -> dict[str, Any]:
    """Share of turns given to each model, each (acting) role and each (model, role) pair,
    overall and per task: the Share of bench/__init__.py, counted by runs/selection.turn_shares (as
    evolve's selection is); and "ends": how the episodes ended (`ends`), overall and per task."""
    return {
        "overall": turn_shares([t for e in episodes for t in e.turns], models),
        "per_task": {t: turn_shares([tr for e in episodes if e.task == t for tr in e.turns], models)
                     for t in task_names},
        "ends": {"overall": ends(episodes), "per_task": {t: ends([e for e in episodes if e.task == t])
                                                         for t in task_names}},
    }


def ends(episodes: Sequence[EpisodeResult]) -> dict[str, Any]:
    """How `episodes` ended: {"episodes": n, "mean_turns", "reasons": {stop_reason: share}}
    (Transcript.stop_reason: "accepted", "agreed", "max_turns", ...), reasons by share."""
    n = len(episodes)
    counts: dict[str, int] = {}
    for e in episodes:
        counts[e.stop_reason] = counts.get(e.stop_reason, 0) + 1
    return {"episodes": n, "mean_turns": sum(len(e.turns) for e in episodes) / n if n else None,
            "reasons": {r: c / n for r, c in sorted(counts.items(), key=lambda rc: -rc[1])}}


def workflows(episodes: Sequence[EpisodeResult]) -> dict[str, Any]:
    """What a conductor row's workflows were: {"episodes", "well_formed" (share read as
    written), "repaired" (share read leniently), "fallback" (share refused: the agree
    procedure ran), "reasked" (share whose last step was asked again for a missing answer),
    "constrained" (share written under the workflow's JSON schema),
    "errors" (share that could not run), "mean_steps", "topologies": {topology: share}}
    (bench/systems.workflow_summary)."""
    n = len(episodes)
    flows = [e.workflow for e in episodes if e.workflow is not None]
    counts: dict[str, int] = {}
    for f in flows:
        counts[f["topology"]] = counts.get(f["topology"], 0) + 1

    def share(k: int) -> float | None:
        return k / n if n else None

    return {"episodes": n,
            "well_formed": share(sum(not f["repaired"] and not f["fallback"] for f in flows)),
            "repaired": share(sum(f["repaired"] and not f["fallback"] for f in flows)),
            "fallback": share(sum(f["fallback"] for f in flows)),
            "reasked": share(sum(bool(f.get("reasked")) for f in flows)),
            "constrained": share(sum(bool(f.get("constrained")) for f in flows)),
            "errors": share(n - len(flows)),
            "mean_steps": sum(f["steps"] for f in flows) / len(flows) if flows else None,
            "topologies": {t: c / n for t, c in sorted(counts.items(), key=lambda tc: (-tc[1], tc[0]))}}


def _gap(results: dict[str, Any], name: str, singles: Sequence[str], references: dict[str, str | None],
         scope: str | None) -> dict[str, Any] | None:
    """The Gap of `name` overall (`scope` None) or on task `scope`: to the best of the single
    rows `singles` (failed ones left out) and to each row of `references` (key -> row name,
    None: no such row, or its accuracy, unscored: a None gap); None when unscored."""
    def block(system: str) -> dict[str, Any]:
        found: dict[str, Any] = results[system]["overall"] if scope is None else results[system]["per_task"][scope]
        return found

    def acc(system: str | None) -> float | None:
        value: float | None = None if system is None else block(system)["accuracy"]
        return value

    mine = acc(name)
    scored = [(acc(s), -i, s) for i, s in enumerate(singles) if acc(s) is not None and not block(s).get("failed")]
    if mine is None or not scored:
        return None
    best_acc, _, best = max(scored)
    gap: dict[str, Any] = {"best_single": best, "vs_best_single": mine - float(best_acc or 0.0)}
    for key, row in references.items():
        other = acc(row)
        gap[key] = None if other is None else mine - other
    return gap


def summarize(
    systems: Sequence[System],
    episodes: Sequence[EpisodeResult],
    items: Sequence[tasks.TaskItem],
    models: Sequence[str],
    task_order: Sequence[str] = (),
) -> dict[str, Any]:
    """tasks, results, gaps, paired, selection, per_item and best_per_task of bench.json
    from the episodes, for the `reported` rows of `systems` (every row of the bench: the single
    runs played only because other rows are built on them are read, not reported);
    tasks are listed in `task_order` (the mix's order), then any others as items have them."""
    present = set(item.task for item in items)
    task_names = list(dict.fromkeys([*(t for t in task_order if t in present), *(i.task for i in items)]))
    by_system: dict[str, list[EpisodeResult]] = {}
    for ep in episodes:
        by_system.setdefault(ep.system, []).append(ep)
    singles = {s.model or "": by_system.get(s.name, []) for s in systems if s.owner.single_runs}
    reported = [s for s in systems if s.reported]
    results: dict[str, Any] = {}
    per_item: dict[str, dict[str, float]] = {}
    for system in reported:
        rows, per_item[system.name] = _system_rows(system, by_system, singles, items)
        results[system.name] = _by_task(rows, task_names)
    single_rows = [s.name for s in reported if s.owner.single_runs]
    routed = [s for s in reported if s.owner.routes]
    gaps = {}
    for s in routed:
        references = {f"vs_{kind}": _first(reported, kind) for kind in s.owner.gaps_against}
        gaps[s.name] = {"overall": _gap(results, s.name, single_rows, references, None),
                        "per_task": {t: _gap(results, s.name, single_rows, references, t) for t in task_names}}
    chosen = {s.name: selection(by_system.get(s.name, []), models, task_names) for s in routed}
    conducted = {s.name: {"overall": workflows(by_system.get(s.name, [])),
                          "per_task": {t: workflows([e for e in by_system.get(s.name, []) if e.task == t])
                                       for t in task_names}}
                 for s in reported if s.owner.plays_workflows}
    return {"tasks": task_names, "results": results, "gaps": gaps,
            "paired": _paired(reported, results, per_item), "selection": chosen,
            "per_item": per_item, "best_per_task": best_per_task(singles, task_names),
            **({"workflows": conducted} if conducted else {})}


def _first(systems: Sequence[System], kind: str) -> str | None:
    """The first of `systems` that a kind named `kind` made."""
    return next((s.name for s in systems if s.owner.name == kind), None)


def _system_rows(system: System, by_system: dict[str, list[EpisodeResult]],
                 singles: dict[str, list[EpisodeResult]],
                 items: Sequence[tasks.TaskItem]) -> tuple[list[tuple[str, Any]], dict[str, float]]:
    """A system's (task, row) per item and its reward per item key: derived from the single
    runs when its kind derives it (`PolicyKind.derive`), else the mean over its own episodes
    of each item."""
    derived = system.owner.derive(system, items, singles)
    if derived is not None:
        return [(d.task, _derived_row(d)) for d in derived], {d.key: d.reward for d in derived}
    by_item: dict[str, list[EpisodeResult]] = {}
    for ep in by_system.get(system.name, []):
        by_item.setdefault(ep.key, []).append(ep)
    item_rows = {key: _item_mean([_row(e) for e in eps]) for key, eps in by_item.items()}
    return ([(eps[0].task, item_rows[key]) for key, eps in by_item.items()],
            {key: row.reward for key, row in item_rows.items()})


def _paired(systems: Sequence[System], results: dict[str, Any],
            per_item: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """bench.json's "paired": each row whose kind is paired with others (`paired_against`:
    heads and the conductor, against the best single, self-loop and sc rows and `agree`; a
    conductor row also against each head row, key `vs_head:NAME`), and a row in another
    decision mode (`Row.variant_of`: `head:NAME/greedy`) against its row in the default mode,
    on the same items and seeds (`vs_default_mode`)."""
    paired: dict[str, dict[str, Any]] = {}
    for s in systems:
        if not s.owner.paired_against:
            continue
        tests: dict[str, Any] = {}
        for against in s.owner.paired_against:
            rows = [r.name for r in systems if r.owner.name == against.kind]
            if against.key is not None:
                other = _best(results, rows)
                tests[against.key] = None if other is None else paired_test(per_item[s.name], per_item[other], other)
            else:
                for other in rows:
                    tests[f"vs_{other}"] = paired_test(per_item[s.name], per_item[other], other)
        if s.variant_of is not None and s.variant_of in per_item:
            tests["vs_default_mode"] = paired_test(per_item[s.name], per_item[s.variant_of], s.variant_of)
        paired[s.name] = tests
    return paired


def _best(results: dict[str, Any], names: Sequence[str]) -> str | None:
    """The most accurate of `names` overall (ties: the first), None when none is scored (a
    failed row is not)."""
    scored = [(results[n]["overall"]["accuracy"], -i, n) for i, n in enumerate(names)
              if results[n]["overall"]["accuracy"] is not None and not results[n]["overall"].get("failed")]
    return max(scored)[2] if scored else None
