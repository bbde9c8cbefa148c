"""A bench run as pages: its tables (runs/reports.bench_view, the cells report.md and the
terminal show), its charts, the items x systems grid of rewards with each item's question,
and an item's page, every system's episodes on it side by side. Also the grid of two bench
runs' changed results (`compare_grid`) and both runs' episodes on one item.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trinity_cli.errors import NotFound
from trinity_cli.runs import reports
from trinity_cli.viewer import shape
from trinity_cli.viewer.opened import OpenedRun

# Rows that play no episode of their own, and what their cell means.
DERIVED_NOTES = {
    "vote": "vote plays nothing: the majority of the single answers (their columns)",
    "best-per-task": "best-per-task plays nothing: the single run of {member}, the member best on {task} here",
    "oracle": "the oracle plays nothing: right when some member alone was right (the single columns)",
}
QUESTION_CHARS = 2000  # of each question in the grid (search, and the row's text)


def _per_item(run: OpenedRun) -> Mapping[str, Mapping[str, float]]:
    """system -> item key -> reward: bench.json's per_item, else what episodes.jsonl holds."""
    return run.summary.get("per_item") or run.episodes.rewards


def bench_page(run: OpenedRun) -> dict[str, Any]:
    """The run's page: tables, charts and the grid (page keys: viewer/pages.py)."""
    summary = run.summary
    page: dict[str, Any] = {
        "kind": "bench", "id": run.id, "title": run.record.get("title", ""), "created": run.record.get("created"),
        "heading": f"trinity bench — {run.id}", "caption": "", "tables": [], "selection": [], "stats": "",
        "notes": [], "report": "", "charts": [{"name": name, "src": f"files/{run.id}/{name}"} for name in run.charts()],
        "grid": grid(run),
    }
    try:
        view = reports.bench_view(summary)
    except (KeyError, TypeError, ValueError, IndexError):  # a summary older than the report's fields
        report = run.path / "report.md"
        return {**page, "report": report.read_text(encoding="utf-8") if report.is_file() else ""}
    tables = [shape.table(t) for t in (view.accuracy, view.per_task, view.per_task_cost, view.gaps, view.paired,
                                       view.ends, view.workflows) if t is not None and t.rows]
    return {**page, "heading": view.heading, "caption": view.caption, "tables": tables,
            "selection": [shape.table(t) for t in view.selection], "stats": view.stats, "notes": list(view.notes)}


def grid(run: OpenedRun) -> dict[str, Any]:
    """{"columns": [{"name", "kind"}], "rows": [{"i", "task", "id", "text", "cells": [reward
    or null per column]}], "item": the key prefix of an item's page (append "i")}."""
    summary, per_item = run.summary, _per_item(run)
    columns = [{"name": s["name"], "kind": s["kind"]} for s in summary["systems"]]
    rows = []
    for i, item in enumerate(summary["items"]):
        key = shape.item_key(item["task"], str(item["id"]))
        rows.append({"i": i, "task": item["task"], "id": str(item["id"]),
                     "text": run.episodes.questions.get(key, "")[:QUESTION_CHARS],
                     "cells": [per_item.get(c["name"], {}).get(key) for c in columns]})
    return {"columns": columns, "rows": rows, "item": f"run/{run.id}/item/"}


def _item(run: OpenedRun, i: int) -> tuple[dict[str, Any], str]:
    items = run.summary["items"]
    if not 0 <= i < len(items):
        raise NotFound(f"{run.id} has items 0..{len(items) - 1}, not {i}")
    item = items[i]
    return item, shape.item_key(item["task"], str(item["id"]))


def _episode(ep: Mapping[str, Any]) -> dict[str, Any]:
    return {"seed": ep.get("seed"), "reward": ep.get("reward"), "error": ep.get("error"),
            "transcript": shape.transcript(ep.get("transcript") or {})}


def _columns(run: OpenedRun, key: str, task: str, label: str = "") -> list[dict[str, Any]]:
    """Every system of `run` on item `key`: its reward, its episodes (a derived row: a note)."""
    by_system: dict[str, list[dict[str, Any]]] = {}
    for ep in run.episodes.episodes(key):
        by_system.setdefault(ep["system"], []).append(_episode(ep))
    per_item = _per_item(run)
    out = []
    for system in run.summary["systems"]:
        name, kind = system["name"], system["kind"]
        note = DERIVED_NOTES.get(kind, "").format(member=run.summary.get("best_per_task", {}).get(task, "?"),
                                                  task=task)
        out.append({"name": name, "kind": kind, "run": run.id, "label": f"{name} · {label}" if label else name,
                    "models": list(run.summary["pool"]["models"]), "reward": per_item.get(name, {}).get(key),
                    "episodes": by_system.get(name, []), "note": note})
    return out


