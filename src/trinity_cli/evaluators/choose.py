"""Which evaluator plays a command's episodes: this process (serially or on threads,
evaluators/local.py) or Ray actors (evaluators/ray_actors.py), and on a local Ray instance how
many actors this machine's cores can run without playing slower than this process would.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from trinity_cli.errors import option
from trinity_cli.evaluators.local import Evaluator, Runtime, make_evaluator
from trinity_cli.evaluators.ray_actors import RayEvaluator
from trinity_cli.evaluators.ray_cluster import RayOptions
from trinity_cli.pool_config import PoolConfig

log = logging.getLogger(__name__)


def open_evaluator(runtime: Runtime, parallel: int, ray: RayOptions | None) -> tuple[Evaluator, int]:
    """(the evaluator, the episodes it plays at once): `parallel` at once locally
    (evaluators/local.py), or one per Ray actor with `ray`. On a local Ray instance a pool
    with GGUF members gets the actors `local_workers` allows, each with its share of the
    cores, and when that is one actor, none: this process plays serially, the same results
    without Ray's overhead."""
    if ray is not None and ray.address == "local" and _has_gguf(runtime.pool.config):
        cores = os.cpu_count() or 1
        workers = local_workers(runtime.pool.config, ray.workers, cores)
        if workers == 1:
            log.warning(option("ray") + " on this machine (%d cores) gives one actor for GGUF models, which would play "
                        "as this process does: playing here instead, with the same results", cores)
            return make_evaluator(runtime, 1), 1
        if ray.workers is not None and workers < ray.workers:
            log.warning(option("ray_workers") + " %d on %d cores: %d actors of %d cores each for GGUF models",
                        ray.workers, cores, workers, cores // workers)
        ray = dataclasses.replace(ray, workers=workers)
    if ray is None:
        return make_evaluator(runtime, parallel), parallel
    evaluator = RayEvaluator(runtime, ray)
    return evaluator, evaluator.workers


def _has_gguf(config: PoolConfig) -> bool:
    return any(m.runs_locally for m in config.all_models)


# The fewest cores a local Ray actor gets when the pool has GGUF members: their decoding runs
# at the memory's pace, so two one-thread processes on two cores are slower than one process
# with two threads (docs/measurements.md, "Ray actors sized to their cores"; docs/scaling.md).
# TRINITY_RAY_MIN_CORES sets another floor (1: actors of one core, as many as asked).
MIN_LOCAL_CORES = 2


def local_workers(config: PoolConfig, requested: int | None, cores: int) -> int:
    """The actors a local Ray instance (`--ray` alone) starts on a machine with `cores`:
    `requested` (None: one), at most cores // MIN_LOCAL_CORES (or TRINITY_RAY_MIN_CORES) when
    the pool (or its conductor) has a GGUF member; pools of API or scripted models take what
    they ask."""
    wanted = requested or 1
    if not _has_gguf(config):
        return wanted
    floor = os.environ.get("TRINITY_RAY_MIN_CORES", "")
    least = int(floor) if floor.isdigit() and int(floor) >= 1 else MIN_LOCAL_CORES
    return max(1, min(wanted, cores // least))
