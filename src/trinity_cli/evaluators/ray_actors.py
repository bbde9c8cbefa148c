"""Play a batch of episodes on Ray actors across a cluster: one more evaluator behind
evaluators/local.py's `evaluate(specs, progress) -> outcomes` (`--ray [ADDRESS]`).

The only module that imports `ray`, and only inside functions: without the optional extra
(`pip install 'trinity-cli[ray]'`) everything else works and `--ray` says how to get it.

Who does what:
    driver     (this process) keeps everything that is not an episode: pycma, the checkpoint,
               the run directory, the pool's counters. It starts the actors, hands each idle
               one the next spec, and reads the outcomes back in spec order.
    actors     one per worker slot (`--ray-workers N`, default one per node with a CPU; each
               takes one CPU of the cluster, spread over the nodes, and computes with that
               many threads: llama.cpp members without `n_threads` in the pool file and
               OpenMP; torch computes on one thread in every process, so features are the
               driver's: coordinator/backbone.py; `actor_cpus`). Each builds its own
               `Runtime` once from the driver's `WorkerSetup` (the validated pool file, the
               device): its own pool, so models load once per actor, and its own coordinator
               backbone, loaded on first use. It then plays one episode at a time.
    keeper     one async actor on the driver's node (no CPU) that owns the driver's rollout
               cache for the actors: every cache lookup of an actor asks it, and every reply
               an actor computes is sent to it and written into the driver's cache at once.

Why the cache is shared through a keeper, not shipped with the specs: the calls an episode
will make depend on the replies it gets, so the driver cannot know beforehand which entries
an actor needs; and the cache lives on the driver's disk, which other nodes cannot read. So
actors ask, one round trip per pool call (a millisecond against a model call). Writing each
reply the moment it is made, as a local pool does, keeps resume free after a SIGKILL of the
driver: every call that had finished, in any episode, is in the cache. And because every
call passes through one place, the keeper gives single flight across the cluster (pool/pool.py
gives it across threads): an identical call already running on another actor is waited for
and then answered by the cache, so a generation makes the same model calls as a local run.

What travels: to an actor, once, the `WorkerSetup` (the pool file as validated — models are
loaded from each node's own disk, so the pool must name models every node has: packaged
ones, or an API / server every node can reach); then per episode its spec (the head's
weights, the item, the seed, about the size of the head) and back its `EpisodeOutcome`
(the transcript) with the pool counters it moved. Between actors and keeper: cache keys
and replies (`Completion`). No model, backbone or cache file ever travels.

Contract (evaluators/local.py's): outcomes do not depend on where episodes ran. Each episode is a
function of its spec and the pool's replies; single flight makes the same model calls;
`settle_cache_flags` gives every turn the `cached` flag of a serial run, and the pool's
counters of the batch (calls, cache hits, tokens, seconds) are recomputed from the settled
turns, so they count as a serial run's too.

Failures: an actor (or its node) that dies mid-episode loses that episode only; it is
played again on another actor (at most `MAX_ATTEMPTS` times; its "started" progress event
comes again), and a replacement actor is started, which joins as soon as the cluster has
room for it. An actor that cannot start at all (trinity not importable on its node) is an
error at once, as is a `start` that raises (a model missing on that node). Calls the lost attempt had
made are in the cache (the replay is served them) and count as computed in this batch, so
flags and counters stay a serial run's. When no actor is left and none can start within
`STALL_S` seconds, the batch fails with an error. An episode that raises aborts the batch
(its exception is raised here, as with threads); so do Ctrl-C and a progress callback
that raises: the actors are killed at once (running episodes stop) and the next batch
starts fresh ones. A driver killed outright takes its actors with it (Ray ends the job);
resume is evolve's, from its checkpoint and the cache.
"""

from __future__ import annotations

import logging
import os
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, fields
from typing import Any

from trinity_cli.errors import BackendError, ConfigError, TrinityError, option
from trinity_cli.evaluators.local import (
    EpisodeOutcome,
    EpisodeSpec,
    Runtime,
    settle_cache_flags,
)
from trinity_cli.evaluators.ray_cache import CacheKeeper
from trinity_cli.evaluators.ray_cluster import RayOptions, _EpisodeWorker, import_ray
from trinity_cli.events import EpisodeFinished, EpisodeProgressFn, EpisodeStarted, quiet
from trinity_cli.pool.pool import PoolStats
from trinity_cli.pool.rollout_cache import RolloutCache

