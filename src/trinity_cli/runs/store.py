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
lock. A second process is refused with `RunBusy` naming the holder's pid. Whether a run
has a live writer is `RunLock.held(run_dir)`: an unfinished evolve run nobody holds was
stopped (killed, or imported from elsewhere: a lock file does not travel) and stays as it is
until `trinity evolve --resume`.
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
from trinity_cli.runs.run_files import BenchRun, EvolveRun, RunSummary

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
            record = EvolveRun(path).record()
            return {**record, "created": started(path, record["created"])}
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

    def bench_item(self, run_id: str, ref: str) -> dict[str, Any]:
        """Item `ref` of bench run `run_id` ("TASK/ID" as the run's per_item and the viewer
        name it, or the ID alone when one task of the run has it), every row's episodes on it:
        {"run", "task", "id", "question", "models", "systems": [{"name", "kind", "reward" (the
        mean over seeds, None when the row has none), "episodes": [its lines of episodes.jsonl,
        {"seed", "reward", "error", "transcript", ...}]}]}, rows in the run's order (a row that
        plays nothing, vote or the oracle, has no episode). NotFound for a run that is not a
        bench, or an item it does not hold (with the close matches and where the ids are)."""
        path = self.path(run_id)
        record = self.load(path.name)
        if record.get("kind") != "bench":
            raise NotFound(f"{path.name} is not a bench run (it is {record.get('kind')}): {option('item')} names an "
                           "item of a bench run", f"an evolve run's episode: trinity inspect {path.name} "
                           f"{option('episode')} GEN/K")
        summary = record.get("summary") or {}
        items = [(str(it["task"]), str(it["id"])) for it in summary.get("items") or []]
        keys = [f"{task}/{item}" for task, item in items]  # a file: task's name holds slashes: match whole
        matches = [k for k in keys if k == ref] or [k for k, (_, item) in zip(keys, items, strict=True) if item == ref]
        if len(matches) != 1:
            ids = (f"every item's id: the grid of trinity inspect {path.name} {option('serve')}, or summary.items "
                   f"in trinity inspect {path.name} {option('as_json')}")
            if matches:
                raise NotFound(f"{path.name} has {ref!r} in several tasks: {', '.join(matches)}",
                               f"name one as TASK/ID, e.g. {option('item')} {matches[0]}")
            close = difflib.get_close_matches(ref, keys, n=3, cutoff=0.6) or difflib.get_close_matches(
                ref, [item for _, item in items], n=3, cutoff=0.6)
            said = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
            raise NotFound(f"{path.name} has no item {ref!r} (its {len(keys)} items are TASK/ID, e.g. "
                           f"{', '.join(keys[:2])})", said + ids)
        task, item = items[keys.index(matches[0])]
        by_system: dict[str, list[dict[str, Any]]] = {}
        episodes = path / BenchRun.EPISODES
        if episodes.is_file():
            with open(episodes, encoding="utf-8") as fh:
                for line in fh:
                    if item in line and line.strip():  # most lines are another item's: parse these alone
                        ep = json.loads(line)
                        if ep.get("task") == task and str(ep.get("item")) == item:
                            by_system.setdefault(ep["system"], []).append(ep)
        question = next((str((eps[0].get("transcript") or {}).get("task") or "") for eps in by_system.values()), "")
        per_item = summary.get("per_item") or {}
        return {"run": path.name, "task": task, "id": item, "question": question,
                "models": list((summary.get("pool") or {}).get("models") or []),
                "systems": [{"name": s["name"], "kind": s["kind"],
                             "reward": per_item.get(s["name"], {}).get(matches[0]),
                             "episodes": by_system.get(s["name"], [])} for s in summary.get("systems") or []]}

    def list(self) -> list[RunSummary]:
        """Every finished run and every unfinished evolve run, oldest first."""
        out = []
        for n in self._numbers():
            path = self.root / f"run-{n}"
            if not (path / "run.json").is_file():
                summary = EvolveRun(path).summary()
                if summary is not None:
                    summary.created = started(path, summary.created)
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


def started(run_dir: Path, written: float) -> float:
    """When the unfinished evolve run `run_dir` began, for `inspect`'s list: the time its
    evolve.json records ("created"), else `written` (evolve.json's modification time) where
    the run was made in this home (it has a lock file), else 0: unknown. An imported run's
    files are as old as the copy (a git checkout keeps no times), so their times say when it
    was imported, never when it ran."""
    try:
        recorded = json.loads((run_dir / EvolveRun.META).read_text(encoding="utf-8")).get("created")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool) and recorded > 0:
        return float(recorded)
    return written if (run_dir / RunLock.FILE).is_file() else 0.0


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

    @classmethod
    def held(cls, run_dir: Path) -> bool:
        """Whether a live process holds `run_dir`'s lock now (an evolve or a bench writing the
        run). The pid the lock file names is asked first: a dead one, or no lock file (a run
        never locked here: an imported run carries none), is no writer, and nothing is locked.
        Only for a pid alive (it may have been reused) is the lock itself tried, shared and
        without waiting, and let go at once. False where the OS has no flock."""
        try:
            import fcntl
        except ImportError:
            return False
        try:
            fd = os.open(run_dir / cls.FILE, os.O_RDONLY)
        except OSError:
            return False
        try:
            pid = os.read(fd, 32).decode(errors="replace").strip()
            if pid.isdigit() and not _alive(int(pid)):
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
        finally:
            os.close(fd)  # lets go of the shared lock, when it was taken

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock
            self.fd = None


def _alive(pid: int) -> bool:
    """Whether process `pid` exists (one of another user counts: it is alive)."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (OSError, OverflowError):
        return False
    return True
