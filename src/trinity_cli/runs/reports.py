"""Renderings of bench and evolve results, one implementation each, all read from one
plain summary: bench.json's summary dict (bench/__init__.py documents it) and evolve's
curves. Their charts (PNG) are runs/charts.py's.

    bench_view(summary)      the bench report as titled tables of formatted cells: the one
                             place numbers become text; Markdown (`report_markdown`) and
                             the terminal (render.bench_tables) both draw it
    report_markdown(summary) report.md
    bench_document(...)      bench.json: the summary plus one record per episode
    selection_tables(...)    a Share per task as two tables (member and role shares; member
                             as role), for bench and evolve alike
    curve_rows(curves)       evolve's curves as formatted cells (render.replay_evolve)
    start_validation(rec)    the validation score of an evolve run's fitted start
    under_way_line(g, procs) an unfinished evolve run's generation in progress, as one line
    pareto_front(summary)    the systems no other is as accurate as for fewer tokens per question
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trinity_cli.messages import ROLES

DASH = "—"  # a number that does not exist (no priced model, no turns)
FAILED = "failed"  # an accuracy that does not exist: every call of the row failed (Metrics "failed")

# Folders of a TRINITY_HOME that runs name files in (heads, the recipe's heads, matrices, runs).
# -- cells -------------------------------------------------------------------------------
def short_task(task: str) -> str:
    """A task name for tables: `file:` tasks by their file name alone."""
    return "file:" + Path(task[5:]).name if task.startswith("file:") else task


def pct(x: float | None) -> str:
    return DASH if x is None else f"{100 * x:.1f}%"


def num(x: float | None, fmt: str = "{:.2f}") -> str:
    return DASH if x is None else fmt.format(x)


def signed(x: float | None) -> str:
    """An accuracy difference in percentage points."""
    return DASH if x is None else f"{100 * x:+.1f} pts"


def interval(m: dict[str, Any]) -> str:
    return DASH if m.get("failed") else f"{pct(m['ci_low'])} – {pct(m['ci_high'])}"


def accuracy_cell(m: dict[str, Any]) -> str:
    """A Metrics' accuracy: `FAILED` for a row whose every call failed (its members' backends
    raised), not the 0.0% of wrong answers."""
    return FAILED if m.get("failed") else pct(m["accuracy"])


def p_value(p: float | None) -> str:
    """A p-value: three decimals, "< 0.001" below that."""
    if p is None:
        return DASH
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


@dataclass
class TableView:
    """A table as text cells; `kinds` gives each row's system kind ("" when none), so a
    renderer can style rows without reading numbers."""

    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    # Columns whose cells are numbers (right-aligned by renderers that align).
    numeric_from: int = 1
    # The system the table is about, when it is about one (selection tables).
    system: str = ""


@dataclass
class BenchView:
    """The bench report: what every rendering of it shows, already formatted."""

    heading: str
    caption: str
    accuracy: TableView
    per_task: TableView | None
    per_task_cost: TableView | None
    gaps: TableView | None
    paired: TableView | None
    selection: list[TableView]
    ends: TableView | None
    workflows: TableView | None
    stats: str
    notes: list[str]


def bench_view(summary: dict[str, Any]) -> BenchView:
    """Format a bench summary (bench.json without "episodes") once, for every rendering."""
    o, pool, task_names = summary["options"], summary["pool"], summary["tasks"]
    several = len(task_names) > 1
    selection = []
    for name, sel in summary["selection"].items():
        scopes = [("all", sel["overall"])]
        if several:
            scopes += [(short_task(t), sel["per_task"][t]) for t in task_names]
        selection += selection_tables(name, scopes, pool["models"])
    st = summary["stats"]
    return BenchView(
        heading=f"trinity bench — {summary['run']}",
        caption=(f"Pool `{pool['name']}` ({', '.join(pool['models'])}) · tasks `{o['tasks']}` "
                 f"({len(summary['items'])} items){turn_budgets(summary['systems'])}"
                 + (f" · random routing over {o['random_seeds']} seeds"
                    if any(s["kind"] == "random" for s in summary["systems"]) else "")
                 + f" · seed {o['seed']}" + _decisions_caption(o)),
        accuracy=_accuracy_table(summary, task_names if several else []),
        per_task=_per_task_table(summary) if several else None,
        per_task_cost=_per_task_cost_table(summary) if several else None,
        gaps=_gaps_table(summary, task_names if several else []),
        paired=_paired_table(summary), selection=selection,
        ends=ends_table(summary, task_names if several else []),
        workflows=workflows_table(summary, task_names if several else []),
        stats=(f"{st['pool_calls']} pool calls, {st['cache_hits']} from the rollout cache"
               + (f" ({st['recorded']} from recordings)" if st.get("recorded") else "") + ", "
               f"{st['backend_calls']} to a model ({st['backend_s']:.1f} s), {st['wall_s']:.1f} s in all"),
        notes=list(summary["notes"]),
    )


def _accuracy_table(summary: dict[str, Any], per_task_cols: list[str]) -> TableView:
    """Accuracy (overall, its interval, per task in `per_task_cols`) and costs per system."""
    accuracy = TableView("Accuracy and cost per question",
                         ["system", "accuracy", "95% CI", *[short_task(t) for t in per_task_cols],
                          "turns", "pool calls", "tokens", "pool s", "cost $"])
    for system in summary["systems"]:
        block = summary["results"][system["name"]]
        m = block["overall"]
        accuracy.rows.append([system["name"], accuracy_cell(m), interval(m),
                              *[accuracy_cell(block["per_task"][t]) for t in per_task_cols],
                              num(m["mean_turns"]), num(m["mean_pool_calls"]), num(m["mean_tokens"], "{:.0f}"),
                              num(m["mean_wall_s"]), num(m["mean_cost_usd"], "{:.5f}")])
        accuracy.kinds.append(system["kind"])
    return accuracy


def _per_task_table(summary: dict[str, Any]) -> TableView:
    return _by_task(summary, "Per task (accuracy, 95% CI, n)", "system",
                    lambda m: f"{accuracy_cell(m)} ({interval(m)}, n={m['n']})")


def _per_task_cost_table(summary: dict[str, Any]) -> TableView:
    """Tokens and turns per question, per task: where each system's cost goes. Its own first
    header cell, so it is not read as the accuracy table of the same columns."""
    return _by_task(summary, "Per task (tokens per question · turns)", "tokens · turns",
                    lambda m: f"{num(m.get('mean_tokens'), '{:.0f}')} · {num(m.get('mean_turns'))}")


def _by_task(summary: dict[str, Any], title: str, corner: str, cell: Callable[[dict[str, Any]], str]) -> TableView:
    """A row per system, a column per task, each cell `cell` of that task's result."""
    task_names = summary["tasks"]
    table = TableView(title, [corner, *[short_task(t) for t in task_names]])
    for system in summary["systems"]:
        per_task = summary["results"][system["name"]]["per_task"]
        table.rows.append([system["name"], *[cell(per_task[t]) for t in task_names]])
        table.kinds.append(system["kind"])
    return table


