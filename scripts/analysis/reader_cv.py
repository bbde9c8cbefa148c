"""Which of a reader's weight groups its search should move, chosen on training items alone:
k-fold cross-validation of `trinity evolve --reader`'s search on one training matrix.

Usage: python scripts/analysis/reader_cv.py MATRIX.json [--folds 4] [--generations 40]
           [--variants all conf,margin margin priority,margin] [--cost-weight 0.05] [--seed 0] [--calls N]

For each variant (comma-separated weight groups of coordinator/reader.WEIGHT_GROUPS, or
"all"), each fold: the search (evolve/reader_fit.search, the recipe's popsize and sigma0) on
the other folds' items, the reader it keeps scored on the fold's items. Prints per variant the
mean held-out accuracy, tokens and fitness (accuracy - cost_weight x tokens / 1000) beside
`agree` (the start) on the same folds. No model call: the matrix's recorded replies only.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from trinity_cli.coordinator.reader import WEIGHT_GROUPS
from trinity_cli.evolve import reader_fit
from trinity_cli.evolve.reader_recipe import ReaderRecipeOptions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("matrix")
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--generations", type=int, default=40)
    parser.add_argument("--variants", nargs="+", default=["all", "conf,margin", "margin", "priority,margin"])
    parser.add_argument("--cost-weight", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--calls", type=int, default=0, help="the readers' call budget (0: one call a member)")
    args = parser.parse_args()
    data = reader_fit.read_matrix(args.matrix)
    models = list(next(iter(data.matrix.values())))
    order = np.random.default_rng(args.seed).permutation(len(data.items))
    folds = np.array_split(order, args.folds)
    recipe = ReaderRecipeOptions()
    print(f"{len(data.items)} items of {args.matrix}, {args.folds} folds, {args.generations} generations, "
          f"popsize {recipe.popsize}, sigma0 {recipe.sigma0}, cost weight {args.cost_weight}, "
          f"calls {args.calls or len(models)}")
    print("| variant | weights moved | held-out accuracy | tokens | fitness | agree accuracy | agree tokens |")
    print("|---|---|---|---|---|---|---|")
    for variant in args.variants:
        groups = WEIGHT_GROUPS if variant == "all" else tuple(variant.split(","))
        scores, starts, moved = [], [], 0
        for k, held in enumerate(folds):
            rest = np.concatenate([f for j, f in enumerate(folds) if j != k])
            train = reader_fit.Items(data.matrix, [data.items[i] for i in rest])
            test = reader_fit.Items(data.matrix, [data.items[i] for i in held])
            found = reader_fit.search(train, test, "cv", models, args.generations, recipe.popsize, recipe.sigma0,
                                      args.seed, args.cost_weight, groups, calls=args.calls)
            moved = int(found.start.mask(groups).sum())
            scores.append(reader_fit.score(found.reader, test))
            starts.append(reader_fit.score(found.start, test))
        acc = statistics.mean(s.accuracy for s in scores)
        tokens = statistics.mean(s.tokens for s in scores)
        print(f"| {variant} | {moved} | {acc:.3f} | {tokens:.0f} | {acc - args.cost_weight * tokens / 1000:.3f} | "
              f"{statistics.mean(s.accuracy for s in starts):.3f} | {statistics.mean(s.tokens for s in starts):.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
