"""The files of one run directory (formats: docs/files.md#run-directories): `EvolveRun`
(evolve.json, the two checkpoints, episodes/gen-NNNN.json, the unfinished generation's
counts, the unfinished run's record) and
`BenchRun` (bench.json, report.md, charts, episodes.jsonl). Checkpoints are pickles of plain
dicts; classes they name that have moved since are read from where they are now (`MOVED`).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.errors import DamagedState, NotFound, option
from trinity_cli.runs import reports, selection

log = logging.getLogger("trinity_cli.runs.store")


@dataclass
class RunSummary:
    id: str
    kind: str
    created: float
    title: str
    status: str


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


class EvolveRun:
    """The files of one evolve run directory (their content: evolve/evolution.py's docstring)."""

    META = "evolve.json"
    CHECKPOINT = "checkpoint.pkl"
    PREVIOUS = "checkpoint.prev.pkl"  # the checkpoint before the latest one
    EPISODES = "episodes"
    # What the processes stopped during the unfinished generation had done (see partial()).
    PARTIAL = "generation.partial.json"

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
                           f"start the run again without {option('resume')}, or move {self.path} aside")

    def step_sizes(self) -> dict[int, float]:
        """The strategy's step size (sigma) after each generation its two checkpoints hold,
        {generation: sigma}: what runs whose curves predate curve["sigma"] still show. {}
        when neither checkpoint reads."""
        out = {}
        for file in (self.path / self.PREVIOUS, self.path / self.CHECKPOINT):
            state, _ = _unpickle(file)
            sigma = getattr((state or {}).get("es"), "sigma", None)
            if state is not None and sigma is not None and int(state.get("generation", 0)) > 0:
                out[int(state["generation"]) - 1] = float(sigma)
        return out

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

    def write_partial(self, generation: int, processes: list[dict[str, Any]]) -> None:
        """Record the work done so far on the unfinished `generation`: one dict per process
        that played part of it, oldest first, each {"episodes", "pool_calls", "cache_hits",
        "tokens", "seconds"} counted by that process from the generation's start (a resumed
        process replays the episodes an earlier one finished, as cache hits). Written after
        every finished episode, so a process killed outright leaves its counts behind."""
        paths.atomic_write_json(self.path / self.PARTIAL, {"generation": generation, "processes": processes})

    def partial(self, generation: int) -> list[dict[str, Any]]:
        """The processes recorded by write_partial for `generation`; [] when none were, or the
        file is of another generation (left by a process stopped after its checkpoint) or unreadable."""
        file = self.path / self.PARTIAL
        try:
            data = _read_json(file)
        except (OSError, ValueError):
            return []
        if not isinstance(data, dict) or data.get("generation") != generation:
            return []
        return list(data.get("processes") or [])

    def clear_partial(self) -> None:
        (self.path / self.PARTIAL).unlink(missing_ok=True)

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

    def training_summary(self, models: list[str]) -> dict[str, Any]:
        """What the generations written so far show, from one read of their files:
        {"selection": share of turns per task given to each model, each role and each (model,
        role) pair, over every training episode (selection.turn_shares, as bench counts them),
        "noise": how noisy their fitness is (runs/noise.py)}."""
        from trinity_cli.runs.noise import fitness_noise  # numpy: only when a run is shown

        records = list(self.generations())
        turns: dict[str, list[tuple[str, str]]] = {}
        for record in records:
            for ep in record["episodes"]:
                turns.setdefault(ep["task"], []).extend((model, role) for model, role in ep["turns"])
        return {"selection": {task: selection.turn_shares(task_turns, models) for task, task_turns in turns.items()},
                "noise": fitness_noise(records)}

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
        "best_val", "best_generation", "start_val", "spent", "curves", "selection", "noise", "under_way": the
        generation being played and the processes that have worked on it so far (partial();
        no processes when none has finished an episode of it), "resume": the command that
        finishes it}. Nothing is written."""
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
            "best_generation": best.get("generation"), "start_val": reports.start_validation(state),
            "spent": spent, "curves": state.get("curves", []),
            **self.training_summary(meta["manifest"]["models"]),
            "under_way": {"generation": state.get("generation", 0),
                          "processes": self.partial(state.get("generation", 0))},
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
    FILES = ("bench.json", "report.md", EPISODES)  # and its charts (write_outputs)

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name

    def write_episodes(self, lines: Iterable[dict[str, Any]]) -> None:
        """episodes.jsonl: one JSON object per line, the file appearing once complete."""
        with paths.atomic_output(self.path / self.EPISODES) as tmp, open(tmp, "w", encoding="utf-8") as log:
            for line in lines:
                log.write(json.dumps(line, ensure_ascii=False) + "\n")

    def write_outputs(self, bench: dict[str, Any], report_md: str,
                      charts: Mapping[str, Callable[[Path], None]]) -> list[str]:
        """bench.json, report.md and each chart (file name -> `draw(path)`, drawn into a
        temporary file that is renamed into place); returns the names of the run's files."""
        paths.atomic_write_json(self.path / "bench.json", bench)
        paths.atomic_write_bytes(self.path / "report.md", report_md.encode())
        for name, draw in charts.items():
            with paths.atomic_output(self.path / name) as tmp:
                draw(tmp)
        return [*self.FILES, *charts]
