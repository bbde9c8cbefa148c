"""Live progress of the long commands, `evolve` and `bench`, on stderr: a Rich bar on a
terminal, plain lines every so often where Rich draws nothing (`nohup`, a log file).

The consoles are render/terminal.py's, read when used, so whatever replaces `console.err` (a test)
receives the progress too.
"""

from __future__ import annotations

import os
import time
from typing import Any

from rich.markup import escape
from rich.text import Text

from trinity_cli.render import console


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
        console.err.print(Text(line), soft_wrap=True)


def _bar(description: str, quiet: bool) -> Any:
    """A Rich progress bar on stderr: `description` (a column format), the bar, done/total,
    an `info` field and the time left; drawn only on a terminal, and not when `quiet`."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn(description), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                    TimeRemainingColumn(), console=console.err, transient=False,
                    disable=quiet or not console.err.is_terminal)


def _calls(data: dict[str, Any]) -> str:
    calls = data.get("pool_calls", 0)
    return f"{calls} calls, {data.get('cache_hits', 0)} from the cache" if calls else ""


class EvolveProgress:
    """Progress callback for `evolve`: a bar over the episode budget (with the episodes in
    flight when several run at once) and one line per generation, on stderr; nothing with
    `quiet`."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.progress = _bar("[bold]{task.description}", quiet)
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
        err = console.err
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


class BenchProgress:
    """Progress callback for `bench`: one bar over all episodes, named after the system
    being run, with the share of pool calls served by the rollout cache so far."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.progress = _bar("[bold]{task.description:<24}", quiet)
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
                console.err.print(Text(f"{data['run']}: {data['items']} items × {len(data['systems'])} systems "
                               f"({data['episodes']} episodes{at_once})", style="dim"))
            self.task = self.progress.add_task("bench", total=data["episodes"], info="")
            self.total = data["episodes"]
            if not self.quiet and not console.err.is_terminal:
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
