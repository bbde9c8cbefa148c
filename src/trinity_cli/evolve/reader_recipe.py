"""`trinity evolve --reader`: from a pool file to a validated reader (coordinator/reader.py)
in one command, ending in a verdict that never ships a reader below the fixed procedure it
would replace.

Phases (each shown in progress as `RecipePhase`, recorded in the verdict):
  1. matrix      every member's greedy reply from the question alone on the training items
                 (default: TRAIN_PER_TASK a task of DEFAULT_TASKS) and on the validation items
                 (default: VAL_PER_TASK a task), bench/matrix.py; k = 1, or on the training
                 items as many replies a member as `calls` asks round-robin; recorded calls
                 replay. Written to `<home>/matrices/<pool>-<hash of mix, k and seed>.json`, or
                 read from the files given (`train_matrix`, `val_matrix`; a training matrix
                 that holds too few replies a member for `calls` is refused).
  2. search      the reader's CMA-ES on the training matrix from `agree` (at `calls` calls:
                 default one a member, `Reader.agree_start`), the generation best
                 on the training items kept (evolve/reader_fit.py): no model call; the
                 validation matrix chooses nothing before the verdict. `weights`: the weight
                 groups it moves (DEFAULT_WEIGHTS: the confidence weights and stop margins).
  3. verdict     first the validation rows are completed (bench/matrix.complete): the fresh
                 attempts `agree` and the kept reader ask for that the matrix lacks are made
                 (recorded calls replay; the file is left as it is), so each plays as it would
                 live; then every row below scored on the same replies, each paired with
                 `agree` (exact McNemar: bench/stats.py):
                     single:M     member M's reply
                     route        per family of task, the member whose reply is right most
                                  often on the training matrix (a fixed router: the
                                  question's family decides, nothing the reply shows)
                     agree        `ask --mode agree`: the members in pool order, round-robin,
                                  until two answers agree (code: one passes its examples), at
                                  most AGREE_TURNS calls (the fourth: a fresh attempt of the
                                  first member)
                     cvote-all    every member asked, confidence-weighted plurality (CISC)
                     mux-all      every member asked, the most self-consistent member (SLM-MUX)
                     reader       the search's reader
                 The winner is the row with the highest validation fitness (accuracy -
                 cost_weight x tokens / 1000: what the search maximises); ties go to the
                 simpler, in SIMPLICITY order. A winning reader, or route (as the reader that
                 plays it: `Reader.route`, one call), is written to `out` (default
                 `<home>/heads/<name>`); otherwise the verdict says which row won and nothing is
                 written but the verdict.

Verdict file (`verdict.json` beside the reader, else `<home>/heads/<name>.verdict.json`):
{"format": "trinity-reader-recipe/1", "winner", "head", "phases", "curves", "kept_generation",
"cost_weight", "table": [{"row", "kind", "accuracy", "correct", "n", "tokens", "fitness",
"vs_agree": [b, c, p] | null, "capped": items where the row stopped for want of an attempt
(0 once the rows are completed)}], "completed": the attempts the verdict added to the validation
rows}; the reader's manifest holds it under "recipe".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trinity_cli import paths, tasks
from trinity_cli.bench.matrix import complete, matrix_of
from trinity_cli.bench.procedures import Outcome, agree_wants
from trinity_cli.bench.procedures import play as play_procedure
from trinity_cli.bench.stats import paired_test
from trinity_cli.coordinator import reader as reader_mod
from trinity_cli.coordinator.reader import FAMILIES, WEIGHT_GROUPS, family
from trinity_cli.episode.schedules import AGREE_TURNS
from trinity_cli.errors import ConfigError, option
from trinity_cli.events import ProgressFn, RecipePhase, quiet
from trinity_cli.evolve.cost import Estimate, of_calls, recorded_alone
from trinity_cli.evolve.reader_fit import (
    DEFAULT_WEIGHTS,
    GENERATIONS,
    POPSIZE,
    SIGMA0,
    Items,
    play,
    read_pool_matrix,
    search,
    wanted,
)
from trinity_cli.evolve.recipe import DEFAULT_TASKS, RecipeResult
from trinity_cli.keyed_cache import content_key
from trinity_cli.pool.spending import limit_spending
from trinity_cli.pool_config import PoolConfig, load_pool
from trinity_cli.tasks import TaskItem

FORMAT = "trinity-reader-recipe/1"
TRAIN_PER_TASK = 32
VAL_PER_TASK = 98
SIMPLICITY = ("single", "route", "agree", "cvote", "mux", "reader")  # ties go to the earlier
FIXED = {"cvote": "cvote-all", "mux": "mux-all"}


@dataclass
class ReaderRecipeOptions:
    pool: str | None = None
    tasks: str = DEFAULT_TASKS
    train_per_task: int = TRAIN_PER_TASK
    val_per_task: int = VAL_PER_TASK
    train_matrix: str | None = None
    val_matrix: str | None = None
    generations: int = GENERATIONS
    popsize: int = POPSIZE
    sigma0: float = SIGMA0
    cost_weight: float = 0.05
    seed: int = 0
    name: str | None = None
    out: str | None = None
    max_calls: int | None = None
    max_usd: float | None = None
    weights: tuple[str, ...] = DEFAULT_WEIGHTS  # the weight groups the search moves
    calls: int = 0  # the reader's call budget (0: one call a member)

    def train_k(self, members: int) -> int:
        """Replies a member the training matrix needs for `calls` round-robin calls."""
        return max(1, math.ceil((self.calls or members) / members))

    def mix(self, split: str, n: int) -> str:
        return ",".join(f"{t.strip()}:{split}:{n}" for t in self.tasks.split(",") if t.strip())

    def validate(self) -> None:
        if self.generations < 1 or self.popsize < 2:
            raise ConfigError(f"{option('generations')} must be at least 1 and {option('popsize')} at least 2")
        if self.train_per_task < 1 or self.val_per_task < 1:
            raise ConfigError("the reader's recipe needs at least one training and one validation item a task")
        if self.cost_weight < 0:
            raise ConfigError(f"{option('cost_weight')} must be 0 or more")
        if self.calls < 0:
            raise ConfigError(f"{option('reader_calls')} must be 1 or more (0: one call a member)")
        unknown = sorted(set(self.weights) - set(WEIGHT_GROUPS))
        if unknown or not self.weights:
            raise ConfigError(f"{option('reader_weights')}: " + (f"no weight group {unknown[0]!r}" if unknown
                                                                 else "name at least one weight group"),
                              f"name some of {','.join(WEIGHT_GROUPS)}")


def plan(options: ReaderRecipeOptions, config: PoolConfig | None = None) -> Estimate:
    """What a run will cost: the two matrices' calls (the search makes none; the verdict's
    fresh attempts counted as if every validation item asked for them); `config`: the
    pool file already loaded, else it is read."""
    options.validate()
    config = config or load_pool(options.pool)
    calls, recorded = {}, {}
    m = len(config.models)
    further = max(0, AGREE_TURNS - m, options.calls - m)  # fresh attempts the verdict may ask for, at most
    for phase, given, split, n in (("train matrix", options.train_matrix, "train", options.train_per_task),
                                   ("val matrix", options.val_matrix, "val", options.val_per_task)):
        if not given:
            items = tasks.sample_items(options.mix(split, n), seed=options.seed)
            k = options.train_k(m) if split == "train" else 1
            calls[phase] = len(items) * (m * k if split == "train" else m + further)
            recorded[phase] = recorded_alone(config, items, k)
    return of_calls(config, calls, recorded)


def _matrix(options: ReaderRecipeOptions, config: PoolConfig, split: str, n: int, given: str | None,
            progress: ProgressFn) -> Path:
    if given:
        return Path(given).expanduser()
    mix = options.mix(split, n)
    k = options.train_k(len(config.models)) if split == "train" else 1
    key = content_key("", {"mix": mix, "k": k, "seed": options.seed})[:12]
    out = paths.home() / "matrices" / f"{config.name}-{key}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    progress(RecipePhase("matrix", f"{split}: every member's greedy reply" + (f" and {k - 1} fresh" if k > 1 else "")
                                   + f" on {mix}"))
    matrix_of(mix, config, k, budget=AGREE_TURNS, seed=options.seed, out=out, progress=progress)
    return out


def run(options: ReaderRecipeOptions, progress: ProgressFn | None = None) -> RecipeResult:
    """Every phase of the module docstring under the options' caps on calls and dollars."""
    options.validate()
    emit = progress or quiet
    config = load_pool(options.pool)
    name = options.name or f"{config.name}-reader"
    cost = plan(options, config)
    emit(RecipePhase("plan", cost.summary() if cost.phases else "both matrices given: no model call"))
    with limit_spending(options.max_calls, options.max_usd):
        train_file = _matrix(options, config, "train", options.train_per_task, options.train_matrix, emit)
        val_file = _matrix(options, config, "val", options.val_per_task, options.val_matrix, emit)
    train = read_pool_matrix(train_file, config.name, config.names, "training")
    val = read_pool_matrix(val_file, config.name, config.names, "validation")
    need, held = options.train_k(len(config.names)), min(len(r) for row in train.matrix.values() for r in row.values())
    if held < need:
        raise ConfigError(f"{option('reader_calls')} {options.calls} asks each member up to {need} times, and the "
                          f"training matrix {train_file} holds {held} a member",
                          f"make it with `trinity matrix --split train --k {need}`, or ask fewer calls")
    emit(RecipePhase("search", f"{options.generations} generations of {options.popsize} readers on "
                               f"{len(train.items)} training items, validated on {len(val.items)} (no model call)"))
    found = search(train, val, config.name, config.names, options.generations, options.popsize, options.sigma0,
                   options.seed, options.cost_weight, options.weights, emit, calls=options.calls)
    emit(RecipePhase("verdict", f"{len(val.items)} validation items: the attempts agree and the reader ask for, "
                                "then each member, route, agree, cvote-all, mux-all and the reader, paired with agree"))
    names = config.names
    with limit_spending(options.max_calls, options.max_usd):
        completed = complete(val.items, val.matrix, config, lambda row, kind: (
            wanted(found.reader, row, kind) or agree_wants(row, names, kind, AGREE_TURNS)), progress=emit)
    rows = table(found.reader, train, val, config.names, options.cost_weight)
    winner = max(rows, key=lambda r: (round(r["fitness"], 9), -SIMPLICITY.index(r["kind"])))
    phases = {"matrix": {"train": str(train_file), "val": str(val_file)},
              "search": {"generations": options.generations, "popsize": options.popsize, "sigma0": options.sigma0,
                         "seed": options.seed, "weights": list(options.weights), "calls": found.reader.calls,
                         "kept_generation": found.kept_generation}}
    record = {"format": FORMAT, "winner": winner["row"], "phases": phases, "curves": found.curves,
              "kept_generation": found.kept_generation, "cost_weight": options.cost_weight, "table": rows,
              "completed": completed}
    head_dir: Path | None = None
    if winner["kind"] in ("reader", "route"):
        head_dir = Path(options.out).expanduser() if options.out else paths.user_heads_dir() / name
        record["head"] = str(head_dir)
        if winner["kind"] == "reader":
            written = found.kept(name, recipe=record)
        else:
            written = reader_mod.Reader.route(config.name, config.names, winner["route"])
            written.manifest.update(name=name, recipe=record)
        reader_mod.save(written, head_dir)
        verdict_path = head_dir / "verdict.json"
    else:
        record["head"] = None
        verdict_path = paths.user_heads_dir() / f"{name}.verdict.json"
        verdict_path.parent.mkdir(parents=True, exist_ok=True)
    paths.atomic_write_bytes(verdict_path, (json.dumps(record, indent=1) + "\n").encode())
    router = "agree" if winner["kind"] == "agree" else None
    return RecipeResult(winner["row"], head_dir, router, verdict_path, rows, cost, phases)


