"""Reaching Ray and what runs on each actor: the `ray` import (the optional extra, with the
line that says how to install it), `--ray` / `--ray-workers` as `RayOptions` and their checks,
and `_EpisodeWorker`, the actor that builds its own runtime once and plays one episode at a
time, computing with the CPUs Ray assigned it (`actor_cpus`). The driver's side, the evaluator
that hands actors their episodes: evaluators/ray_actors.py. `ray` is imported inside functions
only, here and there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

from trinity_cli.errors import ConfigError, option
from trinity_cli.evaluators.local import EpisodeOutcome, EpisodeSpec, Runtime, WorkerSetup
from trinity_cli.evaluators.ray_cache import KeeperCache
from trinity_cli.pool.pool import open_pool

INSTALL_HINT = "install it with: pip install 'trinity-cli[ray]' (from a checkout: pipx install '.[ray]')"


def import_ray() -> ModuleType:
    """The `ray` module, or a ConfigError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(f"{option('ray')} needs Ray, which is not installed", INSTALL_HINT) from exc
    return ray


@dataclass(frozen=True)
class RayOptions:
    """Where to play: `address` is what `ray.init` takes ("local", the default: a Ray
    instance started on this machine for the run; "auto": the cluster this machine joined
    with `ray start`; "HOST:PORT": that head node); `workers` is the number of actors
    (None: one per node with a CPU)."""

    address: str = "local"
    workers: int | None = None

    @classmethod
    def from_cli(cls, address: str | None, workers: int | None) -> RayOptions | None:
        """The options of `--ray [ADDRESS]` and `--ray-workers N`; None without `--ray`."""
        if address is None:
            if workers is not None:
                raise ConfigError(f"{option('ray_workers')} needs {option('ray')}",
                                  f"add {option('ray')} (a local Ray instance) or {option('ray')} ADDRESS")
            return None
        if workers is not None and workers < 1:
            raise ConfigError(f"{option('ray_workers')} must be at least 1, got {workers}")
        return cls(address=address or "local", workers=workers)


def check_ray(ray: RayOptions | None, parallel: int | None) -> None:
    """Before any work: with `ray`, Ray must be installed, and `--parallel` (threads of this
    process) is refused."""
    if ray is None:
        return
    if parallel is not None and parallel > 1:
        raise ConfigError(f"{option('parallel')} runs episodes on threads of this machine, {option('ray')} on Ray "
                          "actors: choose one",
                          f"with {option('ray')}, {option('ray_workers')} sets how many episodes run at once")
    import_ray()


def actor_cpus(assigned: dict[str, float]) -> int:
    """The CPUs an actor computes with: those Ray assigned it (at least one). Its llama.cpp
    members (those whose pool file sets no `n_threads`) and OpenMP use that many threads
    (torch computes on one thread everywhere: coordinator/backbone.py), so actors that share
    a machine do not each take all of its cores (two actors of 2 threads on 2 cores spin
    against each other: 5x slower than one serial run)."""
    return max(1, int(assigned.get("CPU", 1)))


class _EpisodeWorker:
    """One actor: `start` builds its runtime from the driver's setup, `play` plays one episode."""

    def __init__(self) -> None:
        self.runtime: Runtime | None = None
        self.cache: KeeperCache | None = None

    def start(self, setup: WorkerSetup, keeper: Any) -> str:
        """Size this actor to the CPUs Ray gave it (`actor_cpus`), open the pool (models are
        checked on this node, loaded on first use); the node's id."""
        cpus = actor_cpus(import_ray().get_runtime_context().get_assigned_resources())
        from trinity_cli.coordinator.backbone import limit_threads

        limit_threads(cpus)
        pool = open_pool(setup.pool.sized_to(cpus), use_cache=False)
        if setup.use_cache and keeper is not None:
            self.cache = KeeperCache(keeper, import_ray().get)
            pool.cache = self.cache
        pool.check_assets()
        self.runtime = Runtime(pool, device=setup.device)
        node: str = import_ray().get_runtime_context().get_node_id()
        return node

    def play(self, spec: EpisodeSpec, attempt: str) -> tuple[EpisodeOutcome, dict[str, Any]]:
        """The episode's outcome and what it added to this actor's pool counters."""
        assert self.runtime is not None, "start() first"
        stats = self.runtime.pool.stats
        before = asdict(stats)
        if self.cache is not None:
            self.cache.attempt = attempt
        try:
            outcome = self.runtime.play(spec)
        finally:
            if self.cache is not None:
                self.cache.release()
        return outcome, {k: v - before[k] for k, v in asdict(stats).items()}
