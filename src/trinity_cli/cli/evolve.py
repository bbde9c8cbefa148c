"""`trinity evolve`: from a pool file to a validated head (evolve/recipe.py), the search alone
(evolve/evolution.py), or a reader (evolve/reader_recipe.py). Registered on `trinity` by
cli/__init__.py where it stands among the commands."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from trinity_cli.cli import (
    DeviceOpt,
    ParallelOpt,
    PoolOpt,
    QuietOpt,
    RayOpt,
    RayWorkersOpt,
    app,
)


@app.command()
def evolve(
    ctx: typer.Context,
    pool: PoolOpt = None,
    tasks: Annotated[str, typer.Option(help="Training mix, e.g. gsm8k:train,arc-challenge:train:200.")] = (
        "gsm8k:train,arc-challenge:train,mbpp:train"
    ),
    budget: Annotated[int, typer.Option(min=0, help="Training episodes to spend (at least one generation; 0 with "
                                                 "--init-labels: the validated start is the head).")] = 2000,
    minibatch: Annotated[int, typer.Option(min=1, help="Tasks per generation, shared by all candidates.")] = 8,
    popsize: Annotated[int | None, typer.Option(help="Population size (default 4 + 3 ln n).")] = None,
    sigma0: Annotated[float, typer.Option(help="Initial CMA-ES step size.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of pycma, task sampling and episodes.")] = 0,
    max_turns: Annotated[int, typer.Option(min=1, help="Turn budget per episode.")] = 3,
    val_tasks: Annotated[str | None, typer.Option(help="Validation mix (default: the val split of each task).")] = None,
    val_size: Annotated[int, typer.Option(min=1, help="Validation items in all (default mix).")] = 16,
    val_every: Annotated[int, typer.Option(min=1, help="Validate the mean every K generations.")] = 2,
    cost_weight: Annotated[float, typer.Option(help="Fitness penalty per unit of cost.")] = 0.0,
    cost_unit: Annotated[str, typer.Option(help="tokens (per 1K tokens) or usd.")] = "tokens",
    svf: Annotated[bool, typer.Option(help="Also evolve singular-value offsets of backbone matrices.")] = False,
    svf_target: Annotated[list[str] | None, typer.Option(help="SVF matrix (repeatable).")] = None,
    center_items: Annotated[int, typer.Option(
        min=0, help="Centre the head's input on the turn-0 features of this many training tasks (0: do not).")] = 256,
    input_dims: Annotated[int, typer.Option(
        min=0, help="Project the head's input on the top K principal directions of those features "
                    "(0: read every hidden dimension).")] = 0,
    init_labels: Annotated[str | None, typer.Option(
        help="Start the search from a head fitted to a sample matrix of the training items "
             "(trinity matrix --split train --out FILE) instead of zero.")] = None,
    init_rotate: Annotated[bool, typer.Option(
        help="With --init-labels: the start asks the member the matrix favours, then the others in pool "
             "order until a Verifier agrees, as agree does (fitted to those episodes' states; wants "
             "--input-dims 0).")] = False,
    decisions: Annotated[str, typer.Option(
        help="How candidates take decisions in training and validation episodes: sampled, or greedy (the most "
             "likely model and role, as ask plays a trained head).")] = "sampled",
    backbone: Annotated[str, typer.Option(help="Coordinator backbone.")] = "smollm2-135m",
    device: DeviceOpt = "auto",
    name: Annotated[str | None, typer.Option(help="Head name (default evolved-RUN).")] = None,
    out: Annotated[str | None, typer.Option(help="Write the head to this directory.")] = None,
    resume: Annotated[
        str | None, typer.Option(help="Continue this evolve run with its own options (--budget may change).")
    ] = None,
    parallel: ParallelOpt = None,
    ray: RayOpt = None,
    ray_workers: RayWorkersOpt = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the run as JSON on stdout instead of the head's directory.")] = False,
    quiet: QuietOpt = False,
    search_only: Annotated[bool, typer.Option(
        help="Run the search alone with these options, as before the recipe (no matrix, no verdict).")] = False,
    dry_run: Annotated[bool, typer.Option(
        help="Say what the recipe will cost (calls, tokens, hours, USD), then stop.")] = False,
    reader: Annotated[bool, typer.Option(
        help="Make a reader instead of a head: it reads what the replies show (confidence, agreement, shown "
             "examples) and decides whom to ask, when to stop and which answer is final; searched on the "
             "members' recorded replies, with no model call past the two matrices.")] = False,
    train_matrix: Annotated[str | None, typer.Option(
        help="--reader: the training matrix file (`trinity matrix --split train --k 1 --out FILE`).")] = None,
    val_matrix: Annotated[str | None, typer.Option(
        help="--reader: the validation matrix file (`trinity matrix --split val --k 1 --out FILE`).")] = None,
    generations: Annotated[int, typer.Option(min=1, help="--reader: generations of the search.")] = 40,
    reader_weights: Annotated[str | None, typer.Option(
        help="--reader: the weight groups the search moves, comma-separated, of priority, member, conf, low, "
             "capped_w, examples_w, margin (default: conf,margin; `all` for every one).")] = None,
    reader_calls: Annotated[int, typer.Option(
        min=0, help="--reader: the most calls an episode may make (default 0: one a member; more asks fresh "
                    "attempts round-robin, as agree does, and the training matrix must hold them: --k 2).")] = 0,
    max_calls: Annotated[int | None, typer.Option(
        min=1, help="Stop the recipe after this many model calls (cached calls are free); rerun to go on.")] = None,
    max_usd: Annotated[float | None, typer.Option(
        min=0, help="Stop the recipe once priced members' calls cost this many dollars; rerun to go on.")] = None,
) -> None:
    """From a pool file to a validated head: the training matrix, a fitted start, the search, validation against
    agree and each member, a verdict (options given override the recipe's settings); killed runs resume."""
    from trinity_cli.evaluators.ray_cluster import RayOptions
    from trinity_cli.evolve.evolution import evolve as run_evolve
    from trinity_cli.evolve.options import EvolveOptions
    from trinity_cli.render import console, results
    from trinity_cli.render import progress as render_progress

    cluster = RayOptions.from_cli(ray, ray_workers)
    options = EvolveOptions(pool=pool, tasks=tasks, budget=budget, minibatch=minibatch, popsize=popsize,
                            sigma0=sigma0, seed=seed, max_turns=max_turns, val_tasks=val_tasks, val_size=val_size,
                            val_every=val_every, cost_weight=cost_weight, cost_unit=cost_unit, svf=svf,
                            svf_targets=svf_target, center_items=center_items, input_dims=input_dims,
                            init_labels=init_labels, init_rotate=init_rotate, decisions=decisions,
                            backbone=backbone, device=device,
                            name=name, out=out)
    # On resume, only flags typed on the command line are compared with the run's options.
    # (By name: Typer may bring its own copy of click's ParameterSource.)
    sources = {p: ctx.get_parameter_source(p) for p in ctx.params}
    from trinity_cli.cli import PARAMETER_ALIASES

    library_name = {parameter: library for library, parameter in PARAMETER_ALIASES.items()}
    given = [library_name.get(p, p) for p, source in sources.items()
             if source is not None and source.name != "DEFAULT"
             and p not in ("as_json", "quiet", "search_only", "dry_run", "max_calls", "max_usd")]
    reader_only = [p for p in ("train_matrix", "val_matrix", "generations", "reader_weights", "reader_calls")
                   if p in given]
    if reader_only and not reader:
        from trinity_cli.errors import ConfigError, option

        raise ConfigError(f"{option(reader_only[0])} is an option of {option('reader')}",
                          f"add {option('reader')}, or leave {option(reader_only[0])} out")
    if reader:
        from trinity_cli.evolve import reader_recipe

        plan_r = reader_recipe.ReaderRecipeOptions(
            pool=pool, train_matrix=train_matrix, val_matrix=val_matrix, generations=generations, seed=seed,
            name=name, out=out, max_calls=max_calls, max_usd=max_usd, calls=reader_calls)
        # The search's own defaults unless typed (evolve's defaults are the head search's).
        if "popsize" in given and popsize is not None:
            plan_r.popsize = popsize
        if "sigma0" in given:
            plan_r.sigma0 = sigma0
        if "cost_weight" in given:
            plan_r.cost_weight = cost_weight
        if reader_weights is not None:
            named = tuple(w.strip() for w in reader_weights.split(",") if w.strip())
            plan_r.weights = reader_recipe.WEIGHT_GROUPS if named == ("all",) else named
        if dry_run:
            results.recipe_plan(reader_recipe.plan(plan_r).to_dict())
            return
        with render_progress.RecipeProgress(quiet=quiet) as progress:
            done = reader_recipe.run(plan_r, progress=progress)
        results.recipe_done(done, quiet=quiet)
        return
    if not (resume or search_only):
        from trinity_cli.evolve import recipe

        plan = recipe.recipe_options(options, given, max_calls=max_calls, max_usd=max_usd)
        if dry_run:
            results.recipe_plan(recipe.plan(plan).to_dict())
            return
        with render_progress.RecipeProgress(quiet=quiet) as progress:
            done = recipe.run(plan, progress=progress, parallel=parallel, ray=cluster)
        results.recipe_done(done, quiet=quiet)
        return
    with render_progress.EvolveProgress(quiet=quiet) as progress:
        result = run_evolve(options, resume=resume, progress=progress, given=given, parallel=parallel, ray=cluster)
    if as_json:
        from trinity_cli.runs.store import RunStore

        console.out.print_json(json.dumps(RunStore().load(result.run_id)))
    results.evolve_done(result, as_json=as_json, quiet=quiet)
