"""The charts of bench and evolve runs, as PNG files drawn with matplotlib (headless), from
the same plain summaries runs/reports.py formats as tables. The only module that imports
matplotlib.

    plot_accuracy(summary)   chart.png: accuracy per system with 95% Wilson error bars
    plot_cost(summary)       cost.png: accuracy against tokens per question, every row, with
                             the Pareto frontier (reports.pareto_front) drawn
    plot_selection(summary)  selection.png: per head and task, each member's share of turns
                             in each role (the selection-distribution figure)
    plot_curves(curves)      curves.png: fitness and validation per training episode

Each draws into the path given; run files are made atomic by their writer (runs/store.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli.messages import ROLES
from trinity_cli.runs.reports import pareto_front, selection_heads, short_task


def _pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path) -> None:
    """Lay `fig` out, write it to `path` as PNG, and free it whatever happens."""
    fig.tight_layout()
    try:
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)


def plot_accuracy(summary: dict[str, Any], path: Path) -> None:
    """Bar chart of accuracy per system (overall, and per task when there are several)
    with 95% Wilson error bars, as a PNG (matplotlib, headless)."""
    plt = _pyplot()
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
    _save(plt, fig, path)


def plot_cost(summary: dict[str, Any], path: Path) -> None:
    """cost.png: each system's overall accuracy against its mean tokens per question (prompt
    and completion, every call), named; the Pareto frontier (no other row is as accurate for
    fewer tokens) joined by a line."""
    plt = _pyplot()
    overall = [(s["name"], summary["results"][s["name"]]["overall"]) for s in summary["systems"]]
    points = [(n, m["mean_tokens"], m["accuracy"]) for n, m in overall
              if m.get("mean_tokens") is not None and m.get("accuracy") is not None]
    front = pareto_front(summary)
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=100)
    for (name, tokens, accuracy), lines in zip(points, _label_lines(points), strict=True):
        on = name in front
        ax.scatter([tokens], [accuracy], color="tab:red" if on else "tab:blue", zorder=3)
        ax.annotate(name, (tokens, accuracy), textcoords="offset points", xytext=(4, 4 - _NAME_LINE_PT * lines),
                    fontsize="x-small")
    line = sorted((t, a) for n, t, a in points if n in front)
    if line:
        ax.step([t for t, _ in line], [a for _, a in line], where="post", color="tab:red", alpha=0.6,
                label="Pareto frontier")
        ax.legend(loc="lower right", fontsize="small")
    ax.set_xlabel("tokens per question (prompt + completion)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"trinity bench {summary['run']}: accuracy and cost")
    ax.grid(alpha=0.3)
    _save(plt, fig, path)


# cost.png's names: a line is this many points; on its axes (7.5 x 4.5 in at 100 dpi, accuracy
# 0 to 1.05) that is _NAME_LINE_ACC of accuracy, and an x-small name is _NAME_HEIGHT_ACC high and
# _NAME_CHAR_SPAN of the token range wide per character.
_NAME_LINE_PT = 9
_NAME_LINE_ACC, _NAME_HEIGHT_ACC, _NAME_CHAR_SPAN = 0.038, 0.029, 0.008


def _label_lines(points: list[tuple[str, float, float]]) -> list[int]:
    """How many lines each point's name on `plot_cost`'s chart is moved down so that names do
    not print over each other: in order, each name takes the first line (0: beside its point,
    n: n lines lower) where its box (the constants above) meets no box placed before it."""
    if not points:
        return []
    span = (max(t for _, t, _ in points) - min(t for _, t, _ in points)) or 1.0
    height, step = _NAME_HEIGHT_ACC, _NAME_LINE_ACC
    placed: list[tuple[float, float, float]] = []  # left, right, label y
    out = []
    for name, tokens, accuracy in points:
        left, right = tokens, tokens + _NAME_CHAR_SPAN * span * len(name)
        line = 0
        while any(left < r and lo < right and abs(accuracy - line * step - y) < height for lo, r, y in placed):
            line += 1
        placed.append((left, right, accuracy - line * step))
        out.append(line)
    return out


def plot_selection(summary: dict[str, Any], path: Path) -> None:
    """selection.png: for each head, a stacked bar over all tasks (and one per task when
    there are several) of the share of turns each member got in each role (a colour per
    member, shades per role). Only for a bench with heads (`selection_heads`)."""
    heads = selection_heads(summary)
    if not heads:
        raise ValueError("no head to plot the selection of")
    plt = _pyplot()

    models, task_names = summary["pool"]["models"], summary["tasks"]
    role_names = [r.value for r in ROLES]
    shade = {"thinker": 0.45, "worker": 1.0, "verifier": 0.7}
    colours = plt.get_cmap("tab10")
    fig, axes = plt.subplots(len(heads), 1, figsize=(8, 1.2 + 0.5 * (len(task_names) + 1) * len(heads) + 0.4),
                             dpi=100, squeeze=False)
    for ax, name in zip(axes[:, 0], heads, strict=True):
        sel = summary["selection"][name]
        scopes = [("all", sel["overall"])]
        if len(task_names) > 1:
            scopes += [(short_task(t), sel["per_task"][t]) for t in task_names]
        labels = [label for label, _ in scopes][::-1]
        left = [0.0] * len(scopes)
        for i, m in enumerate(models):
            for r in role_names:
                widths = [share.get("pairs", {}).get(m, {}).get(r, 0.0) for _, share in scopes][::-1]
                ax.barh(labels, widths, left=left, color=colours(i % 10), alpha=shade[r], edgecolor="white",
                        label=f"{m} as {r}" if any(widths) else None)
                left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.set_xlim(0, 1)
        ax.set_title(f"{name}: share of turns by member and role", fontsize="medium")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    axes[-1, 0].set_xlabel("share of turns")
    _save(plt, fig, path)


def plot_curves(curves: list[dict[str, Any]], path: Path, start_val: float | None = None) -> None:
    """Fitness and validation curves as a PNG (matplotlib, headless); the validation line
    starts at 0 episodes with `start_val`, the fitted start's score, when there is one."""
    if not curves:
        return
    plt = _pyplot()

    spent = [c["spent"] for c in curves]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot(spent, [c["best_fitness"] for c in curves], label="best fitness (minibatch)")
    ax.plot(spent, [c["mean_fitness"] for c in curves], label="mean fitness (minibatch)")
    vals = [(0, start_val)] if start_val is not None else []
    vals += [(c["spent"], c["val"]) for c in curves if c["val"] is not None]
    if vals:
        label = "validation (the start, then the mean head)" if start_val is not None else "validation (mean head)"
        ax.plot([v[0] for v in vals], [v[1] for v in vals], "o-", label=label)
    ax.set_xlabel("training episodes")
    ax.set_ylabel("reward")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend()
    _save(plt, fig, path)