def _gaps_table(summary: dict[str, Any], task_names: list[str]) -> TableView | None:
    """Each routed system against the best single and the oracle, overall and per task in `task_names`."""
    if not summary["gaps"]:
        return None
    gaps = TableView("Gaps (accuracy difference, percentage points)",
                     ["system", "tasks", "best single model", "vs best single", "vs oracle"], numeric_from=3)
    for name, gap in summary["gaps"].items():
        if gap["overall"] is None:
            continue
        scopes = [("all", gap["overall"])] + [(short_task(t), gap["per_task"][t]) for t in task_names]
        for label, g in scopes:
            if g is not None:
                gaps.rows.append([name, label, g["best_single"], signed(g["vs_best_single"]),
                                  signed(g["vs_oracle"])])
                gaps.kinds.append("")
    return gaps


def _paired_table(summary: dict[str, Any]) -> TableView | None:
    if not summary.get("paired"):  # bench runs made before the paired test have none
        return None
    paired = TableView("Paired test of each head and conductor (exact McNemar, two-sided, same items)",
                       ["system", "against", "items", "only it right", "only other right", "p-value"],
                       numeric_from=2)
    for name, tests in summary["paired"].items():
        for test in tests.values():
            if test is not None:
                paired.rows.append([name, test["other"], str(test["n"]), str(test["b"]), str(test["c"]),
                                    p_value(test["p_value"])])
                paired.kinds.append("")
    return paired


def _decisions_caption(options: dict[str, Any]) -> str:
    """" · heads greedy" / " · heads sampled and greedy" as the options ask, "" for sampled
    heads (bench records before `decisions` carry a `greedy` flag instead)."""
    mode = options.get("decisions") or ("greedy" if options.get("greedy") else "sampled")
    return {"greedy": " · heads greedy", "both": " · heads sampled and greedy"}.get(mode, "")


