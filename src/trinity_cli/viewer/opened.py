"""One run opened for the viewer: its record and files, read once each when a page first
needs them (a server keeps a few of these; an export opens one). A bench run's episodes are
indexed by item (byte offsets into episodes.jsonl), so an item's page reads its own lines
only; an evolve run's generations are read one file at a time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from trinity_cli.runs.run_files import BenchRun, EvolveRun
from trinity_cli.runs.store import JOURNAL, RunStore
from trinity_cli.viewer.shape import item_key


@dataclass
class EpisodeIndex:
    """Where each item's episodes lie in a bench run's episodes.jsonl, its question, and each
    system's reward on it (means over seeds: what bench.json's per_item holds)."""

    path: Path
    offsets: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # item key -> (offset, length)
    questions: dict[str, str] = field(default_factory=dict)
    rewards: dict[str, dict[str, float]] = field(default_factory=dict)  # system -> item key -> mean reward

    @classmethod
    def scan(cls, path: Path) -> EpisodeIndex:
        index = cls(path)
        if not path.is_file():
            return index
        sums: dict[tuple[str, str], list[float]] = {}
        offset = 0
        with open(path, "rb") as fh:
            for line in fh:
                if line.strip():
                    ep = json.loads(line)
                    key = item_key(ep["task"], str(ep["item"]))
                    index.offsets.setdefault(key, []).append((offset, len(line)))
                    if key not in index.questions:
                        index.questions[key] = str((ep.get("transcript") or {}).get("task") or "")
                    sums.setdefault((ep["system"], key), []).append(float(ep.get("reward") or 0.0))
                offset += len(line)
        for (system, key), rewards in sums.items():
            index.rewards.setdefault(system, {})[key] = sum(rewards) / len(rewards)
        return index

    def episodes(self, key: str) -> list[dict[str, Any]]:
        """The episodes of item `key`, in file order."""
        out = []
        with open(self.path, "rb") as fh:
            for offset, length in self.offsets.get(key, []):
                fh.seek(offset)
                out.append(json.loads(fh.read(length)))
        return out


class OpenedRun:
    """Run `run_id` of `store`, its files read on first use (module docstring)."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store = store
        self.path = store.path(run_id)  # NotFound, with the close matches, for an unknown run
        self.id = self.path.name
        self._generations: dict[int, dict[str, Any] | None] = {}

    def signature(self) -> tuple[tuple[str, int, int], ...]:
        """What changes when the run's files do (names, sizes, modification times of the
        run directory and its episodes folder, but the journal of cache keys, which grows with
        every call and no page reads): a server reopens the run when it differs."""
        out = []
        for folder in (self.path, self.path / EvolveRun.EPISODES):
            if folder.is_dir():
                for entry in os.scandir(folder):
                    if entry.is_file() and entry.name != JOURNAL:
                        stat = entry.stat()
                        out.append((f"{folder.name}/{entry.name}", stat.st_mtime_ns, stat.st_size))
        return tuple(sorted(out))

    @cached_property
    def record(self) -> dict[str, Any]:
        """run.json (an unfinished evolve run's record: RunStore.load); DamagedState if unreadable."""
        return self.store.load(self.id)

    @property
    def kind(self) -> str:
        return str(self.record.get("kind", "?"))

    # -- bench --------------------------------------------------------------------------
    @cached_property
    def summary(self) -> dict[str, Any]:
        """A bench run's summary (bench.json without its episodes, as run.json keeps it)."""
        return dict(self.record.get("summary") or {})

    @cached_property
    def episodes(self) -> EpisodeIndex:
        return EpisodeIndex.scan(self.path / BenchRun.EPISODES)

    def charts(self) -> list[str]:
        """The chart files of the run (PNG), in the order a page shows them."""
        return [name for name in CHARTS if (self.path / name).is_file()]

    # -- evolve -------------------------------------------------------------------------
    @cached_property
    def evolve(self) -> EvolveRun:
        return EvolveRun(self.path)

    def generation(self, g: int) -> dict[str, Any] | None:
        """Generation `g`'s record (episodes/gen-NNNN.json), read once; None when absent."""
        if g not in self._generations:
            self._generations = {g: self.evolve.generation(g)}  # keep one: each is megabytes
        return self._generations[g]

    def generation_numbers(self) -> Iterator[int]:
        """The generations written, in order."""
        for file in sorted((self.path / EvolveRun.EPISODES).glob("gen-*.json")):
            try:
                yield int(file.stem.split("-")[1])
            except (IndexError, ValueError):
                continue


# A bench run's charts (runs/charts.py), the only files of a run a page links to.
CHARTS = ("chart.png", "cost.png", "selection.png")
