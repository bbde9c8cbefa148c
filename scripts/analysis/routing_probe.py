"""How much a linear router reading the coordinator's turn-0 feature could gain, from a bench run.

    python scripts/analysis/routing_probe.py RUN [--dims 4,8,16,32,64] [--ridge 1.0]

RUN: a bench run (name under TRINITY_HOME/runs, or its directory) with `single:` rows for
every pool member. For each item the bench played every member alone on, the script takes
the coordinator's feature of the task alone (the text a head reads at turn 0; read from the
hidden-state cache when the bench filled it) and whether each member was right. Then, leave
one item out at a time: the features are projected on their top K principal directions
(fitted on all items' features, labels unseen), a ridge regression per member predicts
"right" from those K coordinates on the other items, and the left-out item goes to the
member predicted likeliest right. Printed: the routed accuracy for each K beside the best
single member, the best member per task (chosen on the same items, so an upper bound for
routing by task) and the oracle.

This is supervised, with every member's outcome on every item: a far stronger signal than
the binary reward of the one episode a head's candidate plays, so it bounds what one-shot
routing from these features can learn from this many items; it says nothing of what later
turns (verification, revision) can add.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # the repository

from trinity_cli.coordinator.policy import Coordinator, resolve_head  # noqa: E402
from trinity_cli.runs.run_files import BenchRun  # noqa: E402
from trinity_cli.runs.store import RunStore  # noqa: E402


def routed_accuracy(x: np.ndarray, right: np.ndarray, dims: int, ridge: float) -> float:
    """Leave-one-out accuracy of routing each row of `x` to the column of `right` (rows:
    items, columns: members, 1 = right) that a ridge regression on the other rows predicts
    highest, over the top `dims` principal coordinates of `x` (ties: the first member)."""
    centred = x - x.mean(axis=0)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)
    z = centred @ (vt[:dims].T / (singular[:dims] / np.sqrt(len(x))))  # unit variance per coordinate
    z = np.c_[z, np.ones(len(z))]
    got = 0.0
    for j in range(len(x)):
        rest = np.arange(len(x)) != j
        w = np.linalg.solve(z[rest].T @ z[rest] + ridge * np.eye(z.shape[1]), z[rest].T @ right[rest])
        got += right[j, int(np.argmax(z[j] @ w))]
    return got / len(x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run")
    ap.add_argument("--dims", default="4,8,16,32,64")
    ap.add_argument("--ridge", type=float, default=1.0)
    args = ap.parse_args()

    store = RunStore()
    path = Path(args.run).expanduser()
    path = path if (path / BenchRun.EPISODES).is_file() else store.path(args.run)
    outcome: dict[str, dict[str, float]] = defaultdict(dict)
    text: dict[str, str] = {}
    task: dict[str, str] = {}
    for e in BenchRun(path).read_episodes():
        if e["system"].startswith("single:") and e["transcript"]:
            outcome[e["item"]][e["system"].removeprefix("single:")] = float(e["reward"])
            text[e["item"]], task[e["item"]] = e["transcript"]["task"], e["task"]
    members = sorted({m for row in outcome.values() for m in row})
    items = sorted(i for i, row in outcome.items() if len(row) == len(members))
    if len(members) < 2 or len(items) < 10:
        sys.exit(f"{path.name}: needs single rows of 2 or more members on 10 or more common items "
                 f"(found {len(members)} members, {len(items)} items)")
    right = np.array([[outcome[i][m] for m in members] for i in items])
    tasks = np.array([task[i] for i in items])
    coordinator = Coordinator(resolve_head("untrained", "any", ["x"]))
    x = np.array([coordinator.state_feature(text[i]) for i in items], dtype=np.float64)
    coordinator.close()

    print(f"{path.name}: {len(items)} items every member played alone; members {', '.join(members)}")
    for m, acc in zip(members, right.mean(axis=0), strict=True):
        print(f"  single {m:<24} {acc:.3f}")
    per_task = sum(right[tasks == t].mean(axis=0).max() * np.sum(tasks == t) for t in set(tasks)) / len(items)
    print(f"  best member per task          {per_task:.3f}  (chosen on these items)")
    print(f"  oracle (any member right)     {right.max(axis=1).mean():.3f}")
    for dims in (int(d) for d in args.dims.split(",")):
        if dims >= len(items):
            continue
        print(f"  routed, leave-one-out, K={dims:<3}  {routed_accuracy(x, right, dims, args.ridge):.3f}")


if __name__ == "__main__":
    main()
