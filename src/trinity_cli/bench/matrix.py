"""`trinity matrix`: the sample matrix of a pool on some items, and its file.

The sample matrix: for each item and each member (default: every member of the pool, in
pool order), its greedy reply and k-1 fresh attempts, each asked from the task alone. These
are exactly the calls of bench's `sc:<member>@k` row (episode.run_episode with
episode/schedules.sc: the same prompts, derived seeds, program runs and example runs), so
every call lands in the rollout cache, a rerun replays it, and so does a later
`trinity bench --systems single,sc,agree --sc all@K` on the same items, or an evolve run
whose episodes ask the same questions alone. Each reply is scored on the item's hidden
tests. bench/procedures.py computes every fixed procedure from it at no further call.

Matrix file (`--out`; what `trinity evolve --init-labels` and `--reader` read:
evolve/label_fit.py, evolve/reader_fit.py):
    {"mix": "gsm8k:train:32,...", "seed": the seed its items were drawn with (absent: 0),
     ... every key of the procedures result (bench/procedures.py, `analyse`) ...,
     "signals": how well each reply feature tells right from wrong (bench/signals.py),
     "drafts": on free-form items (a kind judged, not voted), every way of choosing among the
               drafts (bench/drafts.py),
     "matrix": {item key: {member: [{"reply": str, "correct": bool, "examples": str | null,
                                     "tokens": int, "seconds": float,
                                     "completion_tokens": int, "finish_reason": str | null,
                                     "logprob_stats": dict | null}, ...]}}}
A member's list holds its replies in attempt order (greedy first): k of them, and with
`complete_agree` (`--complete-agree`) the further fresh attempts the pool-order `agree`
(`agree:M1>M2..` at `budget` calls, what `trinity ask --mode agree` plays at budget
AGREE_TURNS) asks for on the items where k replies a member do not settle it, so lists may
differ in length (k: the shortest; procedures and signals read the first k, `agree` all it
needs). `finish_reason` and
`logprob_stats` (backends/confidence.py) are null for replies recorded before they were kept
(TRINITY_FILL_LOGPROBS=1 makes those calls again to fill them: pool/pool.py). JSON, written
atomically.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trinity_cli import paths, tasks
from trinity_cli.answer_kinds import answer_kind, check_scoring, item_checks, played_as, score_item
from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.bench import drafts
from trinity_cli.bench.procedures import Matrix, Reply, agree_wants, analyse
from trinity_cli.bench.signals import signal_table
from trinity_cli.episode.loop import run_episode
from trinity_cli.episode.schedules import sc
from trinity_cli.errors import ConfigError, did_you_mean, option
from trinity_cli.events import MatrixItemPlayed, ProgressFn, quiet
from trinity_cli.pool.pool import open_pool
from trinity_cli.pool_config import PoolConfig, load_pool


@dataclass(frozen=True)
class MatrixOptions:
    """What `trinity matrix` samples: `n` items of each of `tasks` (comma-separated names)
    from `split`, drawn with `seed` as bench draws them, from the one ranked `first` on
    (tasks/mix.py); `k` replies per member and item;
    `members` (default: all) in the order the agree procedures try them; the agree
    procedures stop at `budget` calls; `complete_agree`: also the calls the pool-order `agree`
    needs beyond k replies (module docstring); `kind_from` "detect": IFEval's and IFBench's items
    played as the answer kind `trinity ask` reads from their prompts (answer_kinds.played_as)."""

    pool: str | None = None
    tasks: str = "gsm8k,arc-challenge,mbpp"
    split: str = "test"
    n: int = 20
    first: int = 1
    k: int = 4
    members: tuple[str, ...] = ()
    budget: int = 5
    seed: int = 0
    complete_agree: bool = False
    kind_from: str = "preset"

    @property
    def mix(self) -> str:
        count = str(self.n) if self.first == 1 else f"{self.first}-{self.first + self.n - 1}"
        return ",".join(f"{t.strip()}:{self.split}:{count}" for t in self.tasks.split(",") if t.strip())


def select_members(config: PoolConfig, members: Sequence[str]) -> PoolConfig:
    """The pool with only `members`, in that order (none given: the pool as it is)."""
    if not members:
        return config
    by_name = {m.name: m for m in config.models}
    for name in members:
        if name not in by_name:
            raise ConfigError(f"{option('members')}: pool {config.name!r} has no member {name!r}",
                              did_you_mean(name, list(by_name)))
    return config.model_copy(update={"models": [by_name[m] for m in members]})


Wants = Callable[[dict[str, list[Reply]], AnswerKind], "str | None"]  # (row, the item's answer kind) -> member


def complete(items: Sequence[tasks.TaskItem], matrix: Matrix, config: PoolConfig, wants: Wants | None, k: int = 1,
             progress: ProgressFn = quiet) -> int:
    """Fill `matrix` in place: every member's k replies from the task alone on every item, then
    while `wants(row, kind)` names a member, that member's next fresh attempt (the attempts a
    procedure or a reader asks for that the row lacks); cached calls replay. Returns how many
    attempts `wants` added."""
    pool = open_pool(config)
    added = 0

    def attempts(item: tasks.TaskItem, kind: AnswerKind, model: str, count: int) -> list[Reply]:
        transcript = run_episode(item.prompt, pool, sc(pool.names, model), max_turns=count,
                                 kind=kind, examples=item_checks(item.scorer, item.prompt, item.reference))
        return [Reply(replace(t, messages=[]), score_item(item, t.reply) == 1.0) for t in transcript.turns]

    try:
        for n, item in enumerate(items, 1):
            row = matrix.setdefault(item.key, {})
            kind = answer_kind(item.scorer)  # resolved once for the item's episodes
            for model in pool.names:
                if len(row.get(model, [])) < k:
                    row[model] = attempts(item, kind, model, k)
            while wants is not None and (wanted := wants(row, kind)) is not None:
                # the first attempts replay from the cache: only the new one is a call
                row[wanted] = attempts(item, kind, wanted, len(row[wanted]) + 1)
                added += 1
            progress(MatrixItemPlayed(index=n, total=len(items), key=item.key, calls=pool.stats.calls,
                                      cache_hits=pool.stats.cache_hits))
    finally:
        pool.close()
    return added


def matrix_json(matrix: Matrix) -> dict[str, Any]:
    """The file's "matrix" field (module docstring)."""
    return {key: {m: [{"reply": r.turn.reply, "correct": r.correct, "examples": r.turn.examples,
                       "tokens": r.turn.prompt_tokens + r.turn.completion_tokens, "seconds": r.turn.latency_s,
                       "completion_tokens": r.turn.completion_tokens, "finish_reason": r.turn.finish_reason,
                       "logprob_stats": r.turn.logprob_stats}
                      for r in rs] for m, rs in row.items()} for key, row in matrix.items()}


