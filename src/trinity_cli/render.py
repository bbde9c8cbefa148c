"""Everything Rich: the live turn view, run listings and replays, error lines.

Only this module prints. Live progress goes to stderr so that stdout carries nothing
but the answer (or JSON) and pipes cleanly. Text that comes from models, users or files
(replies, answers, prompts, questions, task names, paths) is always printed literally:
as `rich.text.Text`, escaped, or with `markup=False`, never parsed as Rich markup, so a
reply holding `[bold]` or `[/]` shows as written.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from trinity_cli import reports
from trinity_cli.messages import ROLES, Decision, Turn
from trinity_cli.render_workflow import workflow_tree
from trinity_cli.roles import examples_note

err = Console(stderr=True, highlight=False)
out = Console(highlight=False, soft_wrap=True)

ROLE_STYLE = {"thinker": "magenta", "worker": "cyan", "verifier": "yellow"}


def error(message: str, hint: str | None = None) -> None:
    line = Text("error: ", style="bold red")
    line.append(message)
    if hint:
        line.append(f" — {hint}", style="dim")
    err.print(line, soft_wrap=True)


def warning(message: str) -> None:
    """One line on stderr for something the user should know (e.g. code running unisolated)."""
    line = Text("warning: ", style="bold yellow")
    line.append(message)
    err.print(line, soft_wrap=True)


def note(message: str) -> None:
    err.print(Text(message, style="dim"), soft_wrap=True)


def _probs(names: Sequence[str], probs: Sequence[float]) -> str:
    return " ".join(f"{n}={p:.2f}" for n, p in zip(names, probs, strict=False))


def turn_line(turn: Turn) -> Text:
    role = turn.role.value
    line = Text(f"{turn.index + 1:>2}  ", style="bold")
    line.append(f"{turn.model:<20}", style="bold")
    line.append(f"{role:<9}", style=ROLE_STYLE[role])
    tokens = f"{turn.prompt_tokens}→{turn.completion_tokens} tok"
    line.append(f"{tokens:>16}  {turn.latency_s:6.1f}s")
    if turn.cached:
        line.append("  cached", style="green")
    if turn.cost_usd:
        line.append(f"  ${turn.cost_usd:.4f}")
    if turn.verdict:
        line.append(f"  {turn.verdict}", style="bold green" if turn.verdict == "ACCEPT" else "bold red")
    if turn.attempt:
        line.append(f"  attempt {turn.attempt + 1}", style="dim")
    if turn.examples_passed is not None:
        passed = turn.examples_passed
        line.append("  examples passed" if passed else "  examples failed", style="green" if passed else "red")
    if turn.suggestion:
        line.append(f"  next: {turn.suggestion.value}", style="magenta")
    if turn.override:
        line.append(f"  ({turn.override})", style="dim")
    if turn.truncated_turns:
        line.append(f"  [{turn.truncated_turns} old turns left out]", style="dim")
    return line


class LiveTurns:
    """Callbacks for `run_episode` that show each turn as it happens, on stderr."""

    def __init__(self, models: Sequence[str], quiet: bool = False, show_replies: bool = True) -> None:
        self.models = list(models)
        self.quiet = quiet
        self.show_replies = show_replies
        self._status: Any = None

    def __enter__(self) -> LiveTurns:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def on_decision(self, index: int, decision: Decision) -> None:
        if self.quiet:
            return
        self._stop()
        label = f"turn {index + 1}: {decision.model} as {decision.role.value}…"
        self._status = err.status(Text(label, style="dim"))
        self._status.start()

    def on_turn(self, turn: Turn) -> None:
        self._stop()
        if self.quiet:
            return
        err.print(turn_line(turn))
        if self.show_replies:
            reply = turn.reply if len(turn.reply) < 600 else turn.reply[:600] + " …"
            err.print(Text("    " + reply.replace("\n", "\n    "), style="dim"), soft_wrap=True)


def ask_started(pool: Any, coordinator: Any, options: Any) -> None:
    """`trinity ask` has its pool and coordinator (None in conductor mode): the header line
    and head (or conductor) notes."""
    if coordinator is None:
        err.print(Text(f"pool {pool.config.name}: {', '.join(pool.names)}", style="bold"))
        who = options.conductor or pool.config.conductor_name
        note(f"conductor mode: {who} writes the workflow (recursion depth {options.conductor_depth})")
        if options.exclude:
            note(f"excluded: {', '.join(options.exclude)}")
        return
    head = coordinator.head
    ask_header(pool.config.name, pool.names, str(head.manifest.get("name")), head.trained, options.exclude)


def ask_header(pool: str, models: Sequence[str], head: str, trained: bool, excluded: Sequence[str]) -> None:
    err.print(Text(f"pool {pool}: {', '.join(models)}", style="bold"))
    if not trained:
        note("coordinator: untrained head (uniform random routing) — evolve one with `trinity evolve`")
    else:
        note(f"coordinator: head {head}")
    if excluded:
        note(f"excluded: {', '.join(excluded)}")


STOP_REASONS = {
    "accepted": "accepted by a verifier",
    "agreed": "two answers agreed",
    "max_turns": "turn budget spent",
    "token_budget": "token budget spent",
    "cost_budget": "cost budget spent",
    "workflow": "workflow run",
    "fallback": "workflow refused: one-step fallback run",
}


def stop_text(stop_reason: str, accepted: bool = False) -> str:
    """Why an episode ended, in words (Transcript.stop_reason)."""
    if accepted:
        return STOP_REASONS["accepted"]
    return STOP_REASONS.get(stop_reason, stop_reason)


def ask_footer(run_id: str, transcript: Any, wall_s: float) -> None:
    how = stop_text(transcript.stop_reason, transcript.accepted)
    note(
        f"{run_id}: {len(transcript.turns)} turns, {how}, "
        f"{transcript.prompt_tokens + transcript.completion_tokens} tokens, {wall_s:.1f}s "
        f"— replay with `trinity inspect {run_id}`"
    )


def ask_done(result: Any, as_json: bool = False, quiet: bool = False, show_work: bool = False) -> None:
    """After `ask`: the footer on stderr (unless quiet), then on stdout the answer alone
    (answer_text.py), the whole answering reply with `show_work`, or the run record as JSON."""
    import json

    if not quiet:
        ask_footer(result.run_id, result.transcript, result.wall_s)
    if as_json:
        out.print_json(json.dumps(result.record))
    else:
        text = (result.transcript.answer or "") if show_work else result.answer
        out.print(text, markup=False, highlight=False)


def runs_table(runs: Sequence[Any]) -> None:
    if not runs:
        err.print("no runs yet — try: trinity ask \"What is 12*7?\"")
        return
    table = Table(box=None, header_style="bold")
    for col in ("run", "kind", "when", "status", "title"):
        table.add_column(col)
    for run in runs:
        when = dt.datetime.fromtimestamp(run.created).strftime("%Y-%m-%d %H:%M")
        table.add_row(run.id, run.kind, when, run.status, escape(run.title))
    out.print(table)


def replay_ask(record: dict[str, Any]) -> None:
    """Turn-by-turn replay of an ask run: probabilities, chosen pair, prompt, reply."""
    models = record["pool"]["models"]
    tr = record["transcript"]
    seed = record["seed"]
    if record.get("episode_seed") is not None:
        seed = f"{seed} (episode {record['episode_seed']})"
    who = (f"conductor {record.get('conductor')}" if record.get("mode") == "conductor"
           else f"head {(record.get('head') or {}).get('name')}")
    out.print(Text(f"{record['id']}  ·  pool {record['pool']['name']}  ·  {who}  ·  seed {seed}", style="bold"))
    out.print(Text("Task: ", style="bold").append(tr["task"]))
    if tr.get("workflow"):
        out.print(workflow_tree(tr["workflow"]))
    for t in tr["turns"]:
        turn = Turn.from_dict(t)
        probs = Table.grid(padding=(0, 2))
        if tr.get("workflow"):  # conductor mode: no coordinator decisions, the workflow chose
            probs.add_row(Text("ran", style="bold"), f"{turn.model} as {turn.role.value} ({turn.override})")
        else:
            probs.add_row(Text("models", style="bold"), _probs(models, turn.model_probs))
            probs.add_row(Text("roles", style="bold"), _probs([r.value for r in ROLES], turn.role_probs))
            probs.add_row(
                Text("chosen", style="bold"),
                f"{turn.model} as {turn.chosen_role.value}"
                + (f" → acted as {turn.role.value} ({turn.override})" if turn.override else ""),
            )
        stats = (f"{turn.prompt_tokens} prompt + {turn.completion_tokens} completion tokens, "
                 f"{turn.latency_s:.2f}s"
                 + ("" if tr.get("workflow") else f", coordinator {turn.coordinator_s * 1000:.0f} ms")
                 + (", cached" if turn.cached else "")
                 + (f", ${turn.cost_usd:.5f}" if turn.cost_usd else "")
                 + (f", attempt {turn.attempt + 1} (temperature {turn.temperature:g}, seed {turn.sample_seed})"
                    if turn.attempt else "")
                 + (", asked alone" if turn.alone else "")
                 + (", a vote" if turn.vote else "")
                 + (f", agreed with turn {turn.agreed_with + 1}" if turn.agreed_with is not None else ""))
        if turn.examples is not None:
            stats += "\n" + examples_note(turn.examples)
        prompt = "\n\n".join(f"[{m.role}]\n{m.content}" for m in turn.messages)
        body = Group(
            probs,
            Text(stats, style="dim"),
            Panel(Text(prompt, style="dim"), title="prompt sent", title_align="left", border_style="dim"),
            Panel(Text(turn.reply), title="reply" + (f" · {turn.verdict} ({turn.verdict_source})"
                                                     if turn.verdict else ""), title_align="left"),
        )
        title = f"turn {turn.index + 1} · {turn.model} · {turn.role.value}"
        out.print(Panel(body, title=title, title_align="left", border_style=ROLE_STYLE[turn.role.value]))
    end = stop_text(tr.get("stop_reason", "max_turns"), bool(tr["accepted"]))
    out.print(Text(f"Answer ({end}):", style="bold"))
    # An ask run records the answer alone (answer_text.py); other episodes, the answering reply.
    shown = record.get("answer") if record.get("answer") is not None else tr.get("answer")
    out.print(Text(shown or "(none)"))


def _in_flight(data: dict[str, Any]) -> str:
    n = data.get("in_flight", 0)
    return f"{n} in flight" if n else ""


def _at_once(data: dict[str, Any]) -> str:
    """", N at once" when episodes run together; on Ray, how many actors play them."""
    if data.get("ray"):
        return f", {data['parallel']} at once on Ray actors"
    return f", {data['parallel']} at once" if data.get("parallel", 1) > 1 else ""


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class PlainProgress:
    """Progress as plain lines, for a stderr that is not a terminal (`nohup`, a log file),
    where Rich's live bar draws nothing: a line when at least `every_s` seconds passed since
    the last one (TRINITY_PROGRESS_EVERY, default 30), and one at the end:
    `bench: 12/150 episodes · 40 calls, 25 from the cache · 3m10s elapsed · about 35m left`.
    The time left assumes the remaining episodes take as long as the finished ones did."""

    def __init__(self, label: str, done: int = 0) -> None:
        self.label = label
        self.every_s = float(os.environ.get("TRINITY_PROGRESS_EVERY", "30"))
        self.start = self.last = time.monotonic()
        self.first = done  # done before this process started (a resumed run)
        self.ended = False  # the line for done == total was printed

    def update(self, done: int, total: int, detail: str = "", force: bool = False) -> None:
        now = time.monotonic()
        end = done >= total and not self.ended
        if not force and not end and now - self.last < self.every_s:
            return
        self.last = now
        self.ended = self.ended or done >= total
        elapsed = now - self.start
        line = f"{self.label}: {done}/{total} episodes"
        if detail:
            line += f" · {detail}"
        line += f" · {_duration(elapsed)} elapsed"
        if self.first < done < total:
            line += f" · about {_duration(elapsed / (done - self.first) * (total - done))} left"
        err.print(Text(line), soft_wrap=True)


def _calls(data: dict[str, Any]) -> str:
    calls = data.get("pool_calls", 0)
    return f"{calls} calls, {data.get('cache_hits', 0)} from the cache" if calls else ""


class EvolveProgress:
    """Progress callback for `evolve`: a bar over the episode budget (with the episodes in
    flight when several run at once) and one line per generation, on stderr; nothing with
    `quiet`."""

    def __init__(self, quiet: bool = False) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.quiet = quiet
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=err, transient=False,
            disable=quiet or not err.is_terminal,
        )
        self.task: Any = None
        self.gen = ""  # the last generation finished
        self.plain: PlainProgress | None = None  # set at "start" when stderr is not a terminal
        self.spent = self.budget = 0

    def _info(self, data: dict[str, Any]) -> str:
        return " · ".join(x for x in (self.gen, _in_flight(data)) if x)

    def __enter__(self) -> EvolveProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if self.quiet:
            return
        if kind == "resume":
            err.print(Text(f"resuming unfinished {data['run']} (same configuration)", style="yellow"))
        elif kind == "center":
            err.print(Text(f"centring the head's input on the features of {data['items']} training tasks", style="dim"))
        elif kind == "init":
            err.print(Text(f"starting from a head fitted to the sample matrix on {data['items']} training tasks: "
                           f"its picks score {data['picked_label_loo']:.3f} held out (best member "
                           f"{data['best_fixed_label']:.3f}, best pick {data['oracle_label']:.3f})", style="dim"))
        elif kind == "init_val":
            self.progress.console.print(Text(f"start  val {data['val']:.3f}"))
        elif kind == "start":
            at_once = _at_once(data)
            err.print(Text(f"{data['run']}: {data['n_params']} parameters, population {data['popsize']}, "
                           f"{data['per_gen']} episodes per generation{at_once}", style="dim"))
            self.task = self.progress.add_task("episodes", total=data["budget"], completed=data["spent"], info="")
            self.spent, self.budget = data["spent"], data["budget"]
            if not err.is_terminal:
                self.plain = PlainProgress(f"{data['run']} evolve", data["spent"])
        elif kind == "episode_start" and self.task is not None:
            self.progress.update(self.task, info=self._info(data))
        elif kind == "episode" and self.task is not None:
            if data.get("kind") == "train":
                self.progress.advance(self.task)
                self.spent += 1
            self.progress.update(self.task, info=self._info(data))
            if self.plain is not None:
                where = " · ".join(x for x in (self.gen, _calls(data)) if x)
                self.plain.update(self.spent, self.budget, where + (" · validating" if data.get("kind") == "val"
                                                                    else ""))
        elif kind == "generation":
            calls = data["pool_calls_gen"]
            hit = data["cache_hits_gen"] / calls if calls else 0.0
            val = "" if data["val"] is None else f"  val {data['val']:.3f}"
            best = "" if data.get("best_val") is None else f" (best {data['best_val']:.3f})"
            line = (f"gen {data['generation']:>3}  {data['spent']}/{data['budget']} episodes  "
                    f"fitness best {data['best_fitness']:.3f} mean {data['mean_fitness']:.3f}{val}{best}  "
                    f"this generation: {calls} calls, cache {hit:.0%}, {data['tokens_gen']} tokens")
            self.progress.console.print(Text(line))
            if self.task is not None:
                self.gen = f"gen {data['generation']}"
                self.spent = data["spent"]
                self.progress.update(self.task, completed=data["spent"], info=self.gen)


def evolve_done(result: Any, as_json: bool = False, quiet: bool = False) -> None:
    """After `evolve`: the head's directory on stdout (unless the run's JSON went there),
    a summary and how to use the head on stderr (unless `quiet`)."""
    if not as_json:
        out.print(Text(str(result.head_dir)))
    if quiet:
        return
    val = "n/a" if result.best_val is None else f"{result.best_val:.3f}"
    err.print(Text(f"{result.run_id}: {result.generations} generations, {result.spent} training episodes, "
                   f"best validation score {val}", style="bold"))
    note(f"use it: trinity ask --head {result.head_dir} \"...\"   curves: {result.head_dir / 'curves.png'}")


# -- bench ---------------------------------------------------------------------------------
class BenchProgress:
    """Progress callback for `bench`: one bar over all episodes, named after the system
    being run, with the share of pool calls served by the rollout cache so far."""

    def __init__(self, quiet: bool = False) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.quiet = quiet
        self.progress = Progress(
            TextColumn("[bold]{task.description:<24}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"), TimeRemainingColumn(), console=err, transient=False,
            disable=quiet or not err.is_terminal,
        )
        self.task: Any = None
        self.plain: PlainProgress | None = None  # set at "start" when stderr is not a terminal
        self.done = self.total = 0
        self.system = ""

    def __enter__(self) -> BenchProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "start":
            if not self.quiet:
                at_once = _at_once(data)
                err.print(Text(f"{data['run']}: {data['items']} items × {len(data['systems'])} systems "
                               f"({data['episodes']} episodes{at_once})", style="dim"))
            self.task = self.progress.add_task("bench", total=data["episodes"], info="")
            self.total = data["episodes"]
            if not self.quiet and not err.is_terminal:
                self.plain = PlainProgress(f"{data['run']} bench")
        elif kind == "system" and self.task is not None:
            self.system = data["name"]
            self.progress.update(self.task, description=escape(data["name"]))
        elif kind == "episode" and self.task is not None:
            calls = data["pool_calls"]
            info = f"cache {data['cache_hits'] / calls:.0%} of {calls} calls" if calls else ""
            flying = _in_flight(data)
            info = f"{info} · {flying}" if info and flying else info or flying
            self.progress.update(self.task, advance=1, info=info)
            self.done += 1
            if self.plain is not None:
                self.plain.update(self.done, self.total, " · ".join(x for x in (_calls(data), self.system) if x))


# Row styles of the bench tables by system kind; the cells come from reports.bench_view.
_KIND_STYLE = {"random": "dim", "head": "bold cyan", "conductor": "bold magenta", "oracle": "italic", "vote": "italic",
               "best-per-task": "italic"}


def _table(view: reports.TableView, title: str | None = None) -> Table:
    table = Table(title=escape(title if title is not None else view.title), title_justify="left", header_style="bold",
                  box=None, padding=(0, 1))
    for i, col in enumerate(view.header):
        table.add_column(escape(col), justify="right" if i >= view.numeric_from else "left")
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
    for extra in (view.gaps, view.paired, view.ends, view.workflows):
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
            err.print(bench_tables(summary))
        out.print_json(json.dumps(result.data))
    else:
        _bench_report(summary)
    if not quiet:
        charts = "chart.png, selection.png" if reports.selection_heads(summary) else "chart.png"
        note(f"{result.run_id}: bench.json, report.md, {charts} in {result.run_dir} "
             f"— show again with `trinity inspect {result.run_id}`")


def _bench_report(summary: dict[str, Any]) -> None:
    """The bench report on stdout: Rich tables on a terminal; redirected (a file, a pipe),
    report.md's Markdown, whose tables keep their full width."""
    if out.is_terminal:
        out.print(bench_tables(summary))
    else:
        out.print(reports.report_markdown(summary), markup=False, highlight=False, end="")


