"""The bench runner: plan the systems, play every episode through the evaluator, write
the run directory through runs/run_files.BenchRun."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trinity_cli import tasks
from trinity_cli.answer_kinds import answer_kind, check_scoring, played_as
from trinity_cli.bench import moa
from trinity_cli.bench.options import BENCH_FORMAT, BenchOptions
from trinity_cli.bench.stats import summarize
from trinity_cli.bench.systems import EpisodeResult, System, episode_seed, plan_systems, spec, workflow_summary
from trinity_cli.errors import ConfigError, MemberFailed, option
from trinity_cli.evaluators.choose import open_evaluator
from trinity_cli.evaluators.local import EpisodeOutcome, EpisodeSpec, Evaluator, Runtime
from trinity_cli.evaluators.ray_actors import RayEvaluator
from trinity_cli.evaluators.ray_cluster import RayOptions, check_ray
from trinity_cli.events import (
    BenchEpisodeFinished,
    BenchStarted,
    EpisodeEvent,
    EpisodeStarted,
    MemberFailing,
    ProgressFn,
    SystemStarted,
    quiet,
)
from trinity_cli.keyed_cache import journal_to
from trinity_cli.messages import Transcript, Turn
from trinity_cli.pool.pool import Pool, PoolStats, open_pool
from trinity_cli.pool_config import PoolConfig, load_pool
from trinity_cli.runs.charts import plot_accuracy, plot_cost, plot_selection
from trinity_cli.runs.reports import bench_document, report_markdown, selection_heads
from trinity_cli.runs.run_files import BenchRun
from trinity_cli.runs.store import JOURNAL, RunStore
from trinity_cli.turns import prompts

FILES = BenchRun.FILES


def _result(system: System, item: tasks.TaskItem, seed: int, outcome: EpisodeOutcome) -> EpisodeResult:
    """One episode reduced to what the report needs."""
    transcript = outcome.transcript
    if transcript is None:
        return EpisodeResult(system.name, item.task, item.id, seed, 0.0, None, [], "error", 0, 0.0, None,
                             False, error=outcome.error)
    return EpisodeResult(
        system=system.name,
        task=item.task,
        item=item.id,
        seed=seed,
        reward=outcome.reward,
        answer=transcript.answer,
        turns=[(t.model, t.role.value) for t in transcript.turns],
        stop_reason=transcript.stop_reason,
        tokens=transcript.prompt_tokens + transcript.completion_tokens,
        wall_s=transcript.pool_seconds,
        cost_usd=transcript.cost_usd,
        cached=bool(transcript.turns) and all(t.cached for t in transcript.turns),
        error=outcome.error,
        workflow=workflow_summary(transcript.workflow),
        failed=bool(transcript.turns) and all(t.error is not None for t in transcript.turns),
    )


@dataclass
class BenchResult:
    run_id: str
    run_dir: Path
    data: dict[str, Any] = field(default_factory=dict)


Planned = tuple[System, tasks.TaskItem, int]  # a system, an item, the episode seed


def _play(
    pool: Pool, plan: Sequence[Planned], specs: Sequence[EpisodeSpec], emit: ProgressFn, evaluator: Evaluator,
    failing: set[str],
) -> list[EpisodeOutcome]:
    """The outcomes of `specs` (one per entry of `plan`), played by `evaluator`, with the
    bench's progress events: `MemberFailing` for a member's first failed call (`failing`: the
    members already announced, which it adds to)."""
    announced: list[str] = []

    def progress(event: EpisodeEvent) -> None:
        system, item, _ = plan[event.index]
        if isinstance(event, EpisodeStarted):
            if system.name not in announced:
                announced.append(system.name)
                emit(SystemStarted(name=system.name, episodes=sum(p[0] is system for p in plan),
                                   in_flight=event.in_flight))
            return
        out = event.outcome
        turns = out.transcript.turns if out.transcript is not None else []
        for turn in turns:
            if turn.error is not None and turn.model not in failing:
                failing.add(turn.model)
                emit(MemberFailing(member=turn.model, kind=pool.config.model(turn.model).kind, error=turn.error,
                                   system=system.name))
        emit(BenchEpisodeFinished(system=system.name, task=item.task, item=item.id, reward=out.reward,
                                  cached=bool(turns) and all(t.cached for t in turns),
                                  cache_hits=pool.stats.cache_hits, pool_calls=pool.stats.calls,
                                  in_flight=event.in_flight, recorded=pool.stats.recorded))

    return evaluator.evaluate(specs, progress)


def _play_moa(
    pool: Pool, system: System, items: Sequence[tasks.TaskItem], options: BenchOptions,
    singles: dict[tuple[str, str], EpisodeOutcome], emit: ProgressFn, evaluator: Evaluator, failing: set[str],
) -> list[tuple[Planned, EpisodeOutcome]]:
    """The episodes of a row that aggregates the single runs (bench/moa.py), once they are
    `singles` ((model, item key) -> outcome) and the row has its aggregator (`system.model`)
    and policy: the aggregator's turns are played by `evaluator`, each joined to the member
    turns it read."""
    models = pool.names
    aggregator, policy = system.model, system.policy
    assert aggregator is not None and policy is not None
    members: dict[str, list[Transcript | None]] = {}
    plan: list[Planned] = []
    specs: list[EpisodeSpec] = []
    for item in items:
        members[item.key] = [singles[(m, item.key)].transcript for m in models]
        text = moa.aggregation_task(item, moa.member_answers(members[item.key]),
                                    moa.context_fits(pool, aggregator, answer_kind(item.scorer)))
        if text is not None:
            seed = episode_seed(options.seed, system.stream, item.key)
            plan.append((system, item, seed))
            specs.append(EpisodeSpec(item=dataclasses.replace(item, prompt=text), seed=seed, policy=policy,
                                     max_turns=1, overflow_scores_zero=True))
    played = dict(zip([p[1].key for p in plan], _play(pool, plan, specs, emit, evaluator, failing), strict=True))
    out = []
    for item in items:
        outcome = played.get(item.key)
        if outcome is None:  # nothing to aggregate: scored wrong, as an episode that could not run
            emit(BenchEpisodeFinished(system=system.name, task=item.task, item=item.id, reward=0.0, cached=False,
                                      cache_hits=pool.stats.cache_hits, pool_calls=pool.stats.calls, in_flight=0,
                                      recorded=pool.stats.recorded))
            outcome = EpisodeOutcome(None, 0.0, "no member answered")
        elif outcome.error is not None:
            outcome = EpisodeOutcome(None, 0.0, f"aggregator: {outcome.error}")
        combined = moa.combine(item, members[item.key], outcome.transcript)
        out.append(((system, item, episode_seed(options.seed, system.stream, item.key)),
                    EpisodeOutcome(combined, outcome.reward, outcome.error)))
    return out


def _run_systems(
    pool: Pool, systems: Sequence[System], items: Sequence[tasks.TaskItem], options: BenchOptions,
    run_dir: Path, emit: ProgressFn, evaluator: Evaluator,
) -> tuple[list[EpisodeResult], list[Turn]]:
    """Every episode of every system, played by `evaluator` (those of rows that wait for the
    single runs once they are done); results and episodes.jsonl in system, seed, item order
    whatever order they finished in, and the turns the bench played (a turn that aggregated
    the single runs holds theirs again: only its own are counted)."""
    failing: set[str] = set()
    plan = [(system, item, episode_seed(options.seed, system.seed_stream(r), item.key))
            for system in systems if system.policy is not None for r in range(system.seeds) for item in items]
    # Greedy decisions are for head rows (System.greedy): random routing stays random.
    specs = [spec(system, item, seed) for system, item, seed in plan]
    played = list(zip(plan, _play(pool, plan, specs, emit, evaluator, failing), strict=True))
    # Rows played once the single runs are done, by their best member (sc:best@K, moa).
    singles = {(p[0].model or "", p[1].key): o for p, o in played if p[0].owner.single_runs}
    single_runs: dict[str, list[EpisodeResult]] = {}
    for p, o in played:
        if p[0].owner.single_runs:
            single_runs.setdefault(p[0].model or "", []).append(_result(*p, o))
    for system in systems:
        if not system.by_best_single:
            continue
        system.model = moa.pick_aggregator(single_runs, pool.names)  # the best single member
        system.policy = system.owner.played_by(system, system.model, pool.names)
        if system.owner.aggregates_singles:
            played += _play_moa(pool, system, items, options, singles, emit, evaluator, failing)
            continue
        later = [(system, item, episode_seed(options.seed, system.stream, item.key)) for item in items]
        later_specs = [spec(system, item, seed) for _, item, seed in later]
        played += list(zip(later, _play(pool, later, later_specs, emit, evaluator, failing), strict=True))
    order = {s.name: i for i, s in enumerate(systems)}
    played.sort(key=lambda entry: order[entry[0][0].name])  # stable: seed and item order kept
    episodes = [_result(system, item, seed, outcome) for (system, item, seed), outcome in played]
    BenchRun(run_dir).write_episodes(
        {"system": system.name, "task": item.task, "item": item.id, "seed": seed, "reward": result.reward,
         "transcript": outcome.transcript.to_dict() if outcome.transcript else None}
        for ((system, item, seed), outcome), result in zip(played, episodes, strict=True))
    # An aggregating episode holds the single runs' turns again: only its aggregator's are its own.
    turns = [t for (system, _, _), o in played if o.transcript is not None for t in o.transcript.turns
             if not system.owner.aggregates_singles or t.override == moa.OVERRIDE]
    return episodes, turns


def _failures(turns: Iterable[Turn]) -> dict[str, list[str]]:
    """Member -> the errors of its failed calls (failed turns: episode/turn.py), in order."""
    failed: dict[str, list[str]] = {}
    for turn in turns:
        if turn.error is not None:
            failed.setdefault(turn.model, []).append(turn.error)
    return failed


def failure_notes(turns: Iterable[Turn], pool: Pool) -> list[str]:
    """One note per member whose calls failed (failed turns: episode/turn.py): its kind, how
    many calls failed and the first error; the episodes went on without it."""
    return [f"member {name!r} (kind {pool.config.model(name).kind}): {len(errors)} calls failed, the first with "
            f"{errors[0]}; each is a failed turn of its episode, which went on without it (a row with no call "
            "that answered is marked failed)"
            for name, errors in _failures(turns).items()]


def refuse_unanswered(turns: Sequence[Turn], pool: Pool) -> None:
    """`MemberFailed` when the bench made calls and every one failed: no member answered, so
    its tables would be failures throughout; one line naming each member, its kind and its
    first error."""
    failed = _failures(turns)
    if not failed or any(t.error is None for t in turns):
        return
    kind = {name: pool.config.model(name).kind for name in failed}
    (member, errors), *others = failed.items()
    reason = errors[0] + "".join(f"; member {m!r} (kind {kind[m]}) failed: {e[0]}" for m, e in others)
    which = "them" if others else "it"
    raise MemberFailed(member, kind[member], reason,
                       f"no member answered in this bench: fix {which}, or take {which} out of the pool file")


def bench(
    options: BenchOptions, progress: ProgressFn | None = None, store: RunStore | None = None,
    parallel: int | None = None, ray: RayOptions | None = None,
) -> BenchResult:
    """Run every system on the items of `options.tasks` and write the run directory (see
    the module docstring); returns bench.json's content. `parallel` episodes run at once
    (None: the pool file's `parallel`), or with `ray` one per Ray actor (evaluators/ray_actors.py);
    bench.json is the same either way but for its timings and `stats.parallel`. Progress
    events (events.py): `BenchStarted`, then `SystemStarted` as a system's first episode
    starts, `BenchEpisodeFinished` per finished episode (the pool counts being its calls so
    far) and `MemberFailing` when a member's call failed for the first time; with parallel > 1
    (or on Ray) episodes finish out of order. A member that fails is a failed turn of each
    episode it was asked in, and a row with no call that answered is marked failed; a bench
    in which no member answered at all raises `MemberFailed` and leaves no run.
    Ctrl-C removes the run directory; the rollout cache keeps every finished call, so
    running the same command again resumes where it stopped (not with `use_cache` False)."""
    check_ray(ray, parallel)
    entries = options.validate()
    emit = progress or quiet
    config = load_pool(options.pool)
    items = played_as(tasks.sample_items(entries, seed=options.seed), options.kind_from)
    if not items:
        raise ConfigError(f"{option('tasks')} {options.tasks!r} selects no items")
    tasks.check_code_sandbox(items, strict_sandbox=config.sandbox == "strict")
    check_scoring(items)
    store = store or RunStore()
    parallel = parallel or (1 if ray else config.parallel)
    if parallel < 1:
        raise ConfigError(f"{option('parallel')} must be at least 1, got {parallel}")
    pool = open_pool(config, options.use_cache)
    runtime = Runtime(pool, device=options.device)
    evaluator: Evaluator | None = None
    started = time.perf_counter()
    try:
        pool.check_assets()
        evaluator, parallel = open_evaluator(runtime, parallel, ray)
        on_ray = isinstance(evaluator, RayEvaluator)  # a local Ray instance may play here instead
        systems, notes = _plan(options, pool, entries)
        played = [s for s in systems if s.policy is not None or s.by_best_single]
        with store.new_run() as run_dir, store.lock(run_dir), journal_to(run_dir / JOURNAL):
            emit(BenchStarted(run=run_dir.name, items=len(items), systems=tuple(s.name for s in systems),
                              episodes=sum(s.seeds for s in played) * len(items), parallel=parallel, ray=on_ray))
            episodes, turns = _run_systems(pool, systems, items, options, run_dir, emit, evaluator)
            refuse_unanswered(turns, pool)
            notes += failure_notes(turns, pool)
            errors = sum(e.error is not None for e in episodes)
            if errors:
                notes.append(f"{errors} episodes could not run (the item, or moa's request, does not fit the "
                             "model's context; or no member answered for moa to aggregate) and count as wrong")
            summary = _summary(options, config, run_dir.name, items, systems, episodes, entries, notes, pool.stats,
                               time.perf_counter() - started, parallel)
            files = write_outputs(run_dir, summary, episodes)
            title = f"bench {config.name} on {options.tasks} ({len(items)} items)"
            store.save(run_dir, {"kind": "bench", "title": title, "summary": summary, "files": files})
            return BenchResult(run_dir.name, run_dir, {**summary, "episodes": [e.to_dict() for e in episodes]})
    finally:
        _close(evaluator, runtime, pool)


def _plan(options: BenchOptions, pool: Pool, entries: Sequence[tasks.MixEntry]) -> tuple[list[System], list[str]]:
    """The systems of the run and the report's notes so far."""
    systems, notes = plan_systems(options, pool)
    if any(e.split == "val" for e in entries):
        notes.append("val items were used to pick the best head during `trinity evolve`: "
                     "test items are the held-out ones")
    return systems, notes


def _summary(options: BenchOptions, config: PoolConfig, run: str, items: Sequence[tasks.TaskItem],
             systems: Sequence[System], episodes: Sequence[EpisodeResult], entries: Sequence[tasks.MixEntry],
             notes: list[str], stats: PoolStats, wall_s: float, parallel: int) -> dict[str, Any]:
    """bench.json's summary (docs/files.md#bench-runs), without its episodes; `systems`: every
    row played, of which the `reported` ones are reported."""
    return {
        "format": BENCH_FORMAT,
        "run": run,
        "options": {**asdict(options), "heads": list(options.heads or [])},
        "pool": {"name": config.name, "models": config.names, "source": config.source},
        "prompt_version": prompts.PROMPT_VERSION,
        "items": [{"task": i.task, "id": i.id} for i in items],
        "systems": [s.describe() for s in systems if s.reported],
        **summarize(systems, episodes, items, config.names, [e.task for e in entries]),
        "stats": {
            "pool_calls": stats.calls,
            "cache_hits": stats.cache_hits,
            "recorded": stats.recorded,
            "backend_calls": stats.calls - stats.cache_hits,
            "backend_s": stats.seconds,
            "wall_s": wall_s,
            "parallel": parallel,
        },
        "notes": notes,
    }


def _close(evaluator: Evaluator | None, runtime: Runtime, pool: Pool) -> None:
    """Whatever happened: a cluster's actors, the coordinators, the models."""
    if evaluator is not None:
        evaluator.close()
    runtime.close()
    pool.close()


def write_outputs(run_dir: Path, summary: dict[str, Any], episodes: Sequence[EpisodeResult]) -> list[str]:
    """bench.json, report.md, chart.png, cost.png and (with heads) selection.png of a finished
    bench (episodes.jsonl is written while it runs); returns the names of the run's files."""
    charts: dict[str, Callable[[Path], None]] = {
        "chart.png": lambda path: plot_accuracy(summary, path),
        "cost.png": lambda path: plot_cost(summary, path),
    }
    if selection_heads(summary):
        charts["selection.png"] = lambda path: plot_selection(summary, path)
    return BenchRun(run_dir).write_outputs(bench_document(summary, [e.to_dict() for e in episodes]),
                                           report_markdown(summary), charts)