def turn_budgets(systems: Sequence[dict[str, Any]]) -> str:
    """The caption's turn budget: " · max turns N" when every multi-turn row (head,
    self-loop, random) played N turns, else each row's, "" when there is none. From the
    rows themselves, not the --max-turns option, which is None when each head plays its own."""
    budgets = {s["name"]: s["max_turns"] for s in systems if s["kind"] in ("head", "selfloop", "random")}
    if not budgets:
        return ""
    if len(set(budgets.values())) == 1:
        return f" · max turns {next(iter(budgets.values()))}"
    return " · max turns " + ", ".join(f"{name} {n}" for name, n in budgets.items())


def pareto_front(summary: Mapping[str, Any]) -> list[str]:
    """The systems on the accuracy / tokens-per-question Pareto frontier, fewest tokens first:
    those for which no other system is at least as accurate at no more tokens per question
    while better in one of the two. References (best-per-task, the oracle, vote) are rows
    like any other."""
    rows = []
    for system in summary["systems"]:
        m = summary["results"][system["name"]]["overall"]
        if m.get("mean_tokens") is not None and m.get("accuracy") is not None:
            rows.append((system["name"], float(m["mean_tokens"]), float(m["accuracy"])))
    front = [(n, t, a) for n, t, a in rows
             if not any(t2 <= t and a2 >= a and (t2 < t or a2 > a) for _, t2, a2 in rows)]
    return [n for n, _, _ in sorted(front, key=lambda row: row[1])]


def selection_tables(
    system: str, scopes: Sequence[tuple[str, Mapping[str, Any]]], models: Sequence[str]
) -> list[TableView]:
    """A system's Shares (one per scope: "all", then each task) as tables: each member's and
    each role's share of turns (scope per row); then, when the Shares have pairs, the share
    of each member in each role (a row per pair used in some scope, a column per scope): the
    paper's selection distribution. Shares without a model count it as 0."""
    role_names = [r.value for r in ROLES]
    shares = TableView(system, ["tasks", *models, *role_names], system=system)
    for label, share in scopes:
        shares.rows.append([label, *[pct(share["models"].get(m, 0.0)) for m in models],
                            *[pct(share["roles"].get(r, 0.0)) for r in role_names]])
        shares.kinds.append("")
    tables = [shares]
    if scopes and all("pairs" in share for _, share in scopes):
        pairs = TableView(f"{system}: member as role", ["member", "role", *[label for label, _ in scopes]],
                          numeric_from=2, system=system)
        for m in models:
            for r in role_names:
                cells = [share["pairs"].get(m, {}).get(r, 0.0) for _, share in scopes]
                if any(cells):
                    pairs.rows.append([m, r, *[pct(x) for x in cells]])
                    pairs.kinds.append("")
        tables.append(pairs)
    return tables


# -- bench -------------------------------------------------------------------------------
METHOD_NOTES = (
    "single: the model alone, one Worker turn. selfloop: the model alone for the same turn budget, "
    "Worker and Verifier in turn, stopping on ACCEPT. sc:<model>@K: self-consistency, the model's greedy "
    "reply and K-1 fresh attempts, each from the question alone, plurality (code: the latest passing its "
    "examples); sc:best@K uses the best single member (picked with the test labels). agree: the members "
    "in pool order, round-robin from the question alone, until two answers agree (code: one passes its "
    "examples), plurality at the turn budget. random: uniform model and role each turn, always "
    "sampled; each item scores its mean over the seeds. vote: majority over the single answers (ties: "
    "pool order). best-per-task: per task, the member best on it here (chosen with the test labels: a "
    "reference, not a system). oracle: an item counts as solved if any single model solved it alone in "
    "one Worker turn, i.e. the best per-question pick of one model; it is a reference, not a system, "
    "and not a ceiling: multi-turn systems can solve items that no single model does. moa: "
    "Mixture-of-Agents with one layer: every member's single answer (the single runs), then the "
    "strongest member (best single accuracy here, so picked with the test labels) writes the final "
    "answer from them; its tokens, seconds and cost include the single runs it reads.",
    "95% CI: Wilson score interval over items (random: over items, each scored by its mean over "
    "the seeds). Pool s: seconds the pool calls took when they were made (recorded with each call, so "
    "a replay reports the same); the coordinator's own seconds are not included. "
    "Oracle pool calls, tokens, seconds and cost: sums over all single runs.",
    "Conductor: one model writes each question's workflow (a member, a subtask and the earlier "
    "outputs it reads, per step) and trinity runs it; its pool calls include the conductor's own.",
    "Paired test: each head (and the conductor) against the best single member, the best self-loop, "
    "agree and the best sc row on the same items; "
    "only it right / only other right count the items on which exactly one of the two was right, "
    "and the p-value is the exact two-sided McNemar test (binomial on those items).",
)