def _view_table(view: reports.TableView, title: str | None = None) -> None:
    """One table on stdout: Rich on a terminal, Markdown when redirected."""
    if out.is_terminal:
        out.print(_table(view, title))
    else:
        heading = (title if title is not None else view.title).strip()
        lines = ([f"## {heading}", ""] if heading else []) + reports.md_table(view)
        out.print("\n" + "\n".join(lines), markup=False, highlight=False)


def replay_bench(record: dict[str, Any]) -> None:
    """`trinity inspect` of a bench run: its report, as printed when it ran."""
    _bench_report(record["summary"])


def replay_evolve(record: dict[str, Any]) -> None:
    """An evolve run: options, curves, and where the turns went per task."""
    o = record["options"]
    out.print(Text(f"{record['id']}  ·  evolve on {o['tasks']}  ·  pool {o['pool'] or 'local'}  ·  "
                   f"backbone {o['backbone']}  ·  seed {o['seed']}", style="bold"))
    best = record.get("best_val")
    best_text = (f"best validation {best if best is None else f'{best:.3f}'} "
                 f"at generation {record.get('best_generation')}")
    if record.get("status") == "unfinished":
        out.print(Text(f"unfinished: {record['spent']} of {o['budget']} training episodes, {best_text}; "
                       f"no head written yet", style="yellow"))
    else:
        out.print(Text(f"head: {record['head']}  ({best_text}, {record['spent']} training episodes)"))
    # Per-generation counters; runs written before they were split show none.
    _view_table(reports.curve_rows(record["curves"]))
    # Where the turns went per task, drawn like a bench's selection tables.
    selection = record.get("selection", {})
    models = list(dict.fromkeys(m for shares in selection.values() for m in shares["models"]))
    scopes = [(reports.short_task(task), shares) for task, shares in selection.items()]
    if scopes:
        for view in reports.selection_tables("selection share over training episodes", scopes, models):
            _view_table(view, "\n" + view.title)
    note(f"an episode's transcript: trinity inspect {record['id']} --episode GEN/K")
    if record.get("resume"):
        note(f"finish it (same options, from its checkpoint): {record['resume']}")


