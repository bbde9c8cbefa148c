"""Live progress of the long commands, `evolve`, `bench` and `matrix`, on stderr: a Rich bar on a
terminal, plain lines every so often where Rich draws nothing (`nohup`, a log file).

The consoles are render/terminal.py's, read when used, so whatever replaces `console.err` (a test)
receives the progress too.
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Any, TypeVar

from rich.markup import escape
from rich.text import Text

from trinity_cli.events import (
    BenchEpisodeFinished,
    BenchStarted,
    CentreFitting,
    Event,
    EvolveEpisodeFinished,
    EvolveEpisodeStarted,
    EvolveStarted,
    GenerationFinished,
    MatrixItemPlayed,
    MemberFailing,
    ReaderGeneration,
    RecipePhase,
    RotationFitted,
    RotationPlaying,
    RunResumed,
    StartFitted,
    StartValidated,
    SystemStarted,
)
from trinity_cli.render import console


def _in_flight(n: int) -> str:
    return f"{n} in flight" if n else ""


def _at_once(parallel: int, ray: bool) -> str:
    """", N at once" when episodes run together; on Ray, how many actors play them."""
    if ray:
        return f", {parallel} at once on Ray actors"
    return f", {parallel} at once" if parallel > 1 else ""


def _window_s() -> float:
    """How far back the time left looks for its pace: TRINITY_PROGRESS_WINDOW seconds, 900 by default."""
    return float(os.environ.get("TRINITY_PROGRESS_WINDOW", "900"))


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
    The time left assumes the remaining episodes go at the pace of the last `window_s` seconds
    (TRINITY_PROGRESS_WINDOW, default 900; all of this process's time while less has passed),
    counted from the first update that computed a model call (`computed`, the pool's calls
    minus its cache hits, moved; from the `computed` given here, when the caller knows it, else
    from the first update's): a resumed run replays its recorded episodes first, in seconds,
    and a pace that counted them would promise the new ones as fast."""

    def __init__(self, label: str, done: int = 0, unit: str = "episodes", computed: int | None = None) -> None:
        self.label = label
        self.unit = unit
        self.every_s = float(os.environ.get("TRINITY_PROGRESS_EVERY", "30"))
        self.window_s = _window_s()
        self.start = self.last = time.monotonic()
        self.ended = False  # the line for done == total was printed
        # Where the pace is counted from: (time, done) when the last replayed update came (the
        # process's start until then, or for callers that give no `computed`).
        self.origin = (self.start, done)
        self.computed = computed  # the last `computed` seen, while only replays came
        self.replaying = True
        # (time, done) at each update since the window's start, and the last one before it.
        self.paces: deque[tuple[float, int]] = deque([self.origin])

    def update(self, done: int, total: int, detail: str = "", force: bool = False,
               computed: int | None = None, estimate: bool = True) -> None:
        """Count `done` of `total`; `estimate` False: the work under way is not what `done`
        counts (an evolve run's validation), so the line says no time left."""
        now = time.monotonic()
        if computed is not None and self.replaying:
            if self.computed is not None and computed > self.computed:
                self.replaying = False
            else:  # a replay (or a first update with nothing to compare): count the pace from here
                self.origin = (now, done)
                self.paces.clear()
            self.computed = computed
        self.paces.append((now, done))
        while len(self.paces) > 2 and self.paces[1][0] <= now - self.window_s:
            self.paces.popleft()
        end = done >= total and not self.ended
        if not force and not end and now - self.last < self.every_s:
            return
        self.last = now
        self.ended = self.ended or done >= total
        elapsed = now - self.start
        line = f"{self.label}: {done}/{total} {self.unit}"
        if detail:
            line += f" · {detail}"
        line += f" · {_duration(elapsed)} elapsed"
        since, done_then = self.paces[0]
        if done_then == done:  # nothing finished within the window: the pace since the origin
            since, done_then = self.origin
        if estimate and done_then < done < total:
            line += f" · about {_duration((now - since) / (done - done_then) * (total - done))} left"
        console.err.print(Text(line), soft_wrap=True)