# How an episode ended (Transcript.stop_reason), as a column; the optional ones only where some
# episode ended so.
END_COLUMNS = {"agreed": "agreed", "read": "reader stopped", "accepted": "accepted", "max_turns": "turn budget"}
OPTIONAL_ENDS = ("read",)


def ends_table(summary: dict[str, Any], task_names: Sequence[str]) -> TableView | None:
    """How each routed system's episodes ended, overall and per task: shares of agreement,
    a Verifier's ACCEPT and the turn budget (other reasons as "other"), and mean turns; None
    for bench runs recorded before these counts."""
    conducted = summary.get("workflows") or {}  # conductor rows: their own table (workflows_table)
    seen = {r for sel in summary["selection"].values() if "ends" in sel for r in sel["ends"]["overall"]["reasons"]}
    columns = {r: label for r, label in END_COLUMNS.items() if r not in OPTIONAL_ENDS or r in seen}
    table = TableView("How episodes ended (share of episodes; mean turns)",
                      ["system", "tasks", "episodes", *columns.values(), "other", "mean turns"], numeric_from=2)
    for name, sel in summary["selection"].items():
        if "ends" not in sel or name in conducted:
            continue
        scopes = [("all", sel["ends"]["overall"])] + [(short_task(t), sel["ends"]["per_task"][t]) for t in task_names]
        for label, e in scopes:
            reasons = e["reasons"]
            other = sum(v for r, v in reasons.items() if r not in columns)
            table.rows.append([name, label, str(e["episodes"]), *[pct(reasons.get(r, 0.0)) for r in columns],
                               pct(other), num(e["mean_turns"])])
            table.kinds.append("")
    return table if table.rows else None


def workflows_table(summary: dict[str, Any], task_names: Sequence[str]) -> TableView | None:
    """The conductor rows' workflows, overall and per task: how many were read as written,
    repaired or refused (fallback: the agree procedure ran), last steps asked again for a
    missing answer, how many were written under the workflow's JSON schema, mean steps, and
    the topologies written; None without a conductor row."""
    table = TableView("Workflows the conductor wrote (share of questions)",
                      ["system", "tasks", "questions", "constrained", "well-formed", "repaired", "fallback",
                       "re-asked", "mean steps", "topologies"], numeric_from=2)
    for name, block in (summary.get("workflows") or {}).items():
        scopes = [("all", block["overall"])] + [(short_task(t), block["per_task"][t]) for t in task_names]
        for label, w in scopes:
            shapes = ", ".join(f"{t} {pct(v)}" for t, v in w["topologies"].items()) or DASH
            table.rows.append([name, label, str(w["episodes"]), pct(w.get("constrained")), pct(w["well_formed"]),
                               pct(w["repaired"]),
                               pct(w["fallback"]), pct(w.get("reasked")), num(w["mean_steps"], "{:.1f}"), shapes])
            table.kinds.append("")
    return table if table.rows else None