def item_page(run: OpenedRun, i: int) -> dict[str, Any]:
    """Item `i` (its place in bench.json's items): the question and every system's episodes."""
    item, key = _item(run, i)
    episodes = run.episodes.episodes(key)
    question = shape.question((episodes[0] if episodes else {}).get("transcript"))
    return {"kind": "item", "title": f"{run.id} · {key}", "run": run.id, "back": f"run/{run.id}",
            "task": item["task"], "id": str(item["id"]), "question": question,
            "models": list(run.summary["pool"]["models"]), "roles": shape.ROLE_NAMES,
            "prev": f"run/{run.id}/item/{i - 1}" if i > 0 else None,
            "next": f"run/{run.id}/item/{i + 1}" if i + 1 < len(run.summary["items"]) else None,
            "columns": _columns(run, key, item["task"])}


# -- two bench runs ----------------------------------------------------------------------
def _changes(a: OpenedRun, b: OpenedRun) -> tuple[list[str], list[dict[str, Any]]]:
    """The systems both runs have, and the rows of the items both have on which one of them
    scored differently: {"i": index in a's items, "task", "id", "text", "cells": [[a's
    reward, b's reward] per system]}."""
    names_b = {s["name"] for s in b.summary["systems"]}
    systems = [s["name"] for s in a.summary["systems"] if s["name"] in names_b]
    per_a, per_b = _per_item(a), _per_item(b)
    keys_b = {shape.item_key(it["task"], str(it["id"])) for it in b.summary["items"]}
    rows = []
    for i, item in enumerate(a.summary["items"]):
        key = shape.item_key(item["task"], str(item["id"]))
        if key not in keys_b:
            continue
        cells = [[per_a.get(s, {}).get(key), per_b.get(s, {}).get(key)] for s in systems]
        if any(x != y for x, y in cells):
            text = a.episodes.questions.get(key) or b.episodes.questions.get(key, "")
            rows.append({"i": i, "task": item["task"], "id": str(item["id"]), "text": text[:QUESTION_CHARS],
                         "cells": cells})
    return systems, rows


def compare_page(a: OpenedRun, b: OpenedRun) -> dict[str, Any]:
    """Two bench runs: the items both hold whose result changed for a system both have."""
    systems, rows = _changes(a, b)
    keys_a = {shape.item_key(it["task"], str(it["id"])) for it in a.summary["items"]}
    keys_b = {shape.item_key(it["task"], str(it["id"])) for it in b.summary["items"]}
    names_a = [s["name"] for s in a.summary["systems"]]
    names_b = [s["name"] for s in b.summary["systems"]]
    return {"kind": "compare", "a": {"id": a.id, "title": a.record.get("title", "")},
            "b": {"id": b.id, "title": b.record.get("title", "")},
            "systems": systems, "common_items": len(keys_a & keys_b),
            "only_a": [n for n in names_a if n not in names_b], "only_b": [n for n in names_b if n not in names_a],
            "grid": {"columns": [{"name": s, "kind": ""} for s in systems], "rows": rows,
                     "item": f"compare/{a.id}/{b.id}/item/"}}


def compare_item(a: OpenedRun, b: OpenedRun, i: int) -> dict[str, Any]:
    """Item `i` of run `a` in both runs: for each system both have whose result changed on it
    (every common system when none did), a's episodes beside b's."""
    item, key = _item(a, i)
    if key not in {shape.item_key(it["task"], str(it["id"])) for it in b.summary["items"]}:
        raise NotFound(f"{b.id} has no item {key}")
    col_a = {c["name"]: c for c in _columns(a, key, item["task"], a.id)}
    col_b = {c["name"]: c for c in _columns(b, key, item["task"], b.id)}
    common = [n for n in col_a if n in col_b]
    changed = [n for n in common if col_a[n]["reward"] != col_b[n]["reward"]] or common
    episodes = a.episodes.episodes(key) or b.episodes.episodes(key)
    return {"kind": "item", "title": f"{a.id} against {b.id} · {key}", "run": a.id,
            "back": f"compare/{a.id}/{b.id}", "task": item["task"], "id": str(item["id"]),
            "question": shape.question((episodes[0] if episodes else {}).get("transcript")),
            "models": list(a.summary["pool"]["models"]), "roles": shape.ROLE_NAMES, "prev": None, "next": None,
            "columns": [col for n in changed for col in (col_a[n], col_b[n])]}
