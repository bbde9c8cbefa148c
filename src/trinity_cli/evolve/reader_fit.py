"""A reader's search (coordinator/reader.py) on sample matrices (bench/matrix.py), at no model
call: every episode a reader plays is a row of the matrix read in the order it asks, so a
candidate is scored on every training item in milliseconds, through the reader's own
`decide`, `stop` and `final` (what `trinity ask` and bench play live).

The search: separable CMA-ES (evolve/strategy.py) over the reader's weights from its start
(`Reader.agree_start`: `agree`), fitness = mean reward - cost_weight * mean tokens / 1000
over all training items every generation; the reader kept is the distribution's mean of the
generation whose mean scores best on the training items (ties to the earlier, so the start
unless a generation beats it). The validation matrix, when there is one, is scored along (the
curves) but chooses nothing, so the verdict on it (evolve/reader_recipe.py) is not biased by
the choice. Reproducible from `seed`. GENERATIONS, POPSIZE, SIGMA0 and DEFAULT_WEIGHTS are the
settings both recipes search with (evolve/reader_recipe.py, and the reader phase of
evolve/recipe.py).

Result (`ReaderSearch`): the reader, its curves ({"generation", "best_fitness",
"mean_fitness", "spread", "train", "val", "val_tokens"} per generation, generation 0 the
start; "val" and "val_tokens" null without a validation matrix), the generation kept and the
start's scores.

Matrix files are read back with `read_matrix` (the file's "mix" and "seed" name its items:
they are drawn again as bench draws them, for each item's task and scorer).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli import tasks
from trinity_cli.answer_kinds import answer_kind
from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.bench.procedures import Matrix, Outcome, Reply, outcome
from trinity_cli.coordinator.reader import FAMILIES, WEIGHT_GROUPS, Reader, ReaderSource, family
from trinity_cli.errors import ConfigError
from trinity_cli.events import ProgressFn, ReaderGeneration, quiet
from trinity_cli.messages import Role, Turn
from trinity_cli.turns import settle

# The search's settings: popsize, sigma0 and generations, and the weight groups it moves by
# default: each member's confidence weight and the stop margins, every other weight at its
# `agree` value. The groups were chosen on training items alone: 4-fold cross-validation on the
# 96 items of recordings/local/matrix-train-32x2.json (`scripts/analysis/reader_cv.py`;
# docs/heads.md#readers) held out 0.486 fitness against 0.457 for all 48 weights, 0.479 for
# the margins alone and 0.474 for `agree`.
GENERATIONS, POPSIZE, SIGMA0 = 40, 16, 0.5
DEFAULT_WEIGHTS = ("conf", "margin")


@dataclass(frozen=True)
class Items:
    """A matrix and the items it was sampled on (item.key -> its row)."""

    matrix: Matrix
    items: list[tasks.TaskItem]

    @cached_property
    def kinds(self) -> dict[str, AnswerKind]:
        """Each item's answer kind (item.key -> kind), resolved once from its `scorer`."""
        return {i.key: answer_kind(i.scorer) for i in self.items}


def read_matrix(path: str | Path) -> Items:
    """A matrix file's replies as turns (asked alone, as a Worker, attempt order), with its items."""
    where = Path(path)
    try:
        doc = json.loads(where.read_text(encoding="utf-8"))
        mix, rows, seed = doc["mix"], doc["matrix"], int(doc.get("seed", 0))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"cannot read matrix file {where}: {e}", "write it with `trinity matrix --out FILE`") from e
    items = [i for i in tasks.sample_items(mix, seed=seed) if i.key in rows]
    matrix: Matrix = {}
    for item in items:
        kind = answer_kind(item.scorer)
        matrix[item.key] = {m: [_reply(r, m, n, kind) for n, r in enumerate(replies)]
                            for m, replies in rows[item.key].items()}
    return Items(matrix, items)


def read_pool_matrix(path: str | Path, pool: str, models: Sequence[str], label: str = "training") -> Items:
    """`read_matrix`, refused in one line unless it holds items of the pool's `models`, in order."""
    data = read_matrix(path)
    if not data.items or list(next(iter(data.matrix.values()))) != list(models):
        raise ConfigError(f"the {label} matrix {path} holds no items of pool {pool!r}'s members {list(models)}",
                          "make it with `trinity matrix --pool` this pool")
    return data


def _reply(entry: dict[str, Any], member: str, attempt: int, kind: AnswerKind) -> Reply:
    completion = int(entry.get("completion_tokens") or 0)
    turn = Turn(index=attempt, model=member, role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[], role_probs=[],
                messages=[], reply=entry["reply"], prompt_tokens=int(entry["tokens"]) - completion,
                completion_tokens=completion, latency_s=float(entry.get("seconds") or 0.0), coordinator_s=0.0,
                alone=True, attempt=attempt, examples=entry.get("examples"), finish_reason=entry.get("finish_reason"),
                logprob_stats=entry.get("logprob_stats"))
    turn.vote = settle.is_vote([], turn, kind)
    return Reply(turn, bool(entry["correct"]))


def play(reader: Reader, row: dict[str, list[Reply]], kind: AnswerKind) -> Outcome:
    """The episode `reader` plays on one item, read off its matrix row (module docstring);
    `short` when the row lacked an attempt it asked for (it stopped there)."""
    return _play(reader, row, kind)[0]


def wanted(reader: Reader, row: dict[str, list[Reply]], kind: AnswerKind) -> str | None:
    """The member whose attempt `reader` asks for on this row and the row lacks (None: it
    plays to its end on what the row holds): what bench/matrix.complete asks for."""
    return _play(reader, row, kind)[1]