def sample_matrix(options: MatrixOptions, out: Path | None = None, progress: ProgressFn = quiet) -> dict[str, Any]:
    """Collect the matrix of `options` and analyse it (bench/procedures.py, `analyse`): the
    result, with "mix"; written with the matrix to `out` when given (module docstring)."""
    if options.k < 1 or options.n < 1 or options.budget < 1:
        raise ConfigError(f"{option('n')}, {option('k')} and {option('budget')} must be at least 1")
    config = select_members(load_pool(options.pool), options.members)
    return matrix_of(options.mix, config, options.k, options.budget, options.seed, out, progress,
                     complete_agree=options.complete_agree, kind_from=options.kind_from)


def matrix_of(mix: str, config: PoolConfig, k: int, budget: int = 5, seed: int = 0, out: Path | None = None,
              progress: ProgressFn = quiet, complete_agree: bool = False, kind_from: str = "preset") -> dict[str, Any]:
    """The matrix of the items of `mix` (drawn with `seed`, as bench and evolve draw them, and
    played as `kind_from` says: answer_kinds.played_as), analysed, and written to `out` when given
    (module docstring)."""
    entries = tasks.parse_mix(mix)
    items = played_as(tasks.sample_items(entries, seed=seed), kind_from)
    check_scoring(items)
    names = config.names
    wants = (lambda row, kind: agree_wants(row, names, kind, budget)) if complete_agree else None
    matrix: Matrix = {}
    complete(items, matrix, config, wants, k, progress)
    order = [e.task for e in entries]
    result = {"mix": mix, "seed": seed, **analyse(matrix, items, budget, order),
              "signals": signal_table(matrix, items, order)}
    if items and all(answer_kind(item.scorer).judged for item in items):
        result["drafts"] = drafts.analyse(matrix, items, names, k)
    if out is not None:
        paths.atomic_write_bytes(out, json.dumps({**result, "matrix": matrix_json(matrix)}, indent=1).encode())
    return result