log = logging.getLogger(__name__)

# An episode whose actor died this many times is not tried again.
MAX_ATTEMPTS = 3
# Seconds to wait for a replacement actor when none is left.
STALL_S = 300.0


# -- on each actor ----------------------------------------------------------------------------


# -- the driver's evaluator -------------------------------------------------------------------
def _cause(exc: BaseException) -> BaseException:
    """The exception an episode raised on an actor, out of Ray's wrapper; Ray's own errors
    there (the keeper lost with its node) become one line."""
    from ray.exceptions import RayError

    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and not isinstance(cause, RayError):
        return cause
    return BackendError(f"Ray: {_last_line(exc)}", "check the cluster with `ray status`, then run the command "
                        "again to resume")


def _last_line(exc: BaseException) -> str:
    """The last line of Ray's report, colour codes removed: the exception raised on the node."""
    lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _start_error(exc: BaseException) -> ConfigError:
    """Why an actor could not start, in one line: the last line of Ray's report (the
    exception raised on the node, e.g. `ModuleNotFoundError: No module named 'trinity_cli'`)."""
    return ConfigError(f"a Ray actor could not start: {_last_line(exc)}",
                       "every node needs trinity-cli, the same version as here, in the Python that Ray runs "
                       "(pip install 'trinity-cli[ray]'), and the pool's models")


