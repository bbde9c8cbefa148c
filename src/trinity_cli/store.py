"""The run store: every run directory (`runs/run-N/`) and the files in it.

Run store (`runs/run-N/run.json`): ids are allocated by an atomic mkdir, so concurrent
processes never share one; `run.json` is written atomically once the run is complete.
A run that fails or is interrupted before completion leaves no directory behind.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.cache import CACHE_VERSION, RolloutCache, canonical_json, rollout_key
from trinity_cli.errors import NotFound

# The rollout cache moved to cache.py; these names stay importable from here.
__all__ = ["CACHE_VERSION", "RolloutCache", "RunStore", "RunSummary", "canonical_json", "rollout_key"]

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

    def path(self, run_id: str) -> Path:
        if run_id.isdigit():
            run_id = f"run-{run_id}"
        path = self.root / run_id
        if not (path / "run.json").is_file():
            known = [p.name for p in self.run_dirs() if (p / "run.json").is_file()]
            raise NotFound(f"no run {run_id!r} under {self.root}", _run_hint(run_id, known))
        return path

    def load(self, run_id: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.path(run_id) / "run.json").read_text(encoding="utf-8"))
        return data

    def evolve_episode(self, run_id: str, ref: str) -> tuple[str, list[str], dict[str, Any], Any]:
        """(title, pool models, transcript dict, seed) of episode `ref` ("GEN/K") of an evolve run."""
        path = self.root / (run_id if run_id.startswith("run-") else f"run-{run_id}")
        try:
            gen, k = (int(x) for x in ref.split("/"))
        except ValueError:
            raise NotFound(f"bad episode reference {ref!r}", "write GEN/K, e.g. --episode 3/0") from None
        file = path / "episodes" / f"gen-{gen:04d}.json"
        if not file.is_file():
            raise NotFound(f"{path.name} has no generation {gen}", "see the generations with: trinity inspect RUN")
        episodes = json.loads(file.read_text(encoding="utf-8"))["episodes"]
        if not 0 <= k < len(episodes):
            raise NotFound(f"generation {gen} of {path.name} has episodes 0..{len(episodes) - 1}, not {k}")
        meta = json.loads((path / "evolve.json").read_text(encoding="utf-8"))
        ep = episodes[k]
        title = (f"{path.name} gen {gen} episode {k} (candidate {ep.get('candidate')}, task {ep['task']}, "
                 f"reward {ep['reward']})")
        return title, meta["manifest"]["models"], ep["transcript"], ep["seed"]

    def list(self) -> list[RunSummary]:
        out = []
        for n in self._numbers():
            file = self.root / f"run-{n}" / "run.json"
            try:
                data = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # an evolve run still in progress has no run.json yet
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
