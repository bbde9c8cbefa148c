"""The one-command evolve: `trinity evolve --pool P --budget N` from a pool file to a
validated head, in phases, ending in a verdict that never ships a head below the simpler
thing it would replace.

Phases (each shown in progress as `RecipePhase` and recorded in the verdict file):
  1. matrix      every member's greedy reply and `k`-1 fresh attempts from the question alone
                 on the search's training items (bench/matrix.py; recorded calls replay);
                 written to `<home>/matrices/<pool>-<hash of mix, k, seed>.json`. A task the
                 mix names without a count gives TRAIN_PER_TASK items (`training_mix`), never
                 its whole split.
  2. reader      a reader (coordinator/reader.py) searched on the same matrix's replies from
                 `agree` (evolve/reader_fit.py: its GENERATIONS, POPSIZE, SIGMA0 and
                 DEFAULT_WEIGHTS, the recipe's cost weight): no model call. It reads what the
                 replies show (confidence, agreement, code outcome) where a head reads the
                 backbone's state; written as `<name>-reader`.
  3. start       the rotating start fitted to the matrix (evolve/label_fit.py, rotation_fit.py:
                 its first pick, then the other members until one agrees, as `agree` does),
                 written as the head `<name>-start` (manifest "made": "fitted").
  4. search      sep-CMA-ES from that start (evolve/evolution.py) with `SEARCH` settings (the
                 recipe's column of evolve/settings.py) unless overridden: greedy decisions
                 (as `ask` plays a head, so a candidate's fitness on fixed items has no sampling
                 noise), every training item in every generation, the whole hidden state as
                 input, and a step size large enough to change decisions (inputs are centred
                 to unit RMS norm, so sigma0 moves a logit by about sigma0, against a fitted
                 start's margins of about 3: a step of 1 leaves candidates deciding alike).
                 Skipped when the budget is below one generation: the start is the search's
                 result.
  5. validate    `trinity bench` on the validation items (at least `MIN_VAL` by default):
                 each member alone, `agree`, the reader, the start and the search's head,
                 paired. The reader's calls are the members' calls alone: they add none.
  6. verdict     the winner is the row with the highest validation fitness (accuracy -
                 cost_weight x tokens / 1000, what the searches maximise); a tie goes to the
                 simpler one, in the order single member, `agree`, reader, start, search. A
                 winning head or reader is written to `out` (default `<home>/heads/<name>`);
                 when `agree` or a member wins, nothing is written but the verdict, which says
                 what plays it: the pool line `router: agree`, or that member asked alone.

Verdict file (`verdict.json` beside the head, or in `<home>/heads/<name>.verdict.json`
when no head is written): {"format": "trinity-recipe/1", "winner": row name, "head": path or
null, "router": str or null, "cost_weight", "phases": {name: {...counts, run ids, paths}},
"table": [{"row", "kind", "accuracy", "correct", "n", "tokens", "fitness", "vs_agree": [b, c,
p] | null, "vs_best_single": [b, c, p] | null, "best_single"}]}; the written head's (or
reader's) manifest holds the same under "recipe", and so does the search run's run.json
(`trinity inspect RUN` shows the table).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from trinity_cli import paths, tasks
from trinity_cli.bench.matrix import matrix_of
from trinity_cli.bench.options import BenchOptions
from trinity_cli.bench.runner import bench
from trinity_cli.bench.stats import paired_test
from trinity_cli.coordinator import reader as reader_mod
from trinity_cli.coordinator.head import Head
from trinity_cli.errors import ConfigError, option
from trinity_cli.evaluators.ray_cluster import RayOptions, check_ray
from trinity_cli.events import ProgressFn, RecipePhase, quiet
from trinity_cli.evolve import settings
from trinity_cli.evolve.cost import Estimate, estimate
from trinity_cli.evolve.evolution import evolve
from trinity_cli.evolve.options import EvolveOptions
from trinity_cli.evolve.reader_fit import DEFAULT_WEIGHTS, GENERATIONS, POPSIZE, SIGMA0, read_pool_matrix
from trinity_cli.evolve.reader_fit import search as search_reader
from trinity_cli.keyed_cache import content_key
from trinity_cli.pool.spending import limit_spending
from trinity_cli.pool_config import PoolConfig, load_pool
from trinity_cli.runs.store import RunStore

FORMAT = "trinity-recipe/1"
TRAIN_PER_TASK, MIN_VAL, DEFAULT_TASKS = settings.TRAIN_PER_TASK, settings.MIN_VAL, settings.DEFAULT_TASKS
_OWN = ("pool", "budget", "seed", "name", "out")  # the recipe's own options, not the search's settings
# The search's settings (module docstring, phase 4): the recipe's defaults of evolve/settings.py
# that are EvolveOptions (tasks, val_size, popsize, sigma0, ...); options the user gives override them.
SEARCH: dict[str, Any] = {name: value for name, value in settings.defaults(settings.RECIPE).items()
                          if name in {f.name for f in fields(EvolveOptions)} and name not in _OWN}
SIMPLICITY = ("single", "agree", "reader", "start", "search")  # ties go to the earlier


@dataclass
class RecipeOptions:
    """`evolve` run as the recipe. `search`: the EvolveOptions fields the user set, which
    override `SEARCH` and the recipe's own choices (tasks, validation, init_labels)."""

    pool: str | None = None
    budget: int = 2000
    max_calls: int | None = None  # caps on what the run spends on model calls (pool/pool.py)
    max_usd: float | None = None
    k: int = settings.MATRIX_K
    seed: int = 0
    name: str | None = None
    out: str | None = None
    search: dict[str, Any] = field(default_factory=dict)

    def evolve_options(self) -> EvolveOptions:
        """The search's options: the recipe's settings, then the user's."""
        base = EvolveOptions(pool=self.pool, budget=self.budget, seed=self.seed)
        opts = replace(base, **{**SEARCH, **self.search})
        opts.tasks = training_mix(opts.tasks)
        if "minibatch" not in self.search:
            opts.minibatch = max(1, len(tasks.sample_items(tasks.parse_mix(opts.tasks), seed=opts.seed)))
        return opts