def route_members(train: Items, models: list[str]) -> dict[str, str]:
    """Per family, the member right most often on the training matrix (ties: pool order)."""
    picks = {}
    for fam in FAMILIES:
        items = [i for i in train.items if family(train.kinds[i.key]) == fam]
        picks[fam] = max(models, key=lambda m: (sum(train.matrix[i.key][m][0].correct for i in items),
                                                -models.index(m)))
    return picks


def table(reader: reader_mod.Reader, train: Items, val: Items, models: list[str],
          cost_weight: float) -> list[dict[str, Any]]:
    """The verdict's rows on the validation matrix (module docstring)."""
    routes = route_members(train, models)

    def procedure(name: Callable[[TaskItem], str]) -> Callable[[TaskItem], Outcome]:
        """The fixed procedure `name(item)` names, played on an item's validation row."""
        return lambda i: play_procedure(name(i), val.matrix[i.key], val.kinds[i.key], AGREE_TURNS)

    def fixed(name: str) -> Callable[[TaskItem], Outcome]:
        return procedure(lambda i: name)

    plays: list[tuple[str, str, Callable[[TaskItem], Outcome]]] = [
        *((f"single:{m}", "single", fixed(f"single:{m}")) for m in models),
        ("route", "route", procedure(lambda i: f"single:{routes[family(val.kinds[i.key])]}")),
        ("agree", "agree", fixed("agree:" + ">".join(models))),
        *((name, kind, fixed(name)) for kind, name in FIXED.items()),
        ("reader", "reader", lambda i: play(reader, val.matrix[i.key], val.kinds[i.key])),
    ]
    per_row: dict[str, tuple[str, list[bool], list[int], int]] = {}
    for row, kind, play_item in plays:
        outs = [play_item(i) for i in val.items]
        per_row[row] = (kind, [o.correct for o in outs], [o.tokens for o in outs], sum(o.short for o in outs))
    agree_right = {i.key: float(c) for i, c in zip(val.items, per_row["agree"][1], strict=True)}
    rows = []
    for row, (kind, right, tokens, short) in per_row.items():
        n = len(right)
        accuracy = sum(right) / n
        mean_tokens = sum(tokens) / n
        test = None if row == "agree" else paired_test(
            {i.key: float(c) for i, c in zip(val.items, right, strict=True)}, agree_right, "agree")
        rows.append({"row": row, "kind": kind, "accuracy": accuracy, "correct": sum(right), "n": n,
                     "tokens": mean_tokens, "fitness": accuracy - cost_weight * mean_tokens / 1000,
                     "vs_agree": None if test is None else [test["b"], test["c"], test["p_value"]],
                     "route": routes if kind == "route" else None, "capped": short})
    return rows