def replay_transcript(title: str, models: Sequence[str], transcript: dict[str, Any], seed: Any = "") -> None:
    """Replay a transcript that is not an ask run (an evolve or bench episode)."""
    replay_ask({"id": title, "pool": {"name": "", "models": list(models)}, "head": {"name": ""}, "seed": seed,
                "transcript": transcript})


def pools_list(pools: Sequence[tuple[str, str, Sequence[tuple[str, str]]]]) -> None:
    """`trinity pools`: each pool's name and file, then its models as "name (what)"."""
    for name, path, models in pools:
        line = Text(name, style="bold")
        line.append(f"  {path}\n  " + ", ".join(f"{m} ({what})" for m, what in models))
        out.print(line)


SERVE_LOADING = {
    "pool": "loading pool {what}: checking its model files (assembled once, the first time)…",
    "backbone": "loading head {what}'s coordinator backbone (converted once, the first time: about a minute)…",
}


def serve_loading(step: str, what: str) -> None:
    """A step of `trinity serve`'s start-up, one plain line each (a log shows them too)."""
    note("trinity serve: " + SERVE_LOADING.get(step, step + " {what}…").format(what=what))


def serve_started(served: Any, url: str, exposed: bool) -> None:
    """`trinity serve` is listening: one line with its URL, model ids, pool and auth;
    a warning when it is `exposed` (beyond loopback without a token)."""
    line = Text("trinity serve ", style="bold")
    line.append(url, style="bold cyan")
    line.append(f"  models: {', '.join(served.served_models())}")
    line.append(f"  pool {served.config.name} ({', '.join(served.config.names)}), head {served.default_head}",
                style="dim")
    line.append("  bearer auth" if served.token else "  no auth", style="dim")
    err.print(line, soft_wrap=True)
    if exposed:
        note(f"warning: listening on {served.options.host} without --api-key-env: anyone who can reach it can use it")


def serve_run(result: Any) -> None:
    """One served episode, in one line."""
    transcript = result.transcript
    route = " ".join(f"{t.model}:{t.role.value}" for t in transcript.turns)
    note(f"{result.run_id}: {len(transcript.turns)} turns ({route}), {transcript.stop_reason}, "
         f"{transcript.prompt_tokens + transcript.completion_tokens} tokens, {result.wall_s:.1f}s")


def serve_failure(exc: Any) -> None:
    """A served request that failed with a TrinityError."""
    error(f"request failed: {exc.message}", exc.hint)