def training_mix(text: str) -> str:
    """The recipe's training mix: each task named without a count takes TRAIN_PER_TASK items
    (all of a smaller split), never its whole split (evolve/settings.py)."""
    entries = [e if e.n is not None else e._replace(n=min(TRAIN_PER_TASK, len(tasks.load_split(e.task, e.split))))
               for e in tasks.parse_mix(text)]
    return tasks.format_mix(entries)


@dataclass
class RecipeResult:
    winner: str
    head_dir: Path | None
    router: str | None
    verdict_path: Path
    table: list[dict[str, Any]]
    plan: Estimate
    phases: dict[str, Any] = field(default_factory=dict)


def _matrix(options: RecipeOptions, opts: EvolveOptions, config: PoolConfig, progress: ProgressFn) -> Path:
    """Phase 1: the training matrix file of the search's training items (bench/matrix.py),
    made or replayed."""
    key = content_key("", {"mix": opts.tasks, "k": options.k, "seed": opts.seed})[:12]
    out = paths.home() / "matrices" / f"{config.name}-{key}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    n = len(tasks.sample_items(tasks.parse_mix(opts.tasks), seed=opts.seed))
    progress(RecipePhase("matrix", f"{n} training items of {opts.tasks}, {options.k} replies a member"))
    matrix_of(opts.tasks, config, options.k, seed=opts.seed, out=out, progress=progress)
    return out


def _heads_dir(options: RecipeOptions, name: str) -> Path:
    return Path(options.out).expanduser() if options.out else paths.user_heads_dir() / name


def _validate(opts: EvolveOptions) -> None:
    """The search's options checked as evolve checks them, the matrix standing in for
    `init_labels` until phase 1 makes it."""
    replace(opts, init_labels=opts.init_labels or "matrix").validate()


def plan(options: RecipeOptions) -> Estimate:
    """What a run of `options` will cost (evolve/cost.py); nothing is played or written."""
    opts = options.evolve_options()
    _validate(opts)
    return estimate(opts, load_pool(options.pool), k=None if opts.init_labels else options.k)


