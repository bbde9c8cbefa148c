"""Which coordinator backbone's features tell whom to ask: a comparison before evolving.

    python scripts/analysis/backbone_probe.py MATRIX.json
    python scripts/analysis/backbone_probe.py MATRIX.json --backbones smollm2-135m,qwen2.5-coder-0.5b \
        --tasks gsm8k:train:32,arc-challenge:train:32,mbpp:train:32 --dims 4,8,16,32

MATRIX: a sample matrix of training items (`trinity matrix --split train --out
FILE`, same `--tasks` and `--seed`); an item's label for a member is the share of its replies
that were right. For each backbone, with exactly the code `trinity evolve --init-labels` runs
(evolve/input_fit.py, evolve/label_fit.py): the turn-0 features of the training items
(the task alone), the head input fitted on them (centre, scale, K principal directions), then a
ridge regression per member, its strength chosen by leave-one-out. Printed per backbone and K:

    routed     mean label of the member each held-out item is routed to (leave-one-out)
    fixed      the one member best on average (what routing has to beat)
    by task    each held-out item routed to the member best on the other items of its task
               (what a head that only recognises the task could do)
    oracle     each item's best member (a bound)
    ms         milliseconds per turn-0 feature (the backbone's encode, cache off)

This is supervised with every member's outcome on every item, far more signal than the one
episode a candidate plays: it bounds what first-turn routing from a backbone's features can
learn from these items, and says nothing of what later turns add. Training items only: no
test item is read.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from trinity_cli import tasks
from trinity_cli.coordinator import head as head_mod
from trinity_cli.coordinator.backbone_refs import describe, hidden_size_of
from trinity_cli.coordinator.policy import Coordinator
from trinity_cli.evolve.input_fit import center_tasks, fit_input_features
from trinity_cli.evolve.label_fit import fit_start, read_labels
from trinity_cli.pool_config import load_pool

DEFAULT_TASKS = "gsm8k:train:32,arc-challenge:train:32,mbpp:train:32"


def features_of(backbone: str, pool_name: str, models: list[str], items: list[tasks.TaskItem],
                device: str) -> tuple[np.ndarray, float]:
    """(unit-norm turn-0 features, one row per item; ms per feature) read by `backbone`."""
    manifest = {"ref": backbone, "fingerprint": describe(backbone)[0], "hidden_size": hidden_size_of(backbone)}
    base = head_mod.untrained(pool_name, models, manifest, manifest["hidden_size"])
    with Coordinator(base, backbone_ref=backbone, device=device, use_cache=False) as coordinator:
        coordinator.state_feature(items[0].prompt)  # loads (and on first use converts) the backbone
        start = time.perf_counter()
        rows = [coordinator.state_feature(item.prompt) for item in items]
        ms = 1000 * (time.perf_counter() - start) / len(items)
    return np.array(rows), ms


def by_task_loo(items: list[tasks.TaskItem], labels: np.ndarray) -> float:
    """Mean label when each item goes to the member best on the other items of its task."""
    got = []
    for i, item in enumerate(items):
        others = [j for j, other in enumerate(items) if other.task == item.task and j != i]
        pick = int(np.argmax(labels[others].mean(axis=0))) if others else 0
        got.append(labels[i, pick])
    return float(np.mean(got))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("matrix", help="sample matrix of training items (trinity matrix --split train --out)")
    parser.add_argument("--tasks", default=DEFAULT_TASKS, help="the evolve run's training mix")
    parser.add_argument("--pool", default="local")
    parser.add_argument("--backbones", default="smollm2-135m,qwen2.5-coder-0.5b")
    parser.add_argument("--dims", default="4,8,16,32", help="input dimensions K to fit (0: the whole feature)")
    parser.add_argument("--seed", type=int, default=0, help="the evolve run's --seed (item draw, centre draw)")
    parser.add_argument("--center-items", type=int, default=256, help="the evolve run's --center-items")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    config = load_pool(args.pool)
    train = tasks.sample_items(tasks.parse_mix(args.tasks), seed=args.seed)
    labels_by_key = read_labels(args.matrix, config.names)
    items = [item for item in train if item.key in labels_by_key]
    if len(items) < 4:
        raise SystemExit(f"the matrix labels {len(items)} of the {len(train)} training items: "
                         "make it with the same --tasks and --seed")
    labels = np.array([labels_by_key[item.key] for item in items])
    centre = center_tasks(train, args.seed, args.center_items)
    print(f"{len(items)} training items labelled; members {', '.join(config.names)}; "
          f"by task (leave-one-out) {by_task_loo(items, labels):.3f}\n")
    print("| backbone | K | routed | fixed | by task | oracle | ridge | ms / feature |")
    print("|---|---|---|---|---|---|---|---|")
    for backbone in [b.strip() for b in args.backbones.split(",") if b.strip()]:
        features, ms = features_of(backbone, config.name, config.names, [*items, *centre], args.device)
        item_rows, centre_rows = features[:len(items)], features[len(items):]
        manifest = {"ref": backbone, "fingerprint": describe(backbone)[0], "hidden_size": features.shape[1]}
        for dims in [int(d) for d in args.dims.split(",")]:
            fitted = fit_input_features(centre_rows, dims)
            base = head_mod.untrained(config.name, config.names, manifest, features.shape[1], dims=dims)
            base = base.with_input(fitted["center"], fitted["scale"], fitted["items"], fitted["basis"])
            inputs = {item.key: base.inputs(row) for item, row in zip(items, item_rows, strict=True)}
            fit = fit_start(base, inputs, labels_by_key)
            print(f"| {backbone} | {dims or features.shape[1]} | {fit.picked_label_loo:.3f} | "
                  f"{fit.best_fixed_label:.3f} | {by_task_loo(items, labels):.3f} | {fit.oracle_label:.3f} | "
                  f"{fit.ridge:g} | {ms:.0f} |")


if __name__ == "__main__":
    main()
