"""The rollout cache and the run store.

Rollout cache (diskcache under `cache/rollouts/`): one entry per pool call.
    key   = "r1:" + sha256(canonical JSON of
              {"v": CACHE_VERSION, "fingerprint": backend fingerprint,
               "prompt_version": roles.PROMPT_VERSION,
               "messages": [[role, content], ...],
               "params": {max_tokens, temperature, top_p, seed, stop}})
    value = Completion.to_dict() (without `cached`)
Canonical JSON: sorted keys, no whitespace, UTF-8. Changing anything that shapes a reply
changes the key; bump CACHE_VERSION when the format itself changes. The backend
fingerprint carries what shapes a reply besides messages and parameters:
    gguf     weights sha256, chat format, n_ctx, llama-cpp-python version, n_batch and
             the number of threads (llama.cpp's sums, so its replies, depend on both);
             `runtime: server` members: xllamacpp's version and the slots instead of
             llama-cpp-python's version, and `|server` (backends/llamaserver.py)
    openai   base URL and model id (never the key: fingerprints hold no secrets)
    scripted a hash of the rules
Which calls are cached (`Backend.deterministic`): only calls whose reply is a function of
their parameters. Greedy calls (temperature 0) always are. A sampled call (temperature > 0)
is cached only when its seed is set and the backend honours it: llama.cpp (in process, or
its server, where a batch's other sequences may still shift a reply: llamaserver.py) and
scripted models. API models are cached only at temperature 0, since servers treat the
seed as a hint. diskcache writes each entry in one SQLite transaction, so a crash leaves
either the whole entry or none.

Run store (`runs/run-N/run.json`): ids are allocated by an atomic mkdir, so concurrent
processes never share one; `run.json` is written atomically once the run is complete.
A run that fails or is interrupted before completion leaves no directory behind.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.errors import NotFound
from trinity_cli.messages import ChatMessage, Completion, GenParams

CACHE_VERSION = 1


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def rollout_key(fingerprint: str, messages: list[ChatMessage], params: GenParams, prompt_version: str) -> str:
    payload = {
        "v": CACHE_VERSION,
        "fingerprint": fingerprint,
        "prompt_version": prompt_version,
        "messages": [[m.role, m.content] for m in messages],
        "params": {
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": params.seed,
            "stop": list(params.stop),
        },
    }
    return "r1:" + hashlib.sha256(canonical_json(payload).encode()).hexdigest()


class RolloutCache:
    """Pool replies on disk, with hit/miss counters for progress displays."""

    def __init__(self, directory: Path | None = None) -> None:
        import diskcache

        self.directory = directory or paths.cache_dir("rollouts")
        self._cache = diskcache.Cache(str(self.directory), size_limit=8 << 30)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()  # diskcache is thread-safe; these counters are ours

    def get(self, key: str) -> Completion | None:
        raw = self._cache.get(key)
        with self._lock:
            if raw is None:
                self.misses += 1
                return None
            self.hits += 1
        completion = Completion.from_dict(raw)
        completion.cached = True
        return completion

    def put(self, key: str, completion: Completion) -> None:
        data = completion.to_dict()
        data.pop("cached", None)
        self._cache.set(key, data)

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        self._cache.close()


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
