"""Conversations in the terminal: the live turn view of `ask`, its answer, replays of ask runs
and transcripts, the run listing, the pools listing and `serve`'s lines. Printing goes
through render/console.py (literal text, stdout for the answer alone)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from trinity_cli.answer_kinds import answer_kind
from trinity_cli.answer_kinds.registry import FALLBACK
from trinity_cli.events import (
    AskStarted,
    ContextShortened,
    DecisionMade,
    Event,
    KindFollowed,
    RequestAnswered,
    RequestFailed,
    ServeLoading,
    ServeStarted,
    TextWritten,
    TurnPlayed,
)
from trinity_cli.messages import ROLES, Turn
from trinity_cli.render import console
from trinity_cli.render.workflow import workflow_tree
from trinity_cli.runs.reports import TableView, md_table


def _probs(names: Sequence[str], probs: Sequence[float]) -> str:
    return " ".join(f"{n}={p:.2f}" for n, p in zip(names, probs, strict=False))


def turn_line(turn: Turn) -> Text:
    role = turn.role.value
    line = Text(f"{turn.index + 1:>2}  ", style="bold")
    line.append(f"{turn.model:<20}", style="bold")
    line.append(f"{role:<9}", style=console.ROLE_STYLE[role])
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
        passed, what = turn.examples_passed, "constraints" if "checked" in (turn.examples or {}) else "examples"
        line.append(f"  {what} {'passed' if passed else 'failed'}", style="green" if passed else "red")
    if (turn.examples or {}).get("repeats"):
        line.append("  repeats", style="red")
    if turn.finish_reason == "length":
        line.append("  cut at the token cap", style="red")
    if turn.suggestion:
        line.append(f"  next: {turn.suggestion.value}", style="magenta")
    if turn.override:
        line.append(f"  ({turn.override})", style="dim")
    if turn.truncated_turns:
        line.append(f"  [{turn.truncated_turns} old turns left out]", style="dim")
    if turn.error is not None:
        line.append(f"  failed: {turn.error}", style="bold red")
    return line


class LiveTurns:
    """`trinity ask`'s progress (events.py): the header once the pool is ready, a spinner
    while a turn runs, each turn as it is recorded; on stderr. With `quiet`, only a member
    whose call failed, one line each once the question is answered (when none answered, the
    command's error says so instead)."""

    def __init__(self, quiet: bool = False, show_replies: bool = True) -> None:
        self.quiet = quiet
        self.show_replies = show_replies
        self._status: Any = None
        self._writing: int | None = None  # the turn whose reply is being shown as it is written
        self._failed: dict[str, str] = {}  # quiet: member -> its first failure

    def __enter__(self) -> LiveTurns:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop()
        if exc_type is None:
            for member, error in self._failed.items():
                console.warning(f"member {member!r} failed: {error}; the others answered without it")

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __call__(self, event: Event) -> None:
        if self.quiet:
            if isinstance(event, TurnPlayed) and event.turn.error is not None:
                self._failed.setdefault(event.turn.model, event.turn.error)
            return
        match event:
            case AskStarted():
                ask_started(event)
            case ContextShortened(left_out=left_out, messages=messages, n_ctx=n_ctx):
                console.warning(f"the conversation is longer than a member's context ({n_ctx} tokens): its "
                                f"{left_out} oldest of {messages} messages are left out")
            case KindFollowed(kind=kind):
                console.note(f"answered as {kind}, as the answer before it (the message asks for no kind of its "
                             "own; --kind or /kind says it)")
            case DecisionMade(index=index, decision=decision):
                self._stop()
                label = f"turn {index + 1}: {decision.model} as {decision.role.value}…"
                self._status = console.err.status(Text(label, style="dim"))
                self._status.start()
            case TextWritten(index=index, text=text) if self.show_replies:
                if self._writing != index:
                    self._stop()
                    self._writing = index
                    console.err.print("    ", end="")
                console.err.print(Text(text.replace("\n", "\n    "), style="dim"), end="", soft_wrap=True)
            case TurnPlayed(turn=turn):
                self._stop()
                streamed, self._writing = self._writing == turn.index, None
                if streamed:
                    console.err.print()
                console.err.print(turn_line(turn))
                if self.show_replies and turn.error is None and not streamed:
                    reply = turn.reply if len(turn.reply) < 600 else turn.reply[:600] + " …"
                    console.err.print(Text("    " + reply.replace("\n", "\n    "), style="dim"), soft_wrap=True)


def ask_started(event: AskStarted) -> None:
    """The header line and head (or conductor, or procedure) notes of `trinity ask`. When a
    policy that reads no head answers (agree, a package's), the first line names it, and why
    when it is the pool's default; the next says what it does (its summary). The first line
    opens with the answer kind the question is played as (`kind_line`), so one line says both
    what was read and who answers."""
    lead = Text(kind_line(event.answer_kind, event.kind_read) + " · " if event.answer_kind else "", style="bold")
    if event.procedure is not None:
        line = lead + Text(f"pool {event.pool}: {', '.join(event.models)} · {event.procedure}", style="bold")
        if event.procedure_is_default:
            line.append(f" (the pool's default: no trained head validates above {event.procedure}; "
                        "--head NAME asks a head)", style="dim")
        console.err.print(line, soft_wrap=True)
        if event.summary:
            console.note(f"{event.procedure}: {event.summary}")
        if event.excluded:
            console.note(f"excluded: {', '.join(event.excluded)}")
        return
    if event.head is None:
        console.err.print(lead + Text(f"pool {event.pool}: {', '.join(event.models)}", style="bold"), soft_wrap=True)
        console.note(f"conductor mode: {event.conductor} writes the workflow (recursion depth "
                     f"{event.conductor_depth})")
        if event.excluded:
            console.note(f"excluded: {', '.join(event.excluded)}")
        return
    ask_header(event, lead)


def kind_line(kind: str, read: bool) -> str:
    """The answer kind `ask` plays a question as, and how to have another: ask's first line."""
    if not read:
        return f"answer kind: {kind} (as --kind says)"
    other = "short" if kind == FALLBACK else FALLBACK
    return (f"answer kind: {kind}, read from the question (--kind {other} for "
            f"{'a short answer' if other == 'short' else 'a whole answer'}; trinity pools lists the kinds)")


def ask_header(event: AskStarted, lead: Text | None = None) -> None:
    """The first line (after `lead`: the answer kind) names the pool and who plays (the head or
    reader, and whether it is the pool's default head); an untrained head adds how to make one."""
    played = event.played or ("untrained head (uniform random routing)" if event.uniform else f"head {event.head}")
    line = (lead or Text()) + Text(f"pool {event.pool}: {', '.join(event.models)} · {played}", style="bold")
    if event.head_is_default:
        line.append(" (the default head; --head NAME asks another)", style="dim")
    console.err.print(line, soft_wrap=True)
    if event.uniform:
        console.note("coordinator: the untrained head routes at random — evolve one with `trinity evolve`")
    if event.excluded:
        console.note(f"excluded: {', '.join(event.excluded)}")


STOP_REASONS = {
    "accepted": "accepted by a verifier",
    "agreed": "two answers agreed",
    "read": "the reader's score of the replies said stop",
    "max_turns": "turn budget spent",
    "token_budget": "token budget spent",
    "cost_budget": "cost budget spent",
    "workflow": "workflow run",
    "fallback": "workflow refused: the agree procedure ran instead",
    "failed": "every member left to ask failed",
}


def stop_text(stop_reason: str, accepted: bool = False) -> str:
    """Why an episode ended, in words (Transcript.stop_reason)."""
    if accepted:
        return STOP_REASONS["accepted"]
    return STOP_REASONS.get(stop_reason, stop_reason)


def ask_footer(run_id: str, transcript: Any, wall_s: float) -> None:
    how = stop_text(transcript.stop_reason, transcript.accepted)
    console.note(
        f"{run_id}: {len(transcript.turns)} turns, {how}, "
        f"{transcript.prompt_tokens + transcript.completion_tokens} tokens, {wall_s:.1f}s "
        f"— replay with `trinity inspect {run_id}`"
    )


def ask_done(result: Any, as_json: bool = False, quiet: bool = False, show_work: bool = False) -> None:
    """After `ask`: the footer on stderr (unless quiet), then on stdout the answer alone
    (turns/answer_text.py), the whole answering reply with `show_work`, or the run record as JSON."""
    import json

    if not quiet:
        ask_footer(result.run_id, result.transcript, result.wall_s)
    if as_json:
        console.out.print_json(json.dumps(result.record))
    else:
        text = (result.transcript.answer or "") if show_work else result.answer
        console.out.print(text, markup=False, highlight=False)


def runs_table(runs: Sequence[Any]) -> None:
    """`trinity inspect`: every run, one line each (a Rich table; Markdown when redirected)."""
    if not runs:
        console.err.print("no runs yet — try: trinity ask \"What is 12*7?\"")
        return
    view = TableView("", ["run", "kind", "when", "status", "title"], numeric_from=5)
    for run in runs:
        # 0: a time the run's files do not record (an unfinished run imported from elsewhere)
        when = dt.datetime.fromtimestamp(run.created).strftime("%Y-%m-%d %H:%M") if run.created else "—"
        view.rows.append([run.id, run.kind, when, run.status, run.title])
    if not console.out.is_terminal:
        console.out.print("\n".join(md_table(view)), markup=False, highlight=False)
        return
    table = Table(box=None, header_style="bold")
    for col in view.header:
        table.add_column(col)
    for row in view.rows:
        table.add_row(*[escape(cell) for cell in row])
    console.out.print(table)


def replay_ask(record: dict[str, Any], show_task: bool = True) -> None:
    """Turn-by-turn replay of an ask run: probabilities, chosen pair, prompt, reply (the
    task first, unless `show_task` is False: a caller that showed it already)."""
    models = record["pool"]["models"]
    tr = record["transcript"]
    seed = record["seed"]
    if record.get("episode_seed") is not None:
        seed = f"{seed} (episode {record['episode_seed']})"
    head = record.get("head")
    who = (f"head {head.get('name')}" if head else f"conductor {record.get('conductor')}" if record.get("conductor")
           else f"{record.get('mode')} procedure")
    said = [record["id"], f"pool {record['pool']['name']}" if record["pool"]["name"] else "",
            who if who.split(" ", 1)[-1].strip() else "", f"seed {seed}"]  # an episode's: no pool, no head
    console.out.print(Text("  ·  ".join(part for part in said if part), style="bold"))
    if show_task:
        console.out.print(Text("Task: ", style="bold").append(tr["task"]))
    if tr.get("workflow"):
        console.out.print(workflow_tree(tr["workflow"]), soft_wrap=False)  # wrapped inside (console.py)
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
        checks = turn.examples or {}
        if turn.examples_passed is not None:
            stats += "\n" + answer_kind(record.get("answer_kind")).check_note(checks)
        if checks.get("repeats"):
            stats += f"\n(trinity: {checks['repeats']})"
        prompt = "\n\n".join(f"[{m.role}]\n{m.content}" for m in turn.messages)
        body = Group(
            probs,
            Text(stats, style="dim"),
            Panel(Text(prompt, style="dim"), title="prompt sent", title_align="left", border_style="dim"),
            Panel(Text(turn.reply), title="reply" + (f" · {turn.verdict} ({turn.verdict_source})"
                                                     if turn.verdict else ""), title_align="left")
            if turn.error is None else Panel(Text(turn.error, style="red"), title="the call failed",
                                             title_align="left", border_style="red"),
        )
        title = f"turn {turn.index + 1} · {turn.model} · {turn.role.value}"
        style = console.ROLE_STYLE[turn.role.value]
        # Wrapped inside its panels at any width, never cropped at the border (console.py).
        console.out.print(Panel(body, title=title, title_align="left", border_style=style), soft_wrap=False)
    end = stop_text(tr.get("stop_reason", "max_turns"), bool(tr["accepted"]))
    console.out.print(Text(f"Answer ({end}):", style="bold"))
    # An ask run records the answer alone (turns/answer_text.py); other episodes, the answering reply.
    shown = record.get("answer") if record.get("answer") is not None else tr.get("answer")
    console.out.print(Text(shown or "(none)"))


def replay_transcript(title: str, models: Sequence[str], transcript: dict[str, Any], seed: Any = "",
                      show_task: bool = True) -> None:
    """Replay a transcript that is not an ask run (an evolve or bench episode)."""
    replay_ask({"id": title, "pool": {"name": "", "models": list(models)}, "head": {"name": ""}, "seed": seed,
                "transcript": transcript}, show_task=show_task)


def _reward_text(reward: Any) -> Text:
    if reward is None:
        return Text("no result", style="dim")
    value = float(reward)
    style = "green" if value >= 1 else "red" if value <= 0 else "yellow"
    return Text("right" if value >= 1 else "wrong" if value <= 0 else f"{value:.2f}", style=style)


def replay_bench_item(item: dict[str, Any]) -> None:
    """`trinity inspect RUN --item ID` (RunStore.bench_item): the question once, then each row
    of the bench on it, its result and its episodes turn by turn; a row that plays nothing
    (vote, best-per-task, the oracle) says what its result is made of."""
    console.out.print(Text(f"{item['run']}  ·  {item['task']}/{item['id']}", style="bold"))
    console.out.print(Text("Task: ", style="bold").append(item["question"] or "(not recorded)"))
    for system in item["systems"]:
        head = Text(f"\n── {system['name']} ", style="bold").append_text(_reward_text(system["reward"]))
        console.out.print(head)
        if not system["episodes"]:
            console.out.print(Text("plays nothing: its result is made of the single rows' answers"
                                   if system["kind"] in ("vote", "best-per-task", "oracle")
                                   else "no episode recorded", style="dim"))
        for k, ep in enumerate(system["episodes"]):
            if ep.get("error"):
                console.out.print(Text(f"failed: {ep['error']}", style="red"))
            if ep.get("transcript"):
                several = len(system["episodes"]) > 1
                title = f"episode {k + 1} of {len(system['episodes'])}" if several else "episode"
                replay_transcript(f"{title} · reward {ep.get('reward')}", item["models"], ep["transcript"],
                                  ep.get("seed"), show_task=False)


def pools_list(pools: Sequence[Any]) -> None:
    """`trinity pools`: each pool's name and file (catalog.PoolListing), then its models as
    "name (what)", or why its file cannot be read."""
    for pool in pools:
        line = Text(pool.name, style="bold")
        line.append(f"  {pool.path}\n  ")
        if pool.unreadable is not None:
            line.append(f"unreadable: {pool.unreadable}", style="red")
        else:
            line.append(", ".join(f"{m} ({what})" for m, what in pool.members))
        console.out.print(line)


def catalog_list(found: Any) -> None:
    """`trinity pools`: the pools (`pools_list`), then each registry's names (catalog.py), a
    package's marked with its entry."""
    pools_list(found.pools)
    for section, entries in found.sections.items():
        console.out.print(Text(f"\n{section}", style="bold"))
        for entry in entries:
            line = Text(f"  {entry.name}", style="bold")
            line.append(f"  {entry.summary}" if entry.summary else "")
            if entry.source != "built in":
                line.append(f"  (from {entry.source})", style="dim")
            console.out.print(line, soft_wrap=True)


def pool_checked(listing: Any) -> None:
    """`trinity pools --check FILE`: the pool read as a run reads it, and its members."""
    console.out.print(Text(f"{listing.path}: pool {listing.name} is well formed "
                           f"({len(listing.members)} member{'s' if len(listing.members) != 1 else ''} checked)",
                           style="bold"))
    for name, what in listing.members:
        console.out.print(f"  {name} ({what})", markup=False, highlight=False)

SERVE_LOADING = {
    "pool": "loading pool {what}: checking its model files (assembled once, the first time)…",
    "backbone": "loading head {what}'s coordinator backbone (converted once, the first time: about a minute)…",
}


def serve_progress(event: Event) -> None:
    """`trinity serve`'s console log (events.py): start-up steps, the listening line, one line
    per request."""
    match event:
        case ServeLoading(step=step, what=what, default=default):
            line = "trinity serve: " + SERVE_LOADING.get(step, step + " {what}…").format(what=what)
            if default:
                line += (f" (model \"trinity\" answers with the {default} procedure, the pool's default: no trained "
                         f"head validates above it)")
            console.note(line)
        case ServeStarted():
            serve_started(event)
        case RequestAnswered(result=result):
            serve_run(result)
        case RequestFailed(error=error):
            console.error(f"request failed: {error.message}", error.hint)


def serve_started(event: ServeStarted) -> None:
    """`trinity serve` is listening: one line with its URL, model ids, pool and auth;
    a warning when it is `exposed` (beyond loopback without a token)."""
    line = Text("trinity serve ", style="bold")
    line.append(event.url, style="bold cyan")
    line.append(f"  models: {', '.join(event.models)}")
    line.append(f"  pool {event.pool} ({', '.join(event.members)}), head {event.head}", style="dim")
    line.append("  bearer auth" if event.auth else "  no auth", style="dim")
    console.err.print(line, soft_wrap=True)
    if event.exposed:
        console.note(f"warning: listening on {event.host} without --api-key-env: "
                     "anyone who can reach it can use it")


def serve_run(result: Any) -> None:
    """One served episode, in one line."""
    transcript = result.transcript
    route = " ".join(f"{t.model}:{t.role.value}" for t in transcript.turns)
    console.note(f"{result.run_id}: {len(transcript.turns)} turns ({route}), {transcript.stop_reason}, "
         f"{transcript.prompt_tokens + transcript.completion_tokens} tokens, {result.wall_s:.1f}s")
