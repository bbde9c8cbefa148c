"""An evolve run as pages: its facts, the curves per generation (best, mean and validation
fitness, the step size sigma), the tables `trinity inspect` prints (curves, noise, selection;
the one-command evolve's verdict) and the cost it foretold against what it spent; then a
generation's items x candidates grid, and one item's episodes of every candidate side by side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trinity_cli.errors import NotFound, TrinityError
from trinity_cli.runs import reports, verdict
from trinity_cli.runs.reports import DASH, TableView
from trinity_cli.runs.store import RunLock
from trinity_cli.viewer import shape
from trinity_cli.viewer.bench_page import QUESTION_CHARS
from trinity_cli.viewer.opened import OpenedRun


def _sigmas(run: OpenedRun, curves: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """generation -> sigma after it: from the curves, else (runs made before curves kept it)
    from the two checkpoints."""
    kept = {int(c["generation"]): float(c["sigma"]) for c in curves if c.get("sigma") is not None}
    return kept if kept else run.evolve.step_sizes()


def curve_points(run: OpenedRun, record: Mapping[str, Any]) -> dict[str, Any]:
    """What the curves chart draws: {"points": [{"generation", "spent", "best", "mean", "val",
    "sigma"}], "start_val", "sigma0"}."""
    curves = record.get("curves") or []
    sigmas = _sigmas(run, curves)
    points = [{"generation": c["generation"], "spent": c.get("spent"), "best": c.get("best_fitness"),
               "mean": c.get("mean_fitness"), "val": c.get("val"), "sigma": sigmas.get(int(c["generation"]))}
              for c in curves]
    return {"points": points, "start_val": reports.start_validation(record),
            "sigma0": (record.get("options") or {}).get("sigma0")}


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f}"


def _spent(record: Mapping[str, Any], validated: Mapping[str, Any] | None) -> dict[str, tuple[str, str, str]]:
    """phase -> (calls, tokens, hours) this run and its validation bench made: the search
    from the curves (every process's seconds, stopped ones included), the validation from
    its bench run (pool calls, and tokens and pool seconds of the rows it played)."""
    out: dict[str, tuple[str, str, str]] = {}
    curves = record.get("curves") or []
    if curves:
        last = curves[-1]
        seconds = sum(float(c.get("seconds") or 0) + sum(float(p["seconds"]) for p in c.get("interrupted", ()))
                      for c in curves)
        out["search"] = (f"{last.get('pool_calls_total', 0):,}", f"{last.get('tokens_total', 0):,}", _hours(seconds))
    if validated:
        played = [s["name"] for s in validated["systems"] if s["kind"] not in ("vote", "best-per-task", "oracle")]
        overall = [validated["results"][n]["overall"] for n in played]
        tokens = sum(float(m.get("mean_tokens") or 0) * m["n"] for m in overall)
        seconds = sum(float(m.get("mean_wall_s") or 0) * m["n"] for m in overall)
        out["validate"] = (f"{validated['stats']['pool_calls']:,}", f"{tokens:,.0f}", _hours(seconds))
    return out


def cost_table(record: Mapping[str, Any], validated: Mapping[str, Any] | None) -> TableView | None:
    """The one-command evolve's cost foretold (its plan, evolve/cost.py) beside what was made;
    None for a run that is not the recipe's."""
    plan = (record.get("recipe") or {}).get("plan")
    if not plan:
        return None
    made = _spent(record, validated)
    view = TableView("cost foretold and made (made: the search's processes' hours; the validation's pool seconds)",
                     ["phase", "calls foretold", "calls made", "tokens foretold", "tokens made", "hours foretold",
                      "hours made"])
    for phase in plan["phases"]:
        calls, tokens, hours = made.get(phase["name"], (DASH, DASH, DASH))
        view.rows.append([phase["name"], f"{phase['calls']:,}", calls, f"{phase['tokens']:,}", tokens,
                          f"{phase['hours']:.2f}", hours])
        view.kinds.append("")
    return view


def _at(generation: Any) -> str:
    """Where the best head was found: generation -1 is the start, scored before any generation."""
    return "start" if generation == -1 else f"generation {generation}"


def writing(run: OpenedRun, record: Mapping[str, Any]) -> str:
    """An unfinished run's state: "under way" while a process holds its lock (RunLock.held),
    "stopped" when none does (killed, or imported: it waits for `trinity evolve --resume`);
    "" for a finished run."""
    if record.get("status") != "unfinished":
        return ""
    return "under way" if RunLock.held(run.path) else "stopped"


def _facts(run: OpenedRun, record: Mapping[str, Any]) -> list[list[str]]:
    o = record.get("options") or {}
    best = record.get("best_val")
    state = writing(run, record)
    facts = [["pool", str(o.get("pool") or "local")], ["tasks", str(o.get("tasks"))],
             ["validation", str(o.get("val_tasks") or f"{o.get('val_size')} items")],
             ["backbone", str(o.get("backbone"))], ["seed", str(o.get("seed"))],
             ["episodes", f"{record.get('spent')} of {o.get('budget')}"],
             ["population, minibatch", f"{o.get('popsize')}, {o.get('minibatch')}"],
             ["best validation", DASH if best is None else f"{best:.3f} ({_at(record.get('best_generation'))})"],
             ["status", str(record.get("status", "")) + (f" ({state})" if state else "")]]
    if record.get("head"):
        facts.append(["head", str(shape.shown(record["head"]))])
    if o.get("init_labels"):
        facts.append(["start fitted to", str(shape.shown(o["init_labels"]))])
    return facts


def evolve_page(run: OpenedRun) -> dict[str, Any]:
    """The run's page (page keys: viewer/pages.py)."""
    record = run.record
    tables = [shape.table(reports.curve_rows(record.get("curves") or [], reports.start_validation(record)))]
    if record.get("noise"):
        tables.append(shape.table(reports.noise_rows(record["noise"])))
    recipe = record.get("recipe")
    validate_run = ((recipe or {}).get("phases", {}).get("validate") or {}).get("run")
    validated = None
    if validate_run:
        try:
            validated = run.store.load(validate_run).get("summary")
        except TrinityError:  # not in this home, or damaged: the tables show what the run itself knows
            validated = None
    if recipe:
        tables.append(shape.table(verdict.verdict_view(recipe)))
        cost = cost_table(record, validated)
        if cost is not None:
            tables.append(shape.table(cost))
    selection = record.get("selection") or {}
    models = list(dict.fromkeys(m for shares in selection.values() for m in shares["models"]))
    scopes = [(reports.short_task(task), shares) for task, shares in selection.items()]
    tables += [shape.table(t) for t in reports.selection_tables("selection share over training episodes", scopes,
                                                                models)] if scopes else []
    under_way = record.get("under_way") or {}
    popsize = (record.get("options") or {}).get("popsize")
    state = writing(run, record)
    return {
        "kind": "evolve", "id": run.id, "title": record.get("title", ""), "created": record.get("created"),
        "facts": _facts(run, record), "curves": curve_points(run, record), "tables": tables,
        "under_way": (reports.under_way_line(under_way["generation"], under_way["processes"], state == "stopped")
                      if under_way.get("processes") else ""),
        "verdict": {"winner": recipe.get("winner"), "validate": validate_run if validated is not None else None,
                    "validate_named": validate_run} if recipe else None,
        "generations": [{"generation": g, "key": f"run/{run.id}/gen/{g}", "candidates": popsize,
                         **_curve_of(record, g)} for g in run.generation_numbers()],
        "resume": record.get("resume"),
        "state": state,
        "live": state == "under way",  # the page asks again as generations end; a stopped run will not change
    }


def _curve_of(record: Mapping[str, Any], g: int) -> dict[str, Any]:
    for c in record.get("curves") or []:
        if c["generation"] == g:
            return {"best": c.get("best_fitness"), "mean": c.get("mean_fitness"), "val": c.get("val")}
    return {"best": None, "mean": None, "val": None}


def _generation(run: OpenedRun, g: int) -> tuple[dict[str, Any], list[str], dict[str, list[Mapping[str, Any]]]]:
    data = run.generation(g)
    if data is None:
        raise NotFound(f"{run.id} has no generation {g} written", f"see its generations: trinity inspect {run.id}")
    by_item = shape.group_by_item(data["episodes"])
    return data, list(by_item), by_item


def generation_page(run: OpenedRun, g: int) -> dict[str, Any]:
    """Generation `g`: its items (in the order first played) x candidates, each cell that
    candidate's reward on the item; a column's title holds the candidate's fitness."""
    data, keys, by_item = _generation(run, g)
    fitness = data.get("fitness") or []
    n = max([int(ep.get("candidate", 0)) for ep in data["episodes"]] + [len(fitness) - 1, 0]) + 1
    columns = [{"name": f"candidate {c}" + (f" ({fitness[c]:.3f})" if c < len(fitness) else ""), "kind": "candidate"}
               for c in range(n)]
    rows = []
    for i, key in enumerate(keys):
        eps = by_item[key]
        cells: list[float | None] = [None] * n
        for ep in eps:
            cells[int(ep.get("candidate", 0))] = ep.get("reward")
        rows.append({"i": i, "task": eps[0]["task"], "id": str(eps[0]["item"]),
                     "text": shape.question(eps[0].get("transcript"))[:QUESTION_CHARS], "cells": cells})
    return {"kind": "generation", "id": run.id, "generation": g, "title": f"{run.id} · generation {g}",
            "back": f"run/{run.id}", "fitness": fitness,
            "grid": {"columns": columns, "rows": rows, "item": f"run/{run.id}/gen/{g}/item/"}}


def generation_item(run: OpenedRun, g: int, i: int) -> dict[str, Any]:
    """Item `i` of generation `g` (its place in generation_page's rows): every candidate's episode."""
    data, keys, by_item = _generation(run, g)
    if not 0 <= i < len(keys):
        raise NotFound(f"generation {g} of {run.id} has items 0..{len(keys) - 1}, not {i}")
    eps = sorted(by_item[keys[i]], key=lambda ep: int(ep.get("candidate", 0)))
    meta = run.evolve.meta() or {}
    models = list((meta.get("manifest") or {}).get("models") or [])
    fitness = data.get("fitness") or []
    columns = []
    for ep in eps:
        c = int(ep.get("candidate", 0))
        columns.append({"name": f"candidate {c}", "kind": "candidate", "run": run.id, "label": f"candidate {c}",
                        "models": models, "reward": ep.get("reward"),
                        "note": f"fitness {fitness[c]:.3f} over the generation's minibatch" if c < len(fitness) else "",
                        "episodes": [{"seed": ep.get("seed"), "reward": ep.get("reward"), "error": ep.get("error"),
                                      "transcript": shape.transcript(ep.get("transcript") or {})}]})
    return {"kind": "item", "title": f"{run.id} · generation {g} · {keys[i]}", "run": run.id,
            "back": f"run/{run.id}/gen/{g}", "task": eps[0]["task"], "id": str(eps[0]["item"]),
            "question": shape.question(eps[0].get("transcript")), "models": models, "roles": shape.ROLE_NAMES,
            "prev": f"run/{run.id}/gen/{g}/item/{i - 1}" if i > 0 else None,
            "next": f"run/{run.id}/gen/{g}/item/{i + 1}" if i + 1 < len(keys) else None, "columns": columns}


def _setting(value: Any) -> str:
    return DASH if value is None or value == "" else str(shape.shown(value))


def compare_page(a: OpenedRun, b: OpenedRun) -> dict[str, Any]:
    """Two evolve runs: {"kind": "evolve-compare", "a"/"b": {"id", "title", "key"}, "facts":
    [[name, a's, b's]] (the facts of evolve_page), "changed": [[option, a's, b's]] (the
    options the two were given that differ), "curves": {"a", "b"} (curve_points of each)}."""
    fa, fb = dict(_facts(a, a.record)), dict(_facts(b, b.record))
    facts = [[name, fa.get(name, DASH), fb.get(name, DASH)] for name in dict.fromkeys([*fa, *fb])]
    oa, ob = a.record.get("options") or {}, b.record.get("options") or {}
    changed = [[name, _setting(oa.get(name)), _setting(ob.get(name))] for name in sorted({*oa, *ob})
               if oa.get(name) != ob.get(name)]
    return {"kind": "evolve-compare",
            "a": {"id": a.id, "title": a.record.get("title", ""), "key": f"run/{a.id}"},
            "b": {"id": b.id, "title": b.record.get("title", ""), "key": f"run/{b.id}"},
            "facts": facts, "changed": changed,
            "curves": {"a": curve_points(a, a.record), "b": curve_points(b, b.record)}}
