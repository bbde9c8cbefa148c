"""The run store: every run directory (`runs/run-N/`), listed, allocated, loaded and locked;
the files inside one are runs/run_files.py's. No other module names a file inside a run
directory.

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
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.errors import DamagedState, NotFound, RunBusy, option
from trinity_cli.runs.run_files import EvolveRun, RunSummary

log = logging.getLogger("trinity_cli.runs.store")

_RUN_ID = re.compile(r"^run-(\d+)$")


def _run_hint(run_id: str, known: list[str]) -> str:
    """Close matches among `known` (run ids in numeric order), kept in that order."""
    close = set(difflib.get_close_matches(run_id, known, n=3, cutoff=0.5))
    if close:
        return "did you mean " + " or ".join(repr(k) for k in known if k in close) + "?"
    return "list the runs with: trinity inspect" if known else "no runs yet"


JOURNAL = "calls.log"  # keys of the cache entries a run used (keyed_cache.journal_to)

class RunStore:
    """Runs under `runs/`: `run-N/run.json`, one JSON document per run.

    run.json: {"id", "kind": "ask"|"evolve"|"bench"|"serve", "created": unix time,
    "title": one line, "status": "done"|"failed", ...kind-specific fields}.
    """

    def __init__(self, root: Path | None = None, on_allocate: Callable[[str], None] | None = None) -> None:
        """`on_allocate(run_id)` is called as soon as a run directory is allocated (serve
        reports the run id before the episode ends)."""
        self.root = root or paths.runs_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        self.on_allocate = on_allocate

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
            except FileExistsError:
                n += 1
                continue
            if self.on_allocate is not None:
                self.on_allocate(path.name)
            return path

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
            raise NotFound(f"bad episode reference {ref!r}", f"write GEN/K, e.g. {option('episode')} 3/0") from None
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


