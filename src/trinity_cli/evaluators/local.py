"""Play a batch of episodes and return their outcomes in the order they were asked for.

evolve and bench only say *what* to play: a list of `EpisodeSpec` (a policy — a head's, a
fixed schedule's, the conductor's: policies/ —, an item, a seed, a turn budget). An evaluator decides *where*:
`SerialEvaluator` plays them one after another in this thread, `ThreadEvaluator` on up to
N threads sharing one pool and one coordinator backbone per backbone reference (the work
is in llama.cpp, HTTP and torch, which release the GIL). This is EvoTorch's split between
the algorithm and where candidates are evaluated: the cluster evaluator (evaluators/ray_actors.py:
Ray actors, each building its own `Runtime` once from a `WorkerSetup`) plugs in behind the
same `evaluate(specs, progress) -> outcomes`; `close()` releases what an evaluator holds.
Specs, outcomes and the setup are plain picklable data (dataclasses of numpy arrays,
strings, `TaskItem`, `Head`, `Transcript`).

Contract: outcomes do not depend on the evaluator or on N. An episode's transcript is a
function of its spec and the pool's replies (its decisions draw from
`default_rng(spec.seed)`, its head is its own: `Coordinator.view`); the pool makes one
model call per distinct cacheable call however many episodes ask for it at once (single
flight, pool/pool.py); and `settle_cache_flags` sets every turn's `cached` flag to what a
serial run in spec order records: the first turn in spec order whose call was computed
during the batch is the miss, every later turn with the same call a hit. So the same
specs give the same transcripts, rewards, cache flags and pool call counts for any N
(timings aside). One caveat: sandboxed code runs against a wall-clock timeout, so a
program that barely finishes in time alone may time out on a loaded machine.

Play order: the local evaluators play (start) episodes in `play_order`: the episodes of
one item one after another, items in the order they first appear. That changes no outcome
(above) and saves model time: in-process llama.cpp reuses the KV cache of the longest
prefix the next prompt shares with the previous call, and calls about the same item share
the item's text (what it saves: docs/measurements.md). A cluster evaluator dispatches in
spec order (its actors each hold their own KV cache).

Progress: `evaluate` calls `progress(event)` on the calling thread only, with
`events.EpisodeStarted` and `events.EpisodeFinished` (index: the spec's; in_flight: episodes
running now; done, total). Finished events come in completion order (play order when serial). An exception raised by
`progress` (or Ctrl-C) stops the batch: episodes not started are dropped, running ones
stop before their next turn, and the exception propagates once they have.

Errors: an episode that raises aborts the batch the same way and its exception
propagates (with threads, the lowest-index failure seen). `ContextOverflow` becomes a
scored-zero outcome instead when the spec says `overflow_scores_zero` (bench does).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from trinity_cli import tasks
from trinity_cli.answer_kinds import item_checks, score_item
from trinity_cli.coordinator.head import Head
from trinity_cli.coordinator.policy import Coordinator
from trinity_cli.episode.loop import turn_params
from trinity_cli.errors import ContextOverflow
from trinity_cli.events import EpisodeFinished, EpisodeProgressFn, EpisodeStarted, Event, quiet
from trinity_cli.messages import Transcript
from trinity_cli.policies.base import Episode, Policy
from trinity_cli.pool.pool import Pool
from trinity_cli.pool_config import PoolConfig


@dataclass
class EpisodeSpec:
    """One episode to play: the `policy` that plays it (policies/: a head's, a fixed
    schedule's, the conductor's, a package's), which must pickle for a cluster evaluator.
    `greedy` takes the most likely model and role instead of sampling.
    """

    item: tasks.TaskItem
    seed: int
    policy: Policy
    max_turns: int
    greedy: bool = False
    overflow_scores_zero: bool = False


@dataclass
class EpisodeOutcome:
    """What one episode gave: its transcript and reward (the item's scorer on its
    answer), or, when it could not run (`ContextOverflow` with `overflow_scores_zero`),
    no transcript, reward 0 and `error` saying why."""

    transcript: Transcript | None
    reward: float
    error: str | None = None


@dataclass(frozen=True)
class WorkerSetup:
    """Everything a worker needs to build its own `Runtime` (a pool and coordinators):
    the pool file as validated, whether the rollout cache is used, the coordinator device.
    Heads travel in the specs; backbones are loaded by a worker on first use."""

    pool: PoolConfig
    use_cache: bool = True
    device: str = "auto"


class _Cancelled(Exception):
    """Raised inside an episode when its batch was stopped."""


class Runtime:
    """The pool and coordinator backbones episodes of one process share.

    Coordinators are kept per (backbone reference, SVF targets): every head spec gets a
    `view` of the one for its backbone, so a backbone is loaded once per process.
    """

    def __init__(self, pool: Pool, device: str = "auto") -> None:
        self.pool = pool
        self.device = device
        self._engines: dict[tuple[str, tuple[str, ...]], Coordinator] = {}
        self._owned: list[Coordinator] = []
        self._lock = threading.Lock()

    @property
    def setup(self) -> WorkerSetup:
        return WorkerSetup(self.pool.config, self.pool.cache is not None, self.device)

    def adopt(self, coordinator: Coordinator) -> None:
        """Route head specs for `coordinator`'s backbone and SVF targets through it (evolve
        built it already, and may have loaded its backbone); its owner still closes it."""
        key = (coordinator.backbone_ref, tuple(coordinator.svf_targets))
        with self._lock:
            self._engines.setdefault(key, coordinator)

    def coordinator(self, head: Head, backbone: str | None = None) -> Coordinator:
        """`head`'s own view of the coordinator shared by every head of its backbone (`backbone`,
        None: the head's own) and SVF targets (policies/base.py's `Engines`)."""
        ref = backbone or head.manifest["backbone"]["ref"]
        key = (ref, tuple((head.manifest.get("svf") or {}).get("targets", [])))
        with self._lock:
            engine = self._engines.get(key)
            if engine is None:
                engine = Coordinator(head, backbone_ref=ref, device=self.device, svf_targets=key[1])
                self._engines[key] = engine
                self._owned.append(engine)
        return engine.view(head)

    def play(self, spec: EpisodeSpec, stop: threading.Event | None = None) -> EpisodeOutcome:
        """Play one episode; `stop`, once set, ends it before its next turn (`_Cancelled`)."""

        def check(event: Event | None) -> None:
            if stop is not None and stop.is_set():
                raise _Cancelled()

        examples = item_checks(spec.item.scorer, spec.item.prompt, spec.item.reference)
        try:
            check(None)
            transcript = spec.policy.play(self, Episode(spec.item.prompt, seed=spec.seed, max_turns=spec.max_turns,
                                                        greedy=spec.greedy, kind=spec.item.scorer, examples=examples,
                                                        progress=check))
        except ContextOverflow as exc:
            if not spec.overflow_scores_zero:
                raise
            return EpisodeOutcome(None, 0.0, f"context overflow: {exc.message}")
        strict = self.pool.config.sandbox == "strict"
        return EpisodeOutcome(transcript, float(score_item(spec.item, transcript.answer or "",
                                                                 strict_sandbox=strict)))

    def close(self) -> None:
        """Close the coordinators this runtime made (not the pool, not adopted ones)."""
        for engine in self._owned:
            engine.close()
        self._owned.clear()
        self._engines.clear()


def settle_cache_flags(pool: Pool, outcomes: Sequence[EpisodeOutcome], also_computed: Collection[str] = ()) -> None:
    """Set each turn's `cached` to what a serial run of the same batch in this order records
    (module docstring): of the turns whose call a model computed during the batch, the
    first in order is the miss and the others are hits. Idempotent on a serial batch.
    `also_computed`: cache keys computed during the batch by episodes not in `outcomes`
    (a cluster evaluator's attempts lost with their actor, then played again)."""
    keyed = []
    computed: set[str] = set(also_computed)
    for outcome in outcomes:
        if outcome.transcript is None:
            continue
        transcript = outcome.transcript
        for turn in transcript.turns:
            key = pool.cache_key(turn.model, turn.messages, turn_params(pool, transcript, turn))
            if key is None:
                continue  # not cached: every such call went to the model, in any order
            keyed.append((turn, key))
            if not turn.cached:
                computed.add(key)
    seen: set[str] = set()
    for turn, key in keyed:
        if key in computed:
            turn.cached = key in seen
            seen.add(key)


class Evaluator(Protocol):
    """Plays a batch of episodes; see the module docstring for the contract."""

    def evaluate(self, specs: Sequence[EpisodeSpec],
                 progress: EpisodeProgressFn | None = None) -> list[EpisodeOutcome]: ...

    def close(self) -> None:
        """Release what the evaluator holds (a cluster's actors); not the runtime's pool."""


def play_order(specs: Sequence[EpisodeSpec]) -> list[int]:
    """Spec indices with each item's episodes together: items in the order they first
    appear, an item's episodes in spec order (module docstring, "Play order")."""
    first: dict[str, int] = {}
    for i, spec in enumerate(specs):
        first.setdefault(spec.item.key, i)
    return sorted(range(len(specs)), key=lambda i: (first[specs[i].item.key], i))


class SerialEvaluator:
    """Every episode in this thread, one after another in `play_order`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def evaluate(self, specs: Sequence[EpisodeSpec], progress: EpisodeProgressFn | None = None) -> list[EpisodeOutcome]:
        emit = progress or quiet
        played: dict[int, EpisodeOutcome] = {}
        for done, i in enumerate(play_order(specs)):
            emit(EpisodeStarted(index=i, in_flight=1, done=done, total=len(specs)))
            played[i] = self.runtime.play(specs[i])
            emit(EpisodeFinished(index=i, in_flight=0, done=done + 1, total=len(specs), outcome=played[i]))
        outcomes = [played[i] for i in range(len(specs))]
        settle_cache_flags(self.runtime.pool, outcomes)
        return outcomes

    def close(self) -> None:
        return None


class ThreadEvaluator:
    """Up to `workers` episodes at once on threads of this process, started in `play_order`."""

    def __init__(self, runtime: Runtime, workers: int) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.runtime = runtime
        self.workers = workers

    def evaluate(self, specs: Sequence[EpisodeSpec], progress: EpisodeProgressFn | None = None) -> list[EpisodeOutcome]:
        emit = progress or quiet
        total = len(specs)
        outcomes: list[EpisodeOutcome | None] = [None] * total
        events: queue.Queue[tuple[str, int, Any]] = queue.Queue()
        stop = threading.Event()

        def work(i: int) -> None:
            if stop.is_set():
                events.put(("skipped", i, None))
                return
            events.put(("started", i, None))
            try:
                events.put(("finished", i, self.runtime.play(specs[i], stop)))
            except _Cancelled:
                events.put(("cancelled", i, None))
            except BaseException as exc:  # handed to the calling thread, raised there
                events.put(("failed", i, exc))

        failures: dict[int, BaseException] = {}
        in_flight = done = 0
        executor = ThreadPoolExecutor(max_workers=max(1, min(self.workers, total)),
                                      thread_name_prefix="trinity-episode")
        try:
            for i in play_order(specs):
                executor.submit(work, i)
            left = total
            while left:
                kind, i, payload = events.get()
                if kind == "started":
                    in_flight += 1
                    if not stop.is_set():
                        emit(EpisodeStarted(index=i, in_flight=in_flight, done=done, total=total))
                    continue
                left -= 1
                if kind == "skipped":
                    continue
                in_flight -= 1
                if kind == "cancelled":
                    continue
                if kind == "failed":
                    failures[i] = payload
                    stop.set()
                    continue
                outcomes[i] = payload
                done += 1
                if not stop.is_set():
                    emit(EpisodeFinished(index=i, in_flight=in_flight, done=done, total=total, outcome=payload))
        except BaseException:
            stop.set()
            raise
        finally:
            # Episodes not started are dropped; running ones end before their next turn.
            executor.shutdown(wait=True, cancel_futures=True)
        if failures:
            raise failures[min(failures)]
        finished = [o for o in outcomes if o is not None]
        settle_cache_flags(self.runtime.pool, finished)
        return finished

    def close(self) -> None:
        return None


def make_evaluator(runtime: Runtime, parallel: int = 1) -> SerialEvaluator | ThreadEvaluator:
    """The evaluator for `parallel` episodes at once: serial for 1, threads above."""
    if parallel <= 1:
        return SerialEvaluator(runtime)
    return ThreadEvaluator(runtime, parallel)