def md_table(table: TableView) -> list[str]:
    lines = ["| " + " | ".join(table.header) + " |", "|" + "|".join("---" for _ in table.header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table.rows]
    return lines


def report_markdown(summary: dict[str, Any]) -> str:
    """The bench report as Markdown: accuracy with CIs, costs, gaps, selection shares."""
    view = bench_view(summary)
    out = [f"# {view.heading}", "", view.caption]
    for table in (view.accuracy, view.per_task, view.per_task_cost, view.gaps, view.paired, view.ends,
                  view.workflows):
        if table is not None:
            out += ["", f"## {table.title}", "", *md_table(table)]
    if view.selection:
        out += ["", "## Selection by task (share of turns given to each member and role)"]
        for table in view.selection:
            out += ["", f"### {table.title}", "", *md_table(table)]
    out += ["", "## Notes", "", *[f"- {n}" for n in METHOD_NOTES], f"- This run: {view.stats}."]
    out += [f"- {note}" for note in view.notes]
    return "\n".join(out) + "\n"


def bench_document(summary: dict[str, Any], episodes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """bench.json: the summary plus the episodes' compact records."""
    return {**summary, "episodes": list(episodes)}


def selection_heads(summary: dict[str, Any]) -> list[str]:
    """The heads of a bench summary with selection shares: the subplots of
    charts.plot_selection."""
    return [s["name"] for s in summary["systems"] if s["kind"] == "head" and s["name"] in summary["selection"]]


# -- evolve ------------------------------------------------------------------------------
def start_validation(record: Mapping[str, Any]) -> float | None:
    """The validation score of an evolve run's fitted start (`--init-labels`, scored before
    generation 0), from a run.json-shaped record or a checkpoint state: its "start_val", else,
    for runs written before that was kept, "best_val" while the best is still the start
    (generation -1; without a fitted start no score is kept for generation -1)."""
    if record.get("start_val") is not None:
        return float(record["start_val"])
    best = record.get("best") or {"val": record.get("best_val"), "generation": record.get("best_generation")}
    return float(best["val"]) if best.get("generation") == -1 and best.get("val") is not None else None


def curve_rows(curves: Sequence[dict[str, Any]], start_val: float | None = None) -> TableView:
    """Evolve's curves as one formatted row per generation (runs written before the
    counters were split per generation show none), after a row for each earlier process
    stopped during that generation (its episodes: how many it finished, replays included);
    first a "start" row with the fitted start's validation when there is one."""
    table = TableView("curves (calls, cache hits and tokens per generation)",
                      ["gen", "episodes", "best fit", "mean fit", "val", "calls", "cache hits", "tokens",
                       "seconds"], numeric_from=0)
    if start_val is not None:
        table.rows.append(["start", "0", "", "", f"{start_val:.3f}", "", "", "", ""])
        table.kinds.append("")
    for c in curves:
        for p in c.get("interrupted", ()):
            table.rows.append([f"{c['generation']} (stopped)", f"{p['episodes']} played", "", "", "",
                               str(p["pool_calls"]), str(p["cache_hits"]), str(p["tokens"]),
                               f"{p['seconds']:.0f}"])
            table.kinds.append("")
        table.rows.append([str(c["generation"]), str(c["spent"]), f"{c['best_fitness']:.3f}",
                           f"{c['mean_fitness']:.3f}", "" if c["val"] is None else f"{c['val']:.3f}",
                           str(c.get("pool_calls_gen", "")), str(c.get("cache_hits_gen", "")),
                           str(c.get("tokens_gen", "")), f"{c['seconds']:.0f}"])
        table.kinds.append("")
    return table


def under_way_line(generation: int, processes: Sequence[Mapping[str, Any]], stopped: bool = False) -> str:
    """The unfinished generation of an evolve run, from what each process did on it
    (run_files.EvolveRun.partial): episodes played so far is the largest count of one process
    (a resumed process replays the episodes the earlier ones finished before it plays new
    ones); calls, cache hits and minutes are summed over all processes. `stopped`: no process
    is playing it now (store.RunLock.held), so it is said to have stopped partway."""
    played = max(int(p["episodes"]) for p in processes)
    calls = sum(int(p["pool_calls"]) for p in processes)
    hits = sum(int(p["cache_hits"]) for p in processes)
    seconds = sum(float(p["seconds"]) for p in processes)
    who = "1 process" if len(processes) == 1 else f"{len(processes)} processes"
    return (f"generation {generation} {'stopped partway' if stopped else 'under way'}: {played} episodes played "
            f"so far, by {who} "
            f"({calls} calls, {hits} from the cache, {seconds / 60:.0f} min)")


def noise_rows(noise: Mapping[str, Any]) -> TableView:
    """An evolve run's fitness noise (runs/noise.py) as one row per minibatch size, in points."""
    table = TableView(f"fitness noise over {noise['generations']} generations (population {noise['population']}, "
                      f"minibatch {noise['minibatch']})",
                      ["minibatch", "one candidate (sd)", "two candidates, paired (sd)", "detectable difference",
                       "spread of candidates (sd)", "share of spread that is noise"], numeric_from=0)
    for r in noise["rows"]:
        share = r.get("noise_share")
        table.rows.append([str(r["size"]), f"{100 * r['one']:.1f} pts", f"{100 * r['pair']:.1f} pts",
                           f"{100 * r['detectable']:.1f} pts",
                           f"{100 * r['spread']:.1f} pts" if "spread" in r else "—",
                           f"{100 * share:.0f}%" if share is not None else "—"])
        table.kinds.append("")
    return table
