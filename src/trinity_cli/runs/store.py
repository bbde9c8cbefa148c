"""The run store: every run directory (`runs/run-N/`) and the files in it. No other
module names a file inside a run directory.

Run store (`runs/run-N/run.json`): ids are allocated by an atomic mkdir, so concurrent
processes never share one; `run.json` is written atomically once the run is complete.
A run that fails or is interrupted before completion leaves no directory behind (an
evolve run keeps its directory, without run.json, so it can be resumed).

Layouts (what each file holds is documented in docs/files.md#run-directories):
    evolve   EvolveRun: evolve.json, checkpoint.pkl, episodes/gen-NNNN.json, run.json
    bench    BenchRun:  bench.json, report.md, chart.png, episodes.jsonl, run.json (and
                        selection.png when the bench has heads)
    ask      run.json only
An evolve run stopped before its budget has no run.json; `list` and `load` still show it,
status "unfinished", from evolve.json and its checkpoint (EvolveRun.record).
Every file is written through paths.atomic_output: a reader sees it whole or not at all.

Damage: a run.json that cannot be read is listed with status "damaged" and the file and
reason as its title; `load` refuses it with `DamagedState` (one line). An evolve run keeps
its last two checkpoints (checkpoint.pkl, and checkpoint.prev.pkl from the generation
before); a damaged latest one is passed over for the previous, with a warning.

Locks: `RunStore.lock(run_dir)` holds an OS lock (flock) on `run-N/.lock` while a process
evolves or benches that run; it goes with the process, so a killed run leaves no stale
lock. A second process is refused with `RunBusy` naming the holder's pid.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import pickle
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.errors import DamagedState, NotFound, RunBusy
from trinity_cli.runs import reports

log = logging.getLogger("trinity_cli.runs.store")

_RUN_ID = re.compile(r"^run-(\d+)$")


def _run_hint(run_id: str, known: list[str]) -> str:
    """Close matches among `known` (run ids in numeric order), kept in that order."""
    close = set(difflib.get_close_matches(run_id, known, n=3, cutoff=0.5))
    if close:
        return "did you mean " + " or ".join(repr(k) for k in known if k in close) + "?"
    return "list the runs with: trinity inspect" if known else "no runs yet"


@dataclass
class RunSummary:
    id: str
    kind: str
    created: float
    title: str
    status: str


class RunStore:
    """Runs under `runs/`: `run-N/run.json`, one JSON document per run.

    run.json: {"id", "kind": "ask"|"evolve"|"bench"|"serve", "created": unix time,
    "title": one line, "status": "done"|"failed", ...kind-specific fields}.
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or paths.runs_dir()
        self.root.mkdir(parents=True, exist_ok=True)

    def _numbers(self) -> list[int]:
        return sorted(int(m.group(1)) for p in self.root.iterdir() if (m := _RUN_ID.match(p.name)))

    def run_dirs(self) -> list[Path]:
        """Every `run-N` directory, oldest first: by N as a number (run-2 before run-10)."""
        return [self.root / f"run-{n}" for n in self._numbers()]

    def allocate(self) -> Path:
        """Create and return a fresh `run-N` directory (N = highest + 1)."""
        numbers = self._numbers()
        n = (numbers[-1] + 1) if numbers else 1
        while True:
            path = self.root / f"run-{n}"
            try:
                path.mkdir()
                return path
            except FileExistsError:
                n += 1

    @contextmanager
    def new_run(self) -> Iterator[Path]:
        """A run directory that is removed again if the block raises (Ctrl-C included)."""
        path = self.allocate()
        try:
            yield path
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise

    def save(self, run_dir: Path, record: dict[str, Any]) -> None:
        record = {"id": run_dir.name, "created": time.time(), "status": "done", **record}
        paths.atomic_write_json(run_dir / "run.json", record)

    @staticmethod
    def _shown(path: Path) -> bool:
        """Whether `inspect` shows this run directory: a finished run, or an evolve run."""
        return (path / "run.json").is_file() or (path / EvolveRun.META).is_file()

    def path(self, run_id: str) -> Path:
        """The directory of run `run_id` ("run-N" or "N"): one with run.json, or an
        unfinished evolve run's."""
        if run_id.isdigit():
            run_id = f"run-{run_id}"
        path = self.root / run_id
        if not self._shown(path):
            known = [p.name for p in self.run_dirs() if self._shown(p)]
            raise NotFound(f"no run {run_id!r} under {self.root}", _run_hint(run_id, known))
        return path

    def load(self, run_id: str) -> dict[str, Any]:
        """run.json of run `run_id`; for an unfinished evolve run, EvolveRun.record().
        A run.json that cannot be read raises `DamagedState` naming it and why."""
        path = self.path(run_id)
        if not (path / "run.json").is_file():
            return EvolveRun(path).record()
        data, why = _read_record(path / "run.json")
        if data is None:
            raise DamagedState(f"{path.name}: its record {path / 'run.json'} is damaged ({why})",
                               f"move {path} aside to hide it, or restore run.json from a backup")
        return data

    @contextmanager
    def lock(self, run_dir: Path) -> Iterator[None]:
        """Hold `run_dir`'s lock for the block (module docstring); `RunBusy` if another
        process holds it. Where the OS has no flock (Windows), runs are not locked."""
        with RunLock(run_dir):
            yield

    def evolve_run(self, run_id: str) -> EvolveRun:
        """The evolve run `run_id` ("run-N" or "N"), finished or not (`evolve.json` exists)."""
        run = EvolveRun(self.root / (run_id if run_id.startswith("run-") else f"run-{run_id}"))
        if not run.meta_file.is_file():
            raise NotFound(f"{run.name} is not an evolve run", "list runs with: trinity inspect")
        return run

    def evolve_runs(self) -> list[EvolveRun]:
        """Every evolve run (finished or not), oldest first."""
        return [EvolveRun(p) for p in self.run_dirs() if (p / EvolveRun.META).is_file()]

    def evolve_episode(self, run_id: str, ref: str) -> tuple[str, list[str], dict[str, Any], Any]:
        """(title, pool models, transcript dict, seed) of episode `ref` ("GEN/K") of an evolve run."""
        run = EvolveRun(self.root / (run_id if run_id.startswith("run-") else f"run-{run_id}"))
        try:
            gen, k = (int(x) for x in ref.split("/"))
        except ValueError:
            raise NotFound(f"bad episode reference {ref!r}", "write GEN/K, e.g. --episode 3/0") from None
        record = run.generation(gen)
        if record is None:
            raise NotFound(f"{run.name} has no generation {gen}", "see the generations with: trinity inspect RUN")
        episodes = record["episodes"]
        if not 0 <= k < len(episodes):
            raise NotFound(f"generation {gen} of {run.name} has episodes 0..{len(episodes) - 1}, not {k}")
        meta = run.meta()
        assert meta is not None  # a generation is only written after evolve.json
        ep = episodes[k]
        title = (f"{run.name} gen {gen} episode {k} (candidate {ep.get('candidate')}, task {ep['task']}, "
                 f"reward {ep['reward']})")
        return title, meta["manifest"]["models"], ep["transcript"], ep["seed"]

    def list(self) -> list[RunSummary]:
        """Every finished run and every unfinished evolve run, oldest first."""
        out = []
        for n in self._numbers():
            path = self.root / f"run-{n}"
            if not (path / "run.json").is_file():
                summary = EvolveRun(path).summary()
                if summary is not None:
                    out.append(summary)
                continue
            data, why = _read_record(path / "run.json")
            if data is None:
                out.append(RunSummary(id=path.name, kind="?", created=(path / "run.json").stat().st_mtime,
                                      title=f"run.json is damaged: {why}", status="damaged"))
                continue
            out.append(
                RunSummary(
                    id=data.get("id", f"run-{n}"),
                    kind=data.get("kind", "?"),
                    created=float(data.get("created", 0)),
                    title=str(data.get("title", "")),
                    status=str(data.get("status", "")),
                )
            )
        return out


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _read_record(path: Path) -> tuple[dict[str, Any] | None, str]:
    """(run.json's object, "") or (None, why it cannot be read)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return None, exc.strerror or str(exc)
    except UnicodeDecodeError:
        return None, "it is not UTF-8 text"
    except ValueError as exc:
        return None, f"not valid JSON: {str(exc).split(':', 1)[0]}"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    return data, ""


class RunLock:
    """An exclusive flock on `run_dir/.lock`, holding the owner's pid (RunStore.lock)."""

    FILE = ".lock"

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / self.FILE
        self.fd: int | None = None

    def __enter__(self) -> RunLock:
        try:
            import fcntl
        except ImportError:  # no flock on this OS: runs go unlocked
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            name = self.path.parent.name
            raise RunBusy(f"{name} is in use by another trinity process (pid {holder})",
                          f"wait for it to end, or stop it (kill {holder}) and run this again") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None


