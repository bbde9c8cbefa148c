"""The one-command evolve's tables (evolve/recipe.py): its cost plan and its verdict, as
TableViews that render/results.py draws and `trinity inspect` shows."""

from __future__ import annotations

from typing import Any

from trinity_cli.runs.reports import TableView


def _paired(test: list[Any] | None) -> str:
    return "—" if not test else f"{test[0]}/{test[1]} p={test[2]:.2f}"


def verdict_view(record: dict[str, Any]) -> TableView:
    """The verdict table: each validated row's accuracy, tokens and paired counts (b items
    only this row got right, c only the other) against `agree` and the best member."""
    rows = record["table"]
    fitness = any("fitness" in r for r in rows)  # a reader's recipe (evolve/reader_recipe.py)
    best = any("vs_best_single" in r for r in rows)
    header = ["row", "accuracy", "right", "tokens", *(["fitness"] if fitness else []), "vs agree",
              *(["vs best member"] if best else [])]
    view = TableView(f"verdict: {record['winner']} validates best (paired: b/c, items only this row / only the "
                     "other got right)", header)
    for row in rows:
        winner = row["row"] == record["winner"]
        # a reader's agree that stopped early where its matrix lacked an attempt (evolve/reader_recipe.py)
        capped = f" (stopped early on {row['capped']}: the matrix lacks attempts)" if row.get("capped") else ""
        view.rows.append([row["row"] + capped + (" *" if winner else ""),
                          "—" if row["accuracy"] is None else f"{row['accuracy']:.1%}",
                          f"{row['correct']:g}/{row['n']}", f"{row['tokens']:,.0f}",
                          *([f"{row['fitness']:.3f}"] if fitness else []), _paired(row["vs_agree"]),
                          *([_paired(row.get("vs_best_single"))] if best else [])])
        view.kinds.append("head" if row["kind"] in ("start", "search", "reader") else row["kind"])
    return view


def plan_view(plan: dict[str, Any]) -> TableView:
    """The cost plan: calls, tokens, hours and dollars per phase (evolve/cost.py)."""
    view = TableView("what the run will cost: tokens, hours and USD of the calls not known to be recorded",
                     ["phase", "pool calls", "recorded", "tokens", "hours", "USD"])
    for phase in plan["phases"]:
        usd = "—" if phase["usd"] is None else f"{phase['usd']:.2f}"
        view.rows.append([phase["name"], f"{phase['calls']:,}", f"{phase.get('recorded', 0):,}", f"{phase['tokens']:,}",
                          f"{phase['hours']:.2f}", usd])
        view.kinds.append("")
    return view
