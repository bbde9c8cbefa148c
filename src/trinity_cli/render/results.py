"""Results in the terminal: what `evolve` and `bench` print when they end, and `inspect` of
their runs (Rich tables on a terminal, report.md's Markdown when redirected; the cells come
from runs/reports.py, which renders report.md from the same view)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from trinity_cli import paths
from trinity_cli.render import console
from trinity_cli.runs import reports, verdict


def evolve_done(result: Any, as_json: bool = False, quiet: bool = False) -> None:
    """After `evolve`: the head's directory on stdout (unless the run's JSON went there),
    a summary and how to use the head on stderr (unless `quiet`)."""
    if not as_json:
        console.out.print(Text(str(result.head_dir)))
    if quiet:
        return
    val = "n/a" if result.best_val is None else f"{result.best_val:.3f}"
    console.err.print(Text(f"{result.run_id}: {result.generations} generations, {result.spent} training episodes, "
                   f"best validation score {val}", style="bold"))
    console.note(f"use it: trinity ask --head {result.head_dir} \"...\"   curves: {result.head_dir / 'curves.png'}")


def recipe_plan(plan: dict[str, Any]) -> None:
    """The cost plan of the one-command evolve (`--dry-run`, and a run's first lines), on stderr."""
    console.err.print(_table(verdict.plan_view(plan)))
    if plan["unmeasured"]:
        console.note("no call of " + ", ".join(plan["unmeasured"]) + " has been timed here yet: their hours "
                     "assume a 1.5B GGUF on 2 cores")


def recipe_done(result: Any, as_json: bool = False, quiet: bool = False) -> None:
    """After the one-command evolve: what plays the winner on stdout (the head's directory,
    or the pool line; not when the verdict's JSON went there), the verdict table on stderr
    (unless `quiet`)."""
    plays = (str(result.head_dir) if result.head_dir
             else f"router: {result.router}" if result.router else result.winner)
    if not as_json:
        console.out.print(Text(plays))
    if quiet:
        return
    record = {"winner": result.winner, "table": result.table}
    console.err.print(_table(verdict.verdict_view(record)))
    if result.head_dir:
        console.note(f"use it: trinity ask --head {result.head_dir} \"...\"   verdict: {result.verdict_path}")
    elif result.router:
        console.note(f"no head validates above {result.winner}: put `router: {result.router}` in the pool file "
                     f"to play it (verdict: {result.verdict_path})")
    else:
        console.note(f"nothing validates above {result.winner}: ask that member alone (verdict: {result.verdict_path})")


# Row styles of the bench tables by system kind; the cells come from reports.bench_view.
_KIND_STYLE = {"random": "dim", "head": "bold cyan", "conductor": "bold magenta", "oracle": "italic", "vote": "italic",
               "best-per-task": "italic"}


def _table(view: reports.TableView, title: str | None = None) -> Table:
    table = Table(title=escape(title if title is not None else view.title), title_justify="left", header_style="bold",
                  box=None, padding=(0, 1))
    for i, col in enumerate(view.header):
        # The first column names what a user types next (a system, a head): never cut short.
        first = i == 0 and bool(view.rows)
        table.add_column(escape(col), justify="right" if i >= view.numeric_from else "left", no_wrap=first,
                         min_width=max(len(r[0]) for r in view.rows) if first else None)
    for row, kind in zip(view.rows, view.kinds, strict=True):
        table.add_row(*[escape(cell) for cell in row], style=_KIND_STYLE.get(kind, ""))
    return table


def bench_tables(summary: dict[str, Any]) -> Group:
    """The bench report as Rich tables, from the same view as report.md: accuracy and cost
    per system, gaps, paired tests, selection by task (random's left out: it is uniform by
    design)."""
    view = reports.bench_view(summary)
    title = f"{summary['run']} · pool {summary['pool']['name']} · {len(summary['items'])} items"
    parts: list[Any] = [_table(view.accuracy, title)]
    for extra in (view.per_task_cost, view.gaps, view.paired, view.ends, view.workflows):
        if extra is not None and extra.rows:
            parts.append(_table(extra, f"\n{extra.title}"))
    for sel in view.selection:
        if sel.system != "random":
            parts.append(_table(sel, f"\n{sel.title}" + ("" if sel.title != sel.system else ": selection share")))
    parts.append(Text(f"\n{view.stats}", style="dim"))
    for note_text in view.notes:
        parts.append(Text(f"note: {note_text}", style="dim"))
    return Group(*parts)


def bench_done(result: Any, as_json: bool = False, quiet: bool = False) -> None:
    """After `bench`: the tables on stdout (on stderr with --json, whose document alone
    goes to stdout), then where the run's files are."""
    import json

    summary = {k: v for k, v in result.data.items() if k != "episodes"}
    if as_json:
        if not quiet:
            console.err.print(bench_tables(summary))
        console.out.print_json(json.dumps(result.data))
    else:
        _bench_report(summary)
    if not quiet:
        charts = "chart.png, selection.png" if reports.selection_heads(summary) else "chart.png"
        console.note(f"{result.run_id}: bench.json, report.md, {charts} in {result.run_dir} "
             f"— show again with `trinity inspect {result.run_id}`")


def _bench_report(summary: dict[str, Any]) -> None:
    """The bench report on stdout: Rich tables on a terminal; redirected (a file, a pipe),
    report.md's Markdown, whose tables keep their full width."""
    if console.out.is_terminal:
        console.out.print(bench_tables(summary))
    else:
        console.out.print(reports.report_markdown(summary), markup=False, highlight=False, end="")


def _view_table(view: reports.TableView, title: str | None = None) -> None:
    """One table on stdout: Rich on a terminal, Markdown when redirected."""
    if console.out.is_terminal:
        console.out.print(_table(view, title))
    else:
        heading = (title if title is not None else view.title).strip()
        lines = ([f"## {heading}", ""] if heading else []) + reports.md_table(view)
        console.out.print("\n" + "\n".join(lines), markup=False, highlight=False)


def replay_bench(record: dict[str, Any]) -> None:
    """`trinity inspect` of a bench run: its report, as printed when it ran."""
    _bench_report(record["summary"])


def _head_path(path: str | None) -> str:
    """Where an evolve run wrote its head: as recorded when it is on this machine; an imported
    run's (another machine's path), relative to the home that made it (paths.shown_path)."""
    if not path:
        return str(path)
    shown = paths.shown_path(path, keep_existing=True)
    return shown if shown == path else f"{shown} (not here: the run was made in another home, or its head moved)"


def replay_evolve(record: dict[str, Any]) -> None:
    """An evolve run: options, curves, and where the turns went per task."""
    o = record["options"]
    console.out.print(Text(f"{record['id']}  ·  evolve on {o['tasks']}  ·  pool {o['pool'] or 'local'}  ·  "
                   f"backbone {o['backbone']}  ·  seed {o['seed']}", style="bold"))
    best = record.get("best_val")
    best_text = (f"best validation {best if best is None else f'{best:.3f}'} "
                 + ("at the start" if record.get("best_generation") == -1
                    else f"at generation {record.get('best_generation')}"))
    if record.get("status") == "unfinished":
        console.out.print(Text(f"unfinished: {record['spent']} of {o['budget']} training episodes, {best_text}; "
                       f"no head written yet", style="yellow"))
    else:
        console.out.print(Text(f"head: {_head_path(record['head'])}  ({best_text}, {record['spent']} training "
                               "episodes)"))
    # Per-generation counters; runs written before they were split show none.
    _view_table(reports.curve_rows(record["curves"], reports.start_validation(record)))
    under_way = record.get("under_way") or {}
    if under_way.get("processes"):
        console.out.print(Text(reports.under_way_line(under_way["generation"], under_way["processes"])))
    if record.get("noise"):  # runs finished before it was kept show none
        _view_table(reports.noise_rows(record["noise"]))
    # Where the turns went per task, drawn like a bench's selection tables.
    selection = record.get("selection", {})
    models = list(dict.fromkeys(m for shares in selection.values() for m in shares["models"]))
    scopes = [(reports.short_task(task), shares) for task, shares in selection.items()]
    if scopes:
        for view in reports.selection_tables("selection share over training episodes", scopes, models):
            _view_table(view, "\n" + view.title)
    if record.get("recipe"):  # the one-command evolve's verdict (evolve/recipe.py)
        view = verdict.verdict_view(record["recipe"])
        _view_table(view, "\n" + view.title)
    console.note(f"an episode's transcript: trinity inspect {record['id']} --episode GEN/K")
    if record.get("resume"):
        console.note(f"finish it (same options, from its checkpoint): {record['resume']}")