class EvolveRun:
    """The files of one evolve run directory (their content: evolve/evolution.py's docstring)."""

    META = "evolve.json"
    CHECKPOINT = "checkpoint.pkl"
    PREVIOUS = "checkpoint.prev.pkl"  # the checkpoint before the latest one
    EPISODES = "episodes"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name

    @property
    def meta_file(self) -> Path:
        return self.path / self.META

    def meta(self) -> dict[str, Any] | None:
        """evolve.json, None when absent."""
        if not self.meta_file.is_file():
            return None
        data: dict[str, Any] = _read_json(self.meta_file)
        return data

    def write_meta(self, meta: dict[str, Any]) -> None:
        paths.atomic_write_json(self.meta_file, meta)

    @property
    def finished(self) -> bool:
        """Whether the run completed (its run.json exists)."""
        return (self.path / "run.json").exists()

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The latest readable checkpoint dict, None before the first generation ends. A
        damaged latest checkpoint is passed over for the previous one (a warning says so);
        `DamagedState` when neither can be read."""
        latest, previous = self.path / self.CHECKPOINT, self.path / self.PREVIOUS
        if not latest.is_file() and not previous.is_file():
            return None
        state, why = _unpickle(latest)
        if state is not None:
            return state
        older, why_older = _unpickle(previous)
        if older is not None:
            log.warning("%s is damaged (%s): %s goes on from the previous checkpoint, after generation %s "
                        "(%s training episodes)", latest, why, self.name, older.get("generation", 1) - 1,
                        older.get("spent"))
            return older
        raise DamagedState(f"{self.name} has no readable checkpoint: {latest.name} ({why}), "
                           f"{previous.name} ({why_older})",
                           f"start the run again without --resume, or move {self.path} aside")

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """Write the checkpoint; the one it replaces becomes checkpoint.prev.pkl (a hard link
        swapped in first, so a checkpoint.pkl exists at every moment)."""
        latest = self.path / self.CHECKPOINT
        if latest.is_file():
            link = self.path / f".{self.PREVIOUS}.link"
            link.unlink(missing_ok=True)
            os.link(latest, link)
            os.replace(link, self.path / self.PREVIOUS)
        paths.atomic_write_bytes(latest, pickle.dumps(state))

    def _generation_file(self, generation: int) -> Path:
        return self.path / self.EPISODES / f"gen-{generation:04d}.json"

    def write_generation(self, generation: int, record: dict[str, Any]) -> None:
        paths.atomic_write_json(self._generation_file(generation), record)

    def generation(self, generation: int) -> dict[str, Any] | None:
        """The record of generation `generation`, None when it was not written."""
        file = self._generation_file(generation)
        if not file.is_file():
            return None
        data: dict[str, Any] = _read_json(file)
        return data

    def generations(self) -> Iterator[dict[str, Any]]:
        """Every written generation's record, in generation order."""
        for file in sorted((self.path / self.EPISODES).glob("gen-*.json")):
            yield _read_json(file)

    def selection(self, models: list[str]) -> dict[str, dict[str, Any]]:
        """Share of turns per task given to each model, each role and each (model, role)
        pair, over every training episode written so far (reports.turn_shares, as bench
        counts them)."""
        turns: dict[str, list[tuple[str, str]]] = {}
        for record in self.generations():
            for ep in record["episodes"]:
                turns.setdefault(ep["task"], []).extend((model, role) for model, role in ep["turns"])
        return {task: reports.turn_shares(task_turns, models) for task, task_turns in turns.items()}

    def _title(self, meta: dict[str, Any], spent: int) -> str:
        o = meta["options"]
        return f"evolve {meta['manifest']['pool']} on {o['tasks']} ({spent} of {o['budget']} episodes)"

    def summary(self) -> RunSummary | None:
        """The `inspect` list line of an unfinished run (no run.json); None when this is
        not an evolve run. Created: when evolve.json was written."""
        meta = self.meta()
        if meta is None or self.finished:
            return None
        created = self.meta_file.stat().st_mtime
        try:
            spent = (self.load_checkpoint() or {}).get("spent", 0)
        except DamagedState as exc:
            return RunSummary(id=self.name, kind="evolve", created=created, title=exc.message, status="damaged")
        return RunSummary(id=self.name, kind="evolve", created=created, title=self._title(meta, spent),
                          status="unfinished")

    def record(self) -> dict[str, Any]:
        """An unfinished run as a run.json-shaped record, for `inspect`: {"id", "kind":
        "evolve", "status": "unfinished", "created", "title", "options", "head": None,
        "best_val", "best_generation", "spent", "curves", "selection", "resume": the command
        that finishes it}. Nothing is written."""
        meta = self.meta()
        if meta is None:
            raise NotFound(f"{self.name} is not an evolve run", "list runs with: trinity inspect")
        state = self.load_checkpoint() or {}  # unpickling it imports cma, as any reader's does
        best = state.get("best", {})
        spent = state.get("spent", 0)
        return {
            "id": self.name, "kind": "evolve", "status": "unfinished",
            "created": self.meta_file.stat().st_mtime, "title": self._title(meta, spent),
            "options": meta["options"], "head": None, "best_val": best.get("val"),
            "best_generation": best.get("generation"), "spent": spent, "curves": state.get("curves", []),
            "selection": self.selection(meta["manifest"]["models"]),
            "resume": f"trinity evolve --resume {self.name}",
        }