def _bar(description: str, quiet: bool) -> Any:
    """A Rich progress bar on stderr: `description` (a column format), the bar, done/total,
    an `info` field and the time left, at the pace of the last TRINITY_PROGRESS_WINDOW seconds
    as on the plain lines (Rich's own 30 s sees no finished episode of a 1.5B member, and draws
    no time left); drawn only on a terminal, and not when `quiet`."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn(description), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                    TimeRemainingColumn(), console=console.err, transient=False,
                    speed_estimate_period=_window_s(), disable=quiet or not console.err.is_terminal)


def member_failing(event: MemberFailing) -> None:
    """A member's first failed call, as one warning line on stderr (shown even with --quiet:
    the rows it plays alone will be marked failed)."""
    console.warning(f"member {event.member!r} (kind {event.kind}) failed: {event.error} (first in "
                    f"{event.system}); its episodes go on without it, and a row where every call failed is "
                    "marked failed")


def _calls(calls: int, cache_hits: int, recorded: int = 0) -> str:
    if not calls:
        return ""
    return f"{calls} calls, {cache_hits} from the cache" + (f" ({recorded} recorded)" if recorded else "")


_Bar = TypeVar("_Bar", bound="_LiveBar")


class _LiveBar:
    """A progress callback drawing `self.progress` (a `_bar`) while its `with` block runs."""

    progress: Any

    def __enter__(self: _Bar) -> _Bar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


class EvolveProgress(_LiveBar):
    """Progress callback for `evolve`: a bar over the episode budget (with the episodes in
    flight when several run at once) and one line per generation, on stderr; nothing with
    `quiet`."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.progress = _bar("[bold]{task.description}", quiet)
        self.task: Any = None
        self.gen = ""  # the last generation finished
        self.plain: PlainProgress | None = None  # set at "start" when stderr is not a terminal
        self.spent = self.ends_at = 0

    def _info(self, in_flight: int) -> str:
        return " · ".join(x for x in (self.gen, _in_flight(in_flight)) if x)

    def __call__(self, event: Event) -> None:
        if self.quiet:
            return
        err = console.err
        match event:
            case RunResumed(run=run):
                err.print(Text(f"resuming unfinished {run} (same configuration)", style="yellow"))
            case CentreFitting(items=items):
                err.print(Text(f"centring the head's input on the features of {items} training tasks", style="dim"))
            case StartFitted():
                err.print(Text(f"starting from a head fitted to the sample matrix on {event.items} training tasks: "
                               f"its picks score {event.picked_label_loo:.3f} held out (best member "
                               f"{event.best_fixed_label:.3f}, best pick {event.oracle_label:.3f})", style="dim"))
            case RotationPlaying(episodes=episodes):
                err.print(Text(f"playing the rotation on {episodes} training items (their first pick, then the "
                               "other members in pool order) to fit the start to its states", style="dim"))
            case RotationFitted():
                err.print(Text(f"rotating the members from there: fitted to {event.states} states of "
                               f"{event.episodes} rotation episodes; it ranks the member each asked first on "
                               f"{event.next_loo:.1%} of them held out", style="dim"))
            case StartValidated(val=val):
                self.progress.console.print(Text(f"start  val {val:.3f}"))
            case EvolveStarted():
                self._start(event)
            case EvolveEpisodeStarted() if self.task is not None:
                self.progress.update(self.task, info=self._info(event.in_flight))
            case EvolveEpisodeFinished() if self.task is not None:
                self._episode(event)
            case GenerationFinished():
                self._generation(event)

    def _start(self, event: EvolveStarted) -> None:
        err = console.err
        # The bar counts to where the run ends (2 × 768 = 1,536 of a budget of 2,000), not the budget.
        held = (f" (the budget of {event.budget} holds {event.ends_at // event.per_gen})"
                if event.ends_at not in (0, event.budget) else "")
        err.print(Text(f"{event.run}: {event.n_params} parameters, population {event.popsize}, "
                       f"{event.per_gen} episodes per generation{held}{_at_once(event.parallel, event.ray)}",
                       style="dim"))
        self.task = self.progress.add_task("episodes", total=event.ends_at, completed=event.spent, info="")
        self.spent, self.ends_at = event.spent, event.ends_at
        if not err.is_terminal:
            self.plain = PlainProgress(f"{event.run} evolve", event.spent)

    def _episode(self, event: EvolveEpisodeFinished) -> None:
        if event.kind == "train":
            self.progress.advance(self.task)
            self.spent += 1
        self.progress.update(self.task, info=self._info(event.in_flight))
        if self.plain is not None:
            where = " · ".join(x for x in (self.gen, _calls(event.pool_calls, event.cache_hits, event.recorded)) if x)
            self.plain.update(self.spent, self.ends_at, where + (" · validating" if event.kind == "val" else ""),
                              computed=event.pool_calls - event.cache_hits, estimate=event.kind == "train")

    def _generation(self, event: GenerationFinished) -> None:
        c = event.curve
        calls = c["pool_calls_gen"]
        hit = c["cache_hits_gen"] / calls if calls else 0.0
        val = "" if c["val"] is None else f"  val {c['val']:.3f}"
        best = "" if event.best_val is None else f" (best {event.best_val:.3f})"
        line = (f"gen {c['generation']:>3}  {c['spent']}/{event.budget} episodes  "
                f"fitness best {c['best_fitness']:.3f} mean {c['mean_fitness']:.3f}{val}{best}  "
                f"this generation: {calls} calls, cache {hit:.0%}, {c['tokens_gen']} tokens")
        stopped = c.get("interrupted", ())
        if stopped:
            line += (f" (and {sum(p['pool_calls'] for p in stopped)} calls by {len(stopped)} earlier "
                     f"process{'es' if len(stopped) > 1 else ''} stopped during it)")
        self.progress.console.print(Text(line))
        if self.task is not None:
            self.gen = f"gen {c['generation']} done"
            self.spent = c["spent"]
            self.progress.update(self.task, completed=c["spent"], info=self.gen)


