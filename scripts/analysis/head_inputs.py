"""What a head reads and how much its choices depend on the conversation, from a bench run.

    python scripts/analysis/head_inputs.py RUN [--head head:default] [--center-items 256] [--seed 0]
    python scripts/analysis/head_inputs.py EVOLVE_RUN --generation G

RUN: a bench run (name under TRINITY_HOME/runs, or its directory) with a head row; or, with
--generation, an evolve run, whose generation G's episodes (every candidate's) are read
instead. Printed:

1. The head's mean choice probabilities (model softmax, role softmax) by task and turn
   (0, 1, 2+), and the mean total-variation distance between the distribution a head gives
   at a later turn and the one it gave at turn 0 of the same episode (0: the conversation
   changes nothing; 1: a different choice every time).
2. The geometry of the coordinator's features over every decision state of those episodes
   (each text rebuilt from the transcript exactly as the coordinator built it, features read
   from the hidden-state cache when the bench filled it): the mean cosine between two
   states' unit features, raw and after centring on the turn-0 features of
   `--center-items` training tasks (as `trinity evolve` centres a head's input), and the
   share of a random head's logit spread (weights N(0, 1)) that is common to every state.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # the repository

from trinity_cli import tasks  # noqa: E402
from trinity_cli.coordinator.policy import Coordinator, resolve_head  # noqa: E402
from trinity_cli.evolve.input_fit import center_tasks, fit_input  # noqa: E402
from trinity_cli.evolve.options import EvolveOptions  # noqa: E402
from trinity_cli.messages import Transcript  # noqa: E402
from trinity_cli.runs.run_files import BenchRun, EvolveRun  # noqa: E402
from trinity_cli.runs.store import RunStore  # noqa: E402


def run_dir(ref: str) -> Path:
    store = RunStore()
    for path in (Path(ref).expanduser(), store.root / ref):  # an evolve run under way has no run.json yet
        if (path / BenchRun.EPISODES).is_file() or (path / EvolveRun.EPISODES).is_dir():
            return path
    return store.path(ref)  # says which runs there are


def load_episodes(path: Path, head: str, generation: int | None) -> list[dict]:
    """Episodes with a transcript: the bench row `head`'s, or an evolve generation's."""
    if generation is not None:
        record = EvolveRun(path).generation(generation)
        if record is None:
            sys.exit(f"{path.name}: generation {generation} is not written yet")
        return [e for e in record["episodes"] if e["transcript"]]
    return [e for e in BenchRun(path).read_episodes() if e["system"] == head and e["transcript"]]


def mean_cosine(x: np.ndarray) -> float:
    """Mean cosine similarity over all pairs of distinct rows."""
    n = x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-8)
    k = len(x)
    return float(((n @ n.T).sum() - k) / (k * (k - 1)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("--head", default="head:default", help="the bench row to read")
    ap.add_argument("--center-items", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0, help="evolve's --seed: which training tasks centre")
    ap.add_argument("--generation", type=int, help="RUN is an evolve run: read this generation's episodes")
    args = ap.parse_args()

    path = run_dir(args.run)
    what = args.head if args.generation is None else f"generation {args.generation}"
    episodes = load_episodes(path, args.head, args.generation)
    if not episodes:
        sys.exit(f"no episodes of {what} in {path}")

    # 1. choices by task and turn
    probs: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    spread: dict[str, list[float]] = defaultdict(list)
    for e in episodes:
        turns = e["transcript"]["turns"]
        first = np.array(turns[0]["model_probs"] + turns[0]["role_probs"])
        m = len(turns[0]["model_probs"])
        for t in turns:
            p = np.array(t["model_probs"] + t["role_probs"])
            probs[(e["task"], "2+" if t["index"] >= 2 else str(t["index"]))].append(list(p))
            if t["index"] > 0:
                tv = 0.5 * (np.abs(p[:m] - first[:m]).sum() + np.abs(p[m:] - first[m:]).sum()) / 2
                spread[e["task"]].append(float(tv))
    print(f"{what} in {path.name}: {len(episodes)} episodes")
    print("mean choice probabilities (models in pool order, then thinker, worker, verifier):")
    for key in sorted(probs):
        print(f"  {key[0]:<16} turn {key[1]:<3} n={len(probs[key]):<4} "
              + " ".join(f"{v:.2f}" for v in np.mean(probs[key], axis=0)))
    print("mean distance of a later turn's choices from the episode's turn 0 "
          "(total variation, mean of the model and role distributions):")
    for task, values in sorted(spread.items()):
        print(f"  {task:<16} {np.mean(values):.3f} over {len(values)} later turns")

    # 2. feature geometry. An untrained head only names the backbone: features are measured, not choices.
    coordinator = Coordinator(resolve_head("untrained", "any", ["x"]))
    states = []
    for e in episodes:
        tr = Transcript.from_dict(e["transcript"])
        states += [coordinator.state_feature(tr.task, tr.turns[:k], tr.context) for k in range(len(tr.turns))]
    x = np.array(states, dtype=np.float64)
    train = tasks.sample_items(tasks.parse_mix(EvolveOptions().tasks), seed=args.seed)
    picked = center_tasks(train, args.seed, args.center_items)
    fitted = fit_input(coordinator, picked, 0)
    center, scale = fitted["center"], fitted["scale"]
    centred = (x - center) / scale
    print(f"features of {len(x)} decision states ({len(episodes)} at turn 0); centre from "
          f"{len(picked)} training tasks (seed {args.seed})")
    for name, v in (("raw (unit norm)", x), ("centred", centred)):
        common = float(np.linalg.norm(v.mean(axis=0)) ** 2 / np.mean(np.sum(v**2, axis=1)))
        print(f"  {name:<16} mean cosine between states {mean_cosine(v):.3f}; "
              f"share of a random head's logit spread common to every state {common:.3f}")
    coordinator.close()


if __name__ == "__main__":
    main()
