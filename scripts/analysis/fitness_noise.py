"""How noisy an evolve run's fitness is: can a 5-point difference between candidates be seen?

Usage: python scripts/analysis/fitness_noise.py RUN_DIR [--sizes 8,16,32] [--draws 2000] [--seed 0]

Every generation of an evolve run plays each candidate on one shared minibatch
(`RUN_DIR/episodes/gen-*.json`: per episode its candidate, item and 0/1 reward). From those
episodes, at no model call, for each minibatch size b up to the run's own:

  one candidate   the standard deviation of a candidate's fitness (mean reward) over b items
                  drawn with replacement from its minibatch (a bootstrap): how much the same
                  head's score moves from one minibatch to the next;
  two candidates  the standard deviation of the difference between two candidates of one
                  generation scored on the same b items (paired: shared items cancel out),
                  and the smallest difference that stands above it (2 sd, about a 95% test);
  spread          the standard deviation of the candidates' fitness on the full minibatch,
                  and the share of its variance the per-candidate noise accounts for
                  (near 100%: the generation's ranking is mostly noise).

A run whose candidates differ by less than the detectable difference cannot learn from one
generation's ranking; a larger minibatch (the noise falls as 1/sqrt(b)), a larger population
(CMA-ES averages over its best half) or fewer, larger differences (a smaller search space,
--input-dims) are the remedies.
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

import numpy as np


def generations(run: Path) -> list[np.ndarray]:
    """Per generation, rewards as (candidates, items) in minibatch order."""
    out = []
    for path in sorted(glob.glob(str(run / "episodes" / "gen-*.json"))):
        data = json.loads(Path(path).read_text())
        by: dict[int, list[float]] = {}
        for e in data["episodes"]:
            by.setdefault(int(e["candidate"]), []).append(float(e["reward"]))
        out.append(np.array([by[c] for c in sorted(by)]))
    return out


def measure(gens: list[np.ndarray], sizes: list[int], draws: int, seed: int) -> dict[int, dict[str, float]]:
    """Per size b: {"one", "pair", "detectable", "spread", "noise_share"} (module docstring)."""
    rng = np.random.default_rng(seed)
    result = {}
    for b in sizes:
        one, pair, spread, noise = [], [], [], []
        for rewards in gens:
            c, n = rewards.shape
            if b > n or c < 2:
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
        entry = {"generations": len(one), "one": float(np.mean(one)), "pair": float(np.mean(pair)),
                 "detectable": 2 * float(np.mean(pair))}
        if spread:
            var = float(np.mean(np.square(spread)))
            entry["spread"] = float(np.sqrt(var))
            entry["noise_share"] = float(np.mean(noise)) / var if var > 0 else float("nan")
        result[b] = entry
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="an evolve run directory (TRINITY_HOME/runs/run-N)")
    parser.add_argument("--sizes", default="8,16,32", help="minibatch sizes to measure (up to the run's)")
    parser.add_argument("--draws", type=int, default=2000, help="random subsets per generation and size")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    gens = generations(args.run)
    if not gens:
        raise SystemExit(f"no episodes under {args.run / 'episodes'}: give an evolve run that finished a generation")
    own = gens[0].shape[1]
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()} | {own})
    table = measure(gens, sizes, args.draws, args.seed)
    print(f"# Fitness noise of {args.run.name}: {len(gens)} generations, population {gens[0].shape[0]}, "
          f"minibatch {own}\n")
    print("| minibatch | one candidate (sd) | two candidates, paired (sd) | detectable difference "
          "| spread of candidates (sd) | share of spread that is noise |")
    print("|---|---|---|---|---|---|")
    for b, e in table.items():
        spread = f"{100 * e['spread']:.1f} pts" if "spread" in e else "—"
        share = f"{100 * e['noise_share']:.0f}%" if "noise_share" in e else "—"
        print(f"| {b} | {100 * e['one']:.1f} pts | {100 * e['pair']:.1f} pts | {100 * e['detectable']:.1f} pts "
              f"| {spread} | {share} |")


if __name__ == "__main__":
    main()