def _play(reader: Reader, row: dict[str, list[Reply]], kind: AnswerKind) -> tuple[Outcome, str | None]:
    source = ReaderSource(reader)
    turns: list[Turn] = []
    seq: list[Reply] = []
    answer: str | None = None  # the reply a stop settled on; else the reader's final answer
    missing = None
    for n in range(source.max_calls):
        model = source.next_member(turns, kind).model
        asked = sum(t.model == model for t in turns)
        if asked >= len(row[model]):
            missing = model  # the matrix lacks this attempt: the play stops early
            break
        reply = row[model][asked]
        seq.append(reply)
        turns.append(replace(reply.turn, index=n))
        found = source.stop(turns, kind)
        if found is not None:
            answer = turns[found].reply
            break
    if answer is None:
        answer = source.final(turns, kind)
    return replace(outcome(seq, answer), short=missing is not None), missing


@dataclass(frozen=True)
class Score:
    accuracy: float
    tokens: float
    rewards: list[float]

    def fitness(self, cost_weight: float) -> float:
        return self.accuracy - cost_weight * self.tokens / 1000


def score(reader: Reader, data: Items) -> Score:
    """Accuracy, mean tokens and per-item rewards (item order) of `reader` on `data`."""
    outs = [play(reader, data.matrix[i.key], data.kinds[i.key]) for i in data.items]
    rewards = [float(o.correct) for o in outs]
    return Score(float(np.mean(rewards)), float(np.mean([o.tokens for o in outs])), rewards)


def centres(data: Items, models: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    """Per family and member, the median mean and low-window log-probability of its replies."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for fam in FAMILIES:
        for m in models:
            stats = [s for i in data.items if family(data.kinds[i.key]) == fam for r in data.matrix[i.key][m]
                     if (s := r.turn.logprob_stats) and not s.get("unmatched") and s.get("mean") is not None]
            if stats:
                out.setdefault(fam, {})[m] = {"mean": statistics.median(s["mean"] for s in stats),
                                              "low": statistics.median(s["low"] for s in stats)}
    return out


@dataclass
class ReaderSearch:
    reader: Reader
    start: Reader
    curves: list[dict[str, Any]] = field(default_factory=list)
    kept_generation: int = 0

    def kept(self, name: str, **manifest: Any) -> Reader:
        """The reader kept, named `name`, its manifest saying how it was made ("evolved" when a
        generation beat the start, else "agree") and holding `manifest`'s fields besides."""
        self.reader.manifest = {**self.reader.manifest, "name": name,
                                "made": "evolved" if self.kept_generation else "agree",
                                "trained": bool(self.kept_generation), **manifest}
        return self.reader


def search(train: Items, val: Items | None, pool: str, models: Sequence[str], generations: int = GENERATIONS,
           popsize: int = POPSIZE, sigma0: float = SIGMA0, seed: int = 0, cost_weight: float = 0.05,
           free: Collection[str] = WEIGHT_GROUPS, progress: ProgressFn = quiet, calls: int = 0) -> ReaderSearch:
    """CMA-ES from `agree` on `train`, the best generation on `train` kept; `val` (None: no
    validation matrix) scored along, for the curves (module docstring). `free`: the weight
    groups the search moves (coordinator/reader.WEIGHT_GROUPS); the others keep their start
    values. `calls`: the readers' call budget (0: one call a member)."""
    from trinity_cli.evolve.strategy import new_state

    if generations < 1 or popsize < 2:
        raise ConfigError("a reader's search needs at least 1 generation and a population of 2")
    base = Reader.agree_start(pool, models, centres(train, models), calls)
    mask = base.mask(free)
    if not mask.any():
        raise ConfigError("the reader's search moves no weight", "name at least one weight group")
    fixed = base.flat()

    def reader_at(moved: np.ndarray) -> Reader:
        """The reader whose free weights are `moved`, the others the start's."""
        full = fixed.copy()
        full[mask] = moved
        return base.with_flat(full)

    start = base
    state = new_state(fixed[mask], sigma0, seed, popsize, 0, None)
    es = state["es"]
    first_train, first_val = score(start, train), score(start, val) if val is not None else None
    best = (first_train.fitness(cost_weight), 0, start)
    result = ReaderSearch(start, start)
    result.curves.append(_curve(0, [first_train.fitness(cost_weight)], first_train, first_val, 0.0))
    for generation in range(1, generations + 1):
        candidates = es.ask()
        scores = [score(reader_at(c), train).fitness(cost_weight) for c in candidates]
        es.tell(candidates, [-s for s in scores])
        mean = reader_at(es.mean)
        on_train, on_val = score(mean, train), score(mean, val) if val is not None else None
        curve = _curve(generation, scores, on_train, on_val, float(es.sigma))
        result.curves.append(curve)
        if on_train.fitness(cost_weight) > best[0]:
            best = (on_train.fitness(cost_weight), generation, mean)
        progress(ReaderGeneration(generation=generation, generations=generations, train=on_train.accuracy,
                                  val=on_val.accuracy if on_val else None, val_tokens=on_val.tokens if on_val else None,
                                  kept=best[1]))
    result.reader, result.kept_generation = best[2], best[1]
    return result


def _curve(generation: int, scores: Sequence[float], on_train: Score, on_val: Score | None,
           sigma: float) -> dict[str, Any]:
    return {"generation": generation, "best_fitness": max(scores), "mean_fitness": float(np.mean(scores)),
            "spread": float(np.std(scores)), "sigma": sigma, "train": on_train.accuracy,
            "train_tokens": on_train.tokens, "val": on_val.accuracy if on_val else None,
            "val_tokens": on_val.tokens if on_val else None}