class BenchProgress(_LiveBar):
    """Progress callback for `bench`: one bar over all episodes, named after the system
    being run, with the share of pool calls served by the rollout cache so far; a line when a
    member first fails, also with `quiet`."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.progress = _bar("[bold]{task.description:<24}", quiet)
        self.task: Any = None
        self.plain: PlainProgress | None = None  # set at "start" when stderr is not a terminal
        self.done = self.total = 0
        self.system = ""

    def __call__(self, event: Event) -> None:
        match event:
            case MemberFailing():
                member_failing(event)
            case BenchStarted():
                if not self.quiet:
                    console.err.print(Text(f"{event.run}: {event.items} items × {len(event.systems)} systems "
                                           f"({event.episodes} episodes{_at_once(event.parallel, event.ray)})",
                                           style="dim"))
                self.task = self.progress.add_task("bench", total=event.episodes, info="")
                self.total = event.episodes
                if not self.quiet and not console.err.is_terminal:
                    self.plain = PlainProgress(f"{event.run} bench", computed=0)  # this process's counters
            case SystemStarted(name=name) if self.task is not None:
                self.system = name
                self.progress.update(self.task, description=escape(name))
            case BenchEpisodeFinished() if self.task is not None:
                calls = event.pool_calls
                info = f"cache {event.cache_hits / calls:.0%} of {calls} calls" if calls else ""
                if event.recorded:
                    info += f", {event.recorded} recorded"
                flying = _in_flight(event.in_flight)
                info = f"{info} · {flying}" if info and flying else info or flying
                # An item's episodes of every system are played together (evaluators/local.py,
                # play_order), so the bar names the system of the episode that just finished.
                self.system = event.system
                self.progress.update(self.task, advance=1, info=info, description=escape(event.system))
                self.done += 1
                if self.plain is not None:
                    where = (_calls(event.pool_calls, event.cache_hits, event.recorded), self.system)
                    self.plain.update(self.done, self.total, " · ".join(x for x in where if x),
                                      computed=event.pool_calls - event.cache_hits)


class RecipeProgress(EvolveProgress):
    """Progress callback for the one-command evolve (evolve/recipe.py): a line per phase, the
    matrix's and the validation's counts every `EVERY` items or episodes, and the search as
    `EvolveProgress` shows it; nothing with `quiet`."""

    EVERY = 12

    def __init__(self, quiet: bool = False) -> None:
        super().__init__(quiet)
        self.played = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, MemberFailing):  # the validation bench's: shown even when quiet
            member_failing(event)
        if self.quiet:
            return
        match event:
            case RecipePhase(name=name, detail=detail):
                self.played = 0
                console.err.print(Text(f"[{name}] {detail}", style="bold"))
            case MatrixItemPlayed() if event.index % self.EVERY == 0 or event.index == event.total:
                console.err.print(Text(f"  matrix {event.index}/{event.total} items · "
                                       f"{_calls(event.calls, event.cache_hits)}", style="dim"))
            case ReaderGeneration() if event.generation % 5 == 0 or event.generation == event.generations:
                val = ("" if event.val is None or event.val_tokens is None
                       else f" · validation {event.val:.1%} at {event.val_tokens:,.0f} tokens")
                console.err.print(Text(f"  generation {event.generation}/{event.generations} · train "
                                       f"{event.train:.1%}{val} · kept: generation {event.kept}", style="dim"))
            case BenchEpisodeFinished():
                self.played += 1
                if self.played % (self.EVERY * 8) == 0:
                    calls = _calls(event.pool_calls, event.cache_hits, event.recorded)
                    console.err.print(Text(f"  validation {self.played} episodes · {calls}", style="dim"))
            case _:
                super().__call__(event)


class MatrixProgress(_LiveBar):
    """Progress callback for `matrix`: a bar over the items with the pool's calls so far (plain
    lines where stderr is not a terminal); nothing with `quiet`."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.progress = _bar("[bold]matrix", quiet)
        self.task: Any = None
        self.plain: PlainProgress | None = None

    def __call__(self, event: Event) -> None:
        match event:
            case MatrixItemPlayed():
                if self.task is None:
                    self.task = self.progress.add_task("matrix", total=event.total, info="")
                    if not self.quiet and not console.err.is_terminal:
                        self.plain = PlainProgress("matrix", unit="items", computed=0)
                calls = _calls(event.calls, event.cache_hits)
                info = f"{event.key} · {calls}" if calls else event.key
                self.progress.update(self.task, completed=event.index, info=info)
                if self.plain is not None:
                    self.plain.update(event.index, event.total, calls, computed=event.calls - event.cache_hits)
