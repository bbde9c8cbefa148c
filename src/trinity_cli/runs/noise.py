"""How noisy an evolve run's fitness is: can a difference between two candidates be seen in
one generation? Computed from its generations' episodes at no model call; `trinity inspect`
shows it beside the curves.

Every generation plays each candidate on one shared minibatch (episodes/gen-*.json: per
episode its candidate and 0/1 reward). For each minibatch size b in `sizes` up to the run's
own (and the run's own), over the generations:

    one          the standard deviation of a candidate's fitness (mean reward) over b items
                 drawn with replacement from its minibatch (a bootstrap): how much the same
                 head's score moves from one minibatch to the next;
    pair         the standard deviation of the difference between two candidates of one
                 generation scored on the same b items (paired: shared items cancel out);
    detectable   2 × pair, the smallest difference that stands above it (about a 95% test);
    spread       (the run's own b only) the standard deviation of the candidates' fitness on
                 the full minibatch;
    noise_share  (the run's own b only) the variance of one candidate's fitness over the
                 spread's variance: near or above 1, a generation's ranking is mostly noise
                 (above 1 where candidates move together on their shared items).

Result: {"generations", "population", "minibatch", "rows": [{"size", "one", "pair",
"detectable"[, "spread", "noise_share"]}]}, rewards as fractions; None without a generation
that has two candidates. Fitness here is the reward alone (a run's cost term is left out).
The bootstrap draws come from numpy's generator seeded with `seed`: the same run gives the
same table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

SIZES = (8, 16, 32)
DRAWS = 2000


def rewards_by_candidate(generation: dict[str, Any]) -> np.ndarray:
    """A generation's rewards as (candidates, items), in minibatch order."""
    by: dict[int, list[float]] = {}
    for episode in generation["episodes"]:
        by.setdefault(int(episode["candidate"]), []).append(float(episode["reward"]))
    return np.array([by[c] for c in sorted(by)])


def fitness_noise(generations: Iterable[dict[str, Any]], sizes: Sequence[int] = SIZES, draws: int = DRAWS,
                  seed: int = 0) -> dict[str, Any] | None:
    """The noise table of a run's generation records (module docstring)."""
    gens = [r for r in (rewards_by_candidate(g) for g in generations) if r.ndim == 2 and r.shape[0] >= 2]
    if not gens:
        return None
    own = gens[0].shape[1]
    rng = np.random.default_rng(seed)
    rows = []
    for b in sorted({*(s for s in sizes if s <= own), own}):
        one, pair, spread, noise = [], [], [], []
        for rewards in gens:
            c, n = rewards.shape
            if b > n:
                continue
            subsets = rng.integers(0, n, size=(draws, b))  # bootstrap: items drawn with replacement
            scores = rewards[:, subsets].mean(axis=2)  # (candidates, draws)
            one.append(float(scores.std(axis=1).mean()))
            i, j = rng.integers(0, c, size=(2, draws))
            keep = i != j
            diffs = scores[i[keep], np.arange(draws)[keep]] - scores[j[keep], np.arange(draws)[keep]]
            pair.append(float(diffs.std()))
            if b == n:
                spread.append(float(rewards.mean(axis=1).std()))
                noise.append(float(np.mean(scores.var(axis=1))))
        if not one:
            continue
        row: dict[str, Any] = {"size": b, "one": float(np.mean(one)), "pair": float(np.mean(pair)),
                               "detectable": 2 * float(np.mean(pair))}
        if spread:
            var = float(np.mean(np.square(spread)))
            row["spread"] = float(np.sqrt(var))
            row["noise_share"] = float(np.mean(noise)) / var if var > 0 else None
        rows.append(row)
    return {"generations": len(gens), "population": int(gens[0].shape[0]), "minibatch": int(own), "rows": rows}