class RayEvaluator:
    """Episodes on Ray actors (see the module docstring); `close()` when done."""

    def __init__(self, runtime: Runtime, options: RayOptions) -> None:
        ray = import_ray()
        self.runtime = runtime
        self.options = options
        self.started_on: list[str] = []  # the node of every actor that started, in order
        self.lost_attempts = 0  # episodes given up with their actor and played again
        self.nodes: dict[Any, str] = {}  # ready actor -> its node id
        self._idle: list[Any] = []  # ready actors, in the order they became free
        self._starting: dict[Any, Any] = {}  # start() ref -> actor
        self._keeper: Any = None
        self._batches = 0
        self._start_failures = 0
        self._own_ray = False
        if not ray.is_initialized():
            local = options.address == "local"
            try:
                ray.init(address=options.address, include_dashboard=False, log_to_driver=False,
                         logging_level="ERROR", configure_logging=True,
                         num_cpus=max(os.cpu_count() or 1, options.workers or 1) if local else None)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError(f"{option('ray')} {options.address}: could not connect to a Ray cluster ({exc})",
                                  "start one with `ray start --head` and give the address it prints (a cluster "
                                  "with token authentication also needs RAY_AUTH_MODE=token and its token here), "
                                  f"or use {option('ray')} alone for a local instance") from exc
            self._own_ray = True
        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
        cpus = sum(int(n["Resources"]["CPU"]) for n in nodes)
        self.workers = options.workers or len(nodes)
        if not nodes or self.workers > cpus:
            self.close()
            raise ConfigError(f"{option('ray_workers')} {self.workers}: the Ray cluster has {cpus} CPUs and each "
                              "actor takes one",
                              f"use {option('ray_workers')} {cpus} or fewer, or add nodes (ray start --address=...)")
        cache = runtime.pool.cache
        if cache is not None:
            assert isinstance(cache, RolloutCache)  # the driver's pool caches on disk
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
            keeper_cls = ray.remote(num_cpus=0, max_concurrency=1000)(CacheKeeper)
            self._keeper = keeper_cls.options(scheduling_strategy=here).remote(str(cache.directory))
        self._setup = runtime.setup
        # On a local instance the actors share this machine's cores (open_evaluator sized
        # their number); on a cluster each takes one CPU of a node.
        each = max(1, (os.cpu_count() or 1) // self.workers) if options.address == "local" else 1
        self._worker_cls = ray.remote(num_cpus=each, max_restarts=0, max_task_retries=0)(_EpisodeWorker)
        self._fill()
        if self._keeper is not None:
            from ray.exceptions import RayActorError

            try:
                ray.get(self._keeper.forget.remote())  # started (the actors start meanwhile)
            except RayActorError as exc:
                self.close()
                raise _start_error(exc) from None

    # -- actors ---------------------------------------------------------------------------
    def _fill(self, busy: int = 0) -> None:
        """Start actors until `workers` are ready, starting or `busy`."""
        for _ in range(self.workers - busy - len(self._idle) - len(self._starting)):
            actor = self._worker_cls.options(scheduling_strategy="SPREAD").remote()
            self._starting[actor.start.remote(self._setup, self._keeper)] = actor

    def _drop(self, actor: Any) -> None:
        ray = import_ray()
        self.nodes.pop(actor, None)
        try:
            ray.kill(actor)
        except Exception:  # already gone with its node
            pass

    def _kill_all(self, busy: Sequence[Any] = ()) -> None:
        for actor in [*self._idle, *self._starting.values(), *busy]:
            self._drop(actor)
        self._idle.clear()
        self._starting.clear()

    def _joined(self, ref: Any, busy: int) -> None:
        """A starting actor answered: it becomes idle, or is replaced (its node was lost), or
        its error is raised (it cannot start there: trinity or a model missing on the node)."""
        ray = import_ray()
        from ray.exceptions import RayActorError, RayTaskError

        actor = self._starting.pop(ref)
        try:
            self.nodes[actor] = ray.get(ref)
        except RayActorError as exc:
            self._drop(actor)
            self._start_failures += 1
            # Its creation failed (trinity not importable there): trying again would fail again.
            if exc.actor_init_failed or self._start_failures > MAX_ATTEMPTS * self.workers:
                raise _start_error(exc) from None
            self._fill(busy)
            return
        except RayTaskError as exc:
            raise _cause(exc) from None
        self.started_on.append(self.nodes[actor])
        self._idle.append(actor)

    def close(self) -> None:
        """Stop the actors and the keeper; end the Ray instance this evaluator started."""
        ray = import_ray()
        self._kill_all()
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            ray.kill(keeper)
        if self._own_ray:
            ray.shutdown()
            self._own_ray = False

    # -- a batch ----------------------------------------------------------------------------
    def evaluate(self, specs: Sequence[EpisodeSpec], progress: EpisodeProgressFn | None = None) -> list[EpisodeOutcome]:
        self._batches += 1
        batch = _Batch(self._batches, specs, progress or quiet)
        before = PoolStats(**asdict(self.runtime.pool.stats))
        self._fill()
        try:
            while batch.todo or batch.running:
                self._dispatch(batch)
                ref = self._next_ready(batch)
                if ref in self._starting:
                    self._joined(ref, busy=len(batch.running))
                else:
                    self._collect(batch, ref)
        except BaseException:
            self._abort(batch)
            raise
        return self._settle(batch, before)

    def _dispatch(self, batch: _Batch) -> None:
        """Give idle actors the batch's next episodes."""
        while batch.todo and self._idle:
            i = batch.todo.popleft()
            actor = self._idle.pop(0)
            attempt = batch.next_attempt(i)
            batch.running[actor.play.remote(batch.specs[i], attempt)] = (actor, i, attempt)
            batch.emit(EpisodeStarted(index=i, in_flight=len(batch.running), done=batch.done, total=batch.total))

    def _next_ready(self, batch: _Batch) -> Any:
        """The next episode (or starting actor) that is done; an error when none is left to wait for."""
        ray = import_ray()
        waiting = [*batch.running, *self._starting]
        if not waiting:
            raise TrinityError("no Ray actor is left to play episodes",
                               "check the cluster with `ray status`, then run the command again to resume")
        ready, _ = ray.wait(waiting, num_returns=1, timeout=None if batch.running else STALL_S)
        if not ready:
            raise TrinityError(f"no Ray actor is left to play episodes and none started in {STALL_S:.0f} s",
                               "add nodes to the cluster (ray start --address=...), then run the command "
                               "again to resume")
        return ready[0]

    def _collect(self, batch: _Batch, ref: Any) -> None:
        """Read a finished episode; one whose actor died goes back to the front of the queue."""
        ray = import_ray()
        from ray.exceptions import NodeDiedError, RayActorError, RayTaskError, WorkerCrashedError

        actor, i, attempt = batch.running.pop(ref)
        try:
            outcome, delta = ray.get(ref)
        except RayTaskError as exc:  # first: a task failure is not its actor's death
            raise _cause(exc) from None
        except (RayActorError, WorkerCrashedError, NodeDiedError):
            # The actor (or its node) died mid-episode: play the episode again elsewhere.
            batch.lost.append(attempt)
            self.lost_attempts += 1
            self._drop(actor)
            if self._keeper is not None:
                self._keeper.abandon.remote([attempt])
            if batch.attempts[i] >= MAX_ATTEMPTS:
                raise BackendError(f"episode {i} of the batch lost its Ray actor {batch.attempts[i]} times",
                                   "check the nodes' logs (ray status; /tmp/ray/session_latest/logs)") from None
            batch.todo.appendleft(i)
            self._fill(busy=len(batch.running))
            return
        self._idle.append(actor)
        batch.outcomes[i], batch.deltas[i] = outcome, delta
        _add(self.runtime.pool.stats, delta)
        batch.done += 1
        batch.emit(EpisodeFinished(index=i, in_flight=len(batch.running), done=batch.done, total=batch.total,
                                   outcome=outcome))

    def _abort(self, batch: _Batch) -> None:
        """Stop everything now: running episodes end with their actors; the next batch starts fresh ones."""
        ray = import_ray()
        from ray.exceptions import RayActorError

        self._kill_all([a for a, _, _ in batch.running.values()])
        if self._keeper is not None:
            try:
                ray.get(self._keeper.reset.remote(batch.started()))
            except RayActorError:  # the keeper is gone too: nothing is left in flight
                pass

    def _settle(self, batch: _Batch, before: PoolStats) -> list[EpisodeOutcome]:
        """The batch's outcomes in spec order, their cache flags and the pool counters settled
        as a serial run would have them."""
        ray = import_ray()
        pool = self.runtime.pool
        finished = [o for o in batch.outcomes if o is not None]
        assert len(finished) == batch.total
        computed: list[str] = []
        if self._keeper is not None:
            computed = ray.get(self._keeper.made_by.remote(batch.lost)) if batch.lost else []
            self._keeper.forget.remote()
        settle_cache_flags(pool, finished, computed)
        pool.stats = _settled_stats(before, finished, batch.deltas)
        return finished


class _Batch:
    """One `evaluate` call's state: what is queued, running, done, and how often each episode
    was tried (an attempt is named "<batch>:<index>:<try>" for the cache keeper)."""

    def __init__(self, number: int, specs: Sequence[EpisodeSpec], emit: EpisodeProgressFn) -> None:
        self.number, self.specs, self.emit = number, specs, emit
        self.total = len(specs)
        self.outcomes: list[EpisodeOutcome | None] = [None] * self.total
        self.deltas: list[dict[str, Any]] = [{} for _ in range(self.total)]
        self.attempts = [0] * self.total
        self.lost: list[str] = []  # attempts whose actor died
        self.todo = deque(range(self.total))
        self.running: dict[Any, tuple[Any, int, str]] = {}  # play() ref -> (actor, spec index, attempt)
        self.done = 0

    def _name(self, i: int, attempt: int) -> str:
        return f"{self.number}:{i}:{attempt}"

    def next_attempt(self, i: int) -> str:
        """Count one more try of episode `i` and name it."""
        self.attempts[i] += 1
        return self._name(i, self.attempts[i] - 1)

    def started(self) -> list[str]:
        """Every attempt dispatched so far (what an aborted batch hands the keeper to abandon)."""
        return [self._name(i, t) for i in range(self.total) for t in range(self.attempts[i])]


def _add(stats: PoolStats, delta: dict[str, Any]) -> None:
    for f in fields(PoolStats):
        setattr(stats, f.name, getattr(stats, f.name) + delta.get(f.name, 0))


def _settled_stats(before: PoolStats, outcomes: Sequence[EpisodeOutcome],
                   deltas: Sequence[dict[str, Any]]) -> PoolStats:
    """The pool counters after a batch, as a serial run counts them: one call per turn, a
    cache hit per turn settled as cached (a transcript-less episode adds what its actor
    counted)."""
    stats = PoolStats(**asdict(before))
    for outcome, delta in zip(outcomes, deltas, strict=True):
        if outcome.transcript is None:
            _add(stats, delta)
            continue
        for turn in outcome.transcript.turns:
            stats.count(turn.cached, turn.prompt_tokens, turn.completion_tokens, turn.latency_s)
    return stats