def run(options: RecipeOptions, progress: ProgressFn | None = None, parallel: int | None = None,
        ray: RayOptions | None = None) -> RecipeResult:
    """Every phase of the module docstring, episodes played `parallel` at once or on Ray
    actors with `ray` (the search's and the validation's; the matrix plays in this process),
    under the options' caps on model calls and dollars (SpendingCapReached when one is
    reached; Ray actors' calls are not counted); returns the verdict."""
    check_ray(ray, parallel)
    with limit_spending(options.max_calls, options.max_usd):
        return _run(options, progress, parallel, ray)


def _run(options: RecipeOptions, progress: ProgressFn | None, parallel: int | None,
         ray: RayOptions | None) -> RecipeResult:
    emit = progress or quiet
    opts = options.evolve_options()
    _validate(opts)
    config = load_pool(options.pool)
    name = options.name or f"{config.name}-recipe"
    cost = estimate(opts, config, k=None if opts.init_labels else options.k)
    emit(RecipePhase("plan", cost.summary()))
    phases: dict[str, Any] = {}
    if not opts.init_labels:
        opts.init_labels = str(_matrix(options, opts, config, emit))
    phases["matrix"] = {"file": opts.init_labels}
    work = paths.home() / "recipe" / name
    reader_dir = work / "reader"
    phases["reader"] = _reader(opts, config, name, reader_dir, emit)
    per_generation = (opts.popsize or 8) * opts.minibatch
    if opts.budget < per_generation:  # no generation fits: the validated start is the search's result
        phases["search"] = {"skipped": f"budget {opts.budget} is below one generation ({per_generation} episodes)"}
        opts = replace(opts, budget=0)
        emit(RecipePhase("start", "the rotating start, fitted to the matrix and validated (no search: "
                                  + phases["search"]["skipped"] + ")"))
    else:
        emit(RecipePhase("search", f"the rotating start, then {opts.budget // per_generation} generations of "
                                   f"{opts.popsize} candidates on {opts.minibatch} items"))
    result = evolve(replace(opts, name=f"{name}-search", out=str(work / "search")), progress=progress,
                    parallel=parallel, ray=ray)
    if result.start_head is None:
        raise ConfigError("the search kept no fitted start to validate against",
                          f"give {option('init_labels')} FILE, or let the recipe make the matrix")
    start_dir = work / "start"
    result.start_head.manifest = {**result.start_head.manifest, "name": f"{name}-start"}
    result.start_head.save(start_dir)
    phases["start"] = {"run": result.run_id, "head": str(start_dir)}
    searched = opts.budget > 0
    if searched:
        phases["search"] = {"run": result.run_id, "head": str(result.head_dir), "val": result.best_val,
                            "generations": result.generations, "spent": result.spent}
    emit(RecipePhase("validate", f"{opts.val_mix()}: each member alone, agree, the reader and the heads, paired"))
    heads = [str(reader_dir), str(start_dir)] + ([str(result.head_dir)] if searched else [])
    validation = BenchOptions(pool=options.pool, tasks=opts.val_mix(), heads=heads, systems=["single", "agree", "head"],
                              random_seeds=0, decisions="greedy", max_turns=opts.max_turns, backbone=opts.backbone,
                              device=opts.device)
    checked = bench(validation, progress=progress, parallel=parallel, ray=ray)
    phases["validate"] = {"run": checked.run_id}
    rows = _table(checked.data, config.names, name, opts.cost_weight)
    return _verdict(options, name, rows, cost, phases, {"reader": reader_dir, "start": start_dir,
                                                          "search": result.head_dir if searched else None},
                    opts.cost_weight)


def _reader(opts: EvolveOptions, config: PoolConfig, name: str, out: Path, emit: ProgressFn) -> dict[str, Any]:
    """Phase 2: a reader searched on the training matrix's replies, written to `out`."""
    assert opts.init_labels is not None
    train = read_pool_matrix(opts.init_labels, config.name, config.names)
    emit(RecipePhase("reader", f"{GENERATIONS} generations of {POPSIZE} readers on the matrix's "
                               f"{len(train.items)} items (no model call)"))
    found = search_reader(train, None, config.name, config.names, GENERATIONS, POPSIZE, SIGMA0, opts.seed,
                          opts.cost_weight, DEFAULT_WEIGHTS, emit)
    reader_mod.save(found.kept(f"{name}-reader", curves=found.curves), out)
    return {"head": str(out), "kept_generation": found.kept_generation, "weights": list(DEFAULT_WEIGHTS)}


