"""Bench statistics: Wilson intervals, metrics per system and task, the derived rows
(vote, best-per-task, oracle), gaps, paired tests and selection shares, and `summarize`,
which builds the `tasks`, `results`, `gaps`, `paired`, `selection`, `per_item` and
`best_per_task` of bench.json."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trinity_cli import tasks
from trinity_cli.answer_kinds import KINDS, answer_kind
from trinity_cli.bench.systems import EpisodeResult, System
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
    """What a member's single answer counts as in the vote (its kind's `vote_key`); None: no
    readable answer, or a scorer that is no answer kind's."""
    if not answer or item.scorer not in KINDS:
        return None
    return answer_kind(item.scorer).vote_key(answer, item.reference)


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
    """tasks, results, gaps, paired, selection, per_item and best_per_task of bench.json
    from the episodes;
    tasks are listed in `task_order` (the mix's order), then any others as items have them."""
    present = set(item.task for item in items)
    task_names = list(dict.fromkeys([*(t for t in task_order if t in present), *(i.task for i in items)]))
    by_system: dict[str, list[EpisodeResult]] = {}
    for ep in episodes:
        by_system.setdefault(ep.system, []).append(ep)
    single_eps = [e for m in models for e in by_system.get(f"single:{m}", [])]
    picks = best_per_task(single_eps, task_names, models)
    results: dict[str, Any] = {}
    per_item: dict[str, dict[str, float]] = {}
    for system in systems:
        rows, per_item[system.name] = _system_rows(system, by_system, single_eps, items, models, picks)
        results[system.name] = _by_task(rows, task_names)
    singles = [f"single:{m}" for m in models if f"single:{m}" in results]  # reported singles only
    routed = [s.name for s in systems if s.kind in ("random", "head", "conductor")]
    gaps = {
        name: {"overall": _gap(results, name, singles, None),
               "per_task": {t: _gap(results, name, singles, t) for t in task_names}}
        for name in routed
    }
    chosen = {name: selection(by_system.get(name, []), models, task_names) for name in routed}
    conducted = {s.name: {"overall": workflows(by_system.get(s.name, [])),
                          "per_task": {t: workflows([e for e in by_system.get(s.name, []) if e.task == t])
                                       for t in task_names}}
                 for s in systems if s.kind == "conductor"}
    return {"tasks": task_names, "results": results, "gaps": gaps,
            "paired": _paired(systems, results, per_item, models, singles), "selection": chosen,
            "per_item": per_item, "best_per_task": picks, **({"workflows": conducted} if conducted else {})}


def _system_rows(system: System, by_system: dict[str, list[EpisodeResult]], single_eps: list[EpisodeResult],
                 items: Sequence[tasks.TaskItem], models: Sequence[str],
                 picks: dict[str, str]) -> tuple[list[tuple[str, Any]], dict[str, float]]:
    """A system's (task, row) per item and its reward per item key: derived from the single
    runs (oracle, vote, best-per-task), else the mean over its own episodes of each item."""
    if system.kind in ("oracle", "vote"):
        derived = (_oracle_rows(single_eps, items) if system.kind == "oracle"
                   else _vote_rows(single_eps, items, models))
        return [(item.task, row) for item, row in derived], {item.key: row.reward for item, row in derived}
    if system.kind == "best-per-task":
        picked = [e for e in single_eps if picks.get(e.task) and e.system == f"single:{picks[e.task]}"]
        return [(e.task, _row(e)) for e in picked], {e.key: e.reward for e in picked}
    by_item: dict[str, list[EpisodeResult]] = {}
    for ep in by_system.get(system.name, []):
        by_item.setdefault(ep.key, []).append(ep)
    item_rows = {key: _item_mean([_row(e) for e in eps]) for key, eps in by_item.items()}
    return ([(eps[0].task, item_rows[key]) for key, eps in by_item.items()],
            {key: row.reward for key, row in item_rows.items()})


def _paired(systems: Sequence[System], results: dict[str, Any], per_item: dict[str, dict[str, float]],
            models: Sequence[str], singles: list[str]) -> dict[str, dict[str, Any]]:
    """bench.json's "paired": each head and conductor row against the best single, self-loop
    and sc rows and `agree` (and a head's other decision mode against its default one, a
    conductor row against each head row: key `vs_head:NAME`)."""
    selfloops = [f"selfloop:{m}" for m in models if f"selfloop:{m}" in results]
    scs = [s.name for s in systems if s.kind == "sc"]
    against = {"vs_best_single": _best(results, singles), "vs_best_selfloop": _best(results, selfloops),
               "vs_agree": "agree" if "agree" in results else None, "vs_best_sc": _best(results, scs)}
    paired = {
        s.name: {key: None if other is None else paired_test(per_item[s.name], per_item[other], other)
                 for key, other in against.items()}
        for s in systems if s.kind in ("head", "conductor")
    }
    # A conductor row is also tested against each head row of the bench (`vs_head:NAME`): the
    # two coordinators on the same items.
    heads = [s.name for s in systems if s.kind == "head"]
    for conductor in (s.name for s in systems if s.kind == "conductor"):
        for head in heads:
            paired[conductor][f"vs_{head}"] = paired_test(per_item[conductor], per_item[head], head)
    # A head's row in the other decision mode (`head:NAME/greedy`) is also tested against its
    # row in the default mode, on the same items and seeds.
    for name in paired:
        base = name.rsplit("/", 1)[0]
        if "/" in name and base in per_item:
            paired[name]["vs_default_mode"] = paired_test(per_item[name], per_item[base], base)
    return paired


def _best(results: dict[str, Any], names: Sequence[str]) -> str | None:
    """The most accurate of `names` overall (ties: the first), None when none is scored."""
    scored = [(results[n]["overall"]["accuracy"], -i, n) for i, n in enumerate(names)
              if results[n]["overall"]["accuracy"] is not None]
    return max(scored)[2] if scored else None