# Classes a checkpoint may name at the module they were pickled from, and where they live now,
# so checkpoints written before the package moves (0.1: evolve/evolution.py) still load.
MOVED = {("trinity_cli.evolve", "_Randn"): ("trinity_cli.evolve.strategy", "Randn")}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        module, name = MOVED.get((module, name), (module, name))
        return super().find_class(module, name)


def _unpickle(file: Path) -> tuple[dict[str, Any] | None, str]:
    """(the pickled dict in `file`, "") or (None, why it cannot be read); classes that moved
    are read from where they are now (`MOVED`)."""
    try:
        with open(file, "rb") as fh:
            state = _Unpickler(fh).load()
    except FileNotFoundError:
        return None, "missing"
    except Exception as exc:  # a damaged pickle raises about anything: EOFError, UnpicklingError, ...
        return None, f"{type(exc).__name__}: {exc}"[:200]
    if not isinstance(state, dict):
        return None, "not a checkpoint"
    return state, ""


class BenchRun:
    """The files of one bench run directory (their content: docs/files.md#bench-runs)."""

    EPISODES = "episodes.jsonl"
    FILES = ("bench.json", "report.md", "chart.png", EPISODES)
    SELECTION_CHART = "selection.png"  # only when the bench has heads

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name

    def write_episodes(self, lines: Iterable[dict[str, Any]]) -> None:
        """episodes.jsonl: one JSON object per line, the file appearing once complete."""
        with paths.atomic_output(self.path / self.EPISODES) as tmp, open(tmp, "w", encoding="utf-8") as log:
            for line in lines:
                log.write(json.dumps(line, ensure_ascii=False) + "\n")

    def read_episodes(self) -> list[dict[str, Any]]:
        """episodes.jsonl's objects, in file order (`write_episodes`)."""
        return [json.loads(line) for line in (self.path / self.EPISODES).read_text(encoding="utf-8").splitlines()]

    def write_outputs(
        self, bench: dict[str, Any], report_md: str, chart: Callable[[Path], None],
        selection_chart: Callable[[Path], None] | None = None,
    ) -> list[str]:
        """bench.json, report.md, chart.png (drawn by `chart(path)` into a temporary file) and,
        given `selection_chart`, selection.png; returns the names of the run's files."""
        paths.atomic_write_json(self.path / "bench.json", bench)
        paths.atomic_write_bytes(self.path / "report.md", report_md.encode())
        with paths.atomic_output(self.path / "chart.png") as tmp:
            chart(tmp)
        if selection_chart is None:
            return list(self.FILES)
        with paths.atomic_output(self.path / self.SELECTION_CHART) as tmp:
            selection_chart(tmp)
        return [*self.FILES, self.SELECTION_CHART]
