"""The search itself, apart from the episodes it scores: the separable CMA-ES strategy and its
random stream, a fresh run's checkpoint state, candidates' fitness from their episodes, and a
generation's curve. The only module that imports `cma`.

pycma samples candidates with a generator of its own (`Randn`: a numpy RandomState seeded with
seed + 1), stored inside the pickled strategy: nothing else in the process (numpy's global RNG
included) can shift the candidates, and a resumed run draws exactly what an uninterrupted one
would.

Checkpoint state (a plain dict, pickled by runs/store.py; fields: docs/files.md#evolve-runs):
{"es", "generation", "spent", "val_spent", "best": {"vector", "val", "generation"}, "curves",
"input"}.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# Initial step size of SVF offsets relative to head weights: an offset of 0.1 scales a
# singular value by exp(0.1), about 10 % (before the sum is restored); a head weight of 1
# moves a logit by at most 1 (unit-norm features).
SVF_STD = 0.1


class Randn:
    """pycma's `randn` option: standard normal draws from a generator of our own.

    A picklable callable (it travels inside the checkpointed strategy, state included).
    pycma reads no other randomness but one global draw per ask for populations under 6
    (it mirrors their candidates), which does not touch this stream.
    """

    def __init__(self, seed: int) -> None:
        self.rng = np.random.RandomState(seed)

    def __call__(self, *shape: int) -> np.ndarray:
        return self.rng.randn(*shape)


def default_popsize(n: int) -> int:
    """pycma's default population for `n` parameters."""
    return 4 + int(3 * math.log(n))


def new_state(start: np.ndarray, sigma0: float, seed: int, popsize: int, n_svf: int,
              center: dict[str, Any] | None) -> dict[str, Any]:
    """A fresh run's state: the strategy at `start` (the first `n_svf` parameters, SVF
    offsets, with step SVF_STD; head weights 1), nothing spent, `start` as the best so far."""
    import cma

    stds = [SVF_STD] * n_svf + [1.0] * (start.size - n_svf)
    es = cma.CMAEvolutionStrategy(
        start,
        sigma0,
        # `randn`: pycma's own generator (see Randn); with it pycma leaves numpy's global
        # RNG alone, and `seed` must be NaN or it warns that the seed goes unused.
        {"CMA_diagonal": True, "randn": Randn(seed + 1), "seed": float("nan"), "popsize": popsize,
         "verbose": -9, "verb_disp": 0, "verb_log": 0, "CMA_stds": stds, "maxiter": 10**9, "tolfun": 0,
         "tolx": 0, "tolfunhist": 0, "tolstagnation": 10**9,
         # Plain mirrored sampling: the default selective mirroring injects solutions that a
         # small population cannot absorb when fitness is flat (all-zero rewards are common).
         "CMA_mirrormethod": 0},
    )
    return {"es": es, "generation": 0, "spent": 0, "val_spent": 0,
            "best": {"vector": start.copy(), "val": None, "generation": -1}, "curves": [], "input": center}


def fitness(played: list[dict[str, Any]], n_candidates: int, batch: int,
            cost_weight: float) -> tuple[list[float], list[dict[str, Any]]]:
    """Each candidate's fitness, mean reward - cost_weight * mean cost, from its `batch`
    episodes (`played` holds candidate 0's, then candidate 1's, ...); and the episodes, each
    marked with its candidate's index."""
    scores, episodes = [], []
    for c in range(n_candidates):
        eps = played[c * batch:(c + 1) * batch]
        for e in eps:
            e["candidate"] = c
        reward = float(np.mean([e["reward"] for e in eps]))
        cost = float(np.mean([e["cost"] for e in eps]))
        scores.append(reward - cost_weight * cost)
        episodes.extend(eps)
    return scores, episodes


# The pool counters a curve carries per generation and in total (docs/files.md#evolve-runs).
COUNTERS = ("pool_calls", "cache_hits", "tokens")


def curve(state: dict[str, Any], generation: int, scores: Sequence[float], val: float | None, seconds: float,
          before: dict[str, int], after: dict[str, int],
          interrupted: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A generation's curve (docs/files.md#evolve-runs): its fitness, validation and seconds,
    and the pool counters of the process that finished it (`after` - `before`) and summed over
    the run so far. `interrupted`: the counters of earlier processes stopped during this
    generation (runs/run_files.EvolveRun.partial), kept in the curve as they are and added
    to the totals."""
    previous = state["curves"][-1] if state["curves"] else {}
    out: dict[str, Any] = {
        "generation": generation, "spent": state["spent"], "best_fitness": max(scores),
        "mean_fitness": float(np.mean(scores)), "val": val, "seconds": seconds,
        "sigma": float(state["es"].sigma),  # the step size after this generation's update
    }
    for key in COUNTERS:
        out[f"{key}_gen"] = after[key] - before[key]
        earlier = sum(int(p[key]) for p in interrupted)
        out[f"{key}_total"] = previous.get(f"{key}_total", 0) + out[f"{key}_gen"] + earlier
    if interrupted:
        out["interrupted"] = [dict(p) for p in interrupted]
    return out


@dataclass
class GenerationTally:
    """This process's work on the generation being played, after what earlier processes
    stopped during it had done (runs/run_files.EvolveRun.partial)."""

    generation: int
    earlier: list[dict[str, Any]]
    before: dict[str, int]  # the pool counters when this process began the generation
    started: float  # time.perf_counter() then
    episodes: int = 0

    def episode_finished(self, counters: dict[str, int]) -> list[dict[str, Any]]:
        """Count one more finished episode; every process's counts so far, oldest first (what
        runs/run_files.EvolveRun.write_partial records)."""
        self.episodes += 1
        mine = {"episodes": self.episodes, "seconds": round(time.perf_counter() - self.started, 3),
                **{key: counters[key] - self.before[key] for key in COUNTERS}}
        return [*self.earlier, mine]