def _table(data: dict[str, Any], members: list[str], name: str, cost_weight: float) -> list[dict[str, Any]]:
    """The verdict's rows from bench.json's results and paired tests (module docstring)."""
    results, per_item = data["results"], data["per_item"]
    singles = [f"single:{m}" for m in members if f"single:{m}" in results]
    best = max(singles, key=lambda s: (results[s]["overall"]["accuracy"] or 0.0, -singles.index(s)))
    rows = []
    for row, kind in [*((s, "single") for s in singles), ("agree", "agree"), (f"head:{name}-reader", "reader"),
                      (f"head:{name}-start", "start"), (f"head:{name}-search", "search")]:
        if row not in results:
            continue
        overall = results[row]["overall"]

        def vs(other: str, row: str = row) -> list[Any] | None:
            if other == row or other not in per_item:
                return None
            test = paired_test(per_item[row], per_item[other], other)
            return [test["b"], test["c"], test["p_value"]]

        rows.append({"row": row, "kind": kind, "accuracy": overall["accuracy"], "correct": overall["correct"],
                     "n": overall["n"], "tokens": overall["mean_tokens"],
                     "fitness": (overall["accuracy"] or 0.0) - cost_weight * (overall["mean_tokens"] or 0.0) / 1000,
                     "vs_agree": vs("agree"), "vs_best_single": vs(best), "best_single": row == best})
    return rows


def _verdict(options: RecipeOptions, name: str, rows: list[dict[str, Any]], plan: Estimate,
             phases: dict[str, Any], head_dirs: dict[str, Path | None], cost_weight: float) -> RecipeResult:
    """Phase 6: pick the winner (ties to the simpler), write it, record the verdict."""
    candidates = [r for r in rows if r["kind"] != "single" or r["best_single"]]
    winner = max(candidates, key=lambda r: (round(r["fitness"], 9), -SIMPLICITY.index(r["kind"])))
    head_dir: Path | None = None
    router: str | None = None
    record = {"format": FORMAT, "winner": winner["row"], "cost_weight": cost_weight, "phases": phases,
              "table": rows, "plan": plan.to_dict()}
    if winner["kind"] in ("reader", "start", "search"):
        source = head_dirs[winner["kind"]]
        assert source is not None
        head_dir = _heads_dir(options, name)
        tmp = head_dir.with_name(head_dir.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        if winner["kind"] == "reader":
            reader = reader_mod.load(source)
            reader.manifest = {**reader.manifest, "name": name, "recipe": record}
            reader_mod.save(reader, tmp)
        else:
            shutil.copytree(source, tmp)
            head = Head.load(tmp)
            head.manifest = {**head.manifest, "name": name, "recipe": record}
            head.save(tmp)
        if head_dir.exists():
            shutil.rmtree(head_dir)
        tmp.rename(head_dir)
        verdict_path = head_dir / "verdict.json"
    else:
        router = "agree" if winner["kind"] == "agree" else None  # a member alone: no pool line plays it
        verdict_path = paths.user_heads_dir() / f"{name}.verdict.json"
    record.update(head=str(head_dir) if head_dir else None, router=router)
    paths.atomic_write_bytes(verdict_path, (json.dumps(record, indent=1) + "\n").encode())
    store = RunStore()  # the search run's record shows the verdict (`trinity inspect RUN`)
    run_dir = store.path(phases["start"]["run"])
    store.save(run_dir, {**store.load(run_dir.name), "recipe": record})
    return RecipeResult(winner["row"], head_dir, router, verdict_path, rows, plan, phases)


def recipe_options(evolve_options: EvolveOptions, given: Collection[str], k: int = settings.MATRIX_K,
                   max_calls: int | None = None, max_usd: float | None = None) -> RecipeOptions:
    """The recipe's options from `trinity evolve`'s: the options in `given` (set by the user)
    override the recipe's choices; pool, budget, seed, name and out are the recipe's own."""
    values = asdict(evolve_options)
    search = {key: values[key] for key in given if key in values and key not in _OWN}
    return RecipeOptions(pool=evolve_options.pool, budget=evolve_options.budget, max_calls=max_calls,
                         max_usd=max_usd, k=k, seed=evolve_options.seed,
                         name=evolve_options.name, out=evolve_options.out, search=search)
