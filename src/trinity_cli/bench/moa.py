"""The `moa` row: Mixture-of-Agents with one layer (Wang et al., 2024, "Mixture-of-Agents
Enhances Large Language Model Capabilities"): every member answers, then one aggregator
writes the final answer from their answers.

Member answers are the members' single runs on the item: the `single:<m>` episodes of the
same bench, reused as they are, not asked again. So their messages, parameters, replies,
tokens and seconds are exactly the single rows' (sampled API calls that the cache may not
keep included), and a program member's answer is its single turn's, whose program ran in
the sandbox (the reply carries the program's output and `Answer:` line).

Aggregator: the member with the best overall single-run accuracy in this bench, ties going
to pool order (the pool's first member when no single run was scored). It is picked with
the test labels, as `best-per-task` is: an advantage over heads, which the MoA paper's
"strongest model", known beforehand, does not have. It answers as a Worker in its own style
on `prompts.aggregate_task`: the task, then the answers numbered in pool order, leaving out
members whose single run gave none. A `program` aggregator therefore writes a program that
prints the answer, run in the sandbox like every program turn; a `direct` one gives the
answer alone. Its call is a one-turn `FixedSchedule` episode on the item with that task
text, played by the evaluator like every other episode and scored by the item's scorer.
Answers are clipped to `prompts.AGGREGATE_ANSWER_CHARS` (start and end), and shorter until
the request fits the aggregator's context.

Transcript: the member turns (the single runs' own turns), then the aggregator's Worker
turn (`override` "moa aggregator"), numbered in that order; the answer is the aggregator's.
Tokens, seconds and cost are the sums over all of them, what one moa answer takes (the
member calls could run at once; their seconds are summed, as the oracle's are). An item on
which no member answered, or whose request does not fit the aggregator's context, is scored
wrong with `error` saying why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.bench.systems import EpisodeResult
from trinity_cli.episode.turn import reply_room
from trinity_cli.messages import Role, Transcript
from trinity_cli.policies.bench_rows import best_member
from trinity_cli.pool.pool import Pool
from trinity_cli.tasks.items import TaskItem
from trinity_cli.turns import prompts

OVERRIDE = "moa aggregator"
# Per-answer clips tried in turn until the aggregator's request fits its context.
CLIPS = (prompts.AGGREGATE_ANSWER_CHARS, 800, 400, 200)


def pick_aggregator(singles: Mapping[str, Sequence[EpisodeResult]], models: Sequence[str]) -> str:
    """The member whose single runs (`singles`: member -> its single runs, in pool order)
    scored best overall (ties: pool order; none scored: the first member)."""
    return best_member(singles) or models[0]


def context_fits(pool: Pool, model: str, kind: AnswerKind) -> Callable[[str], bool]:
    """Whether a Worker request with this task text fits `model`'s context with the reply
    room an episode asks for (`episode/turn.reply_room`)."""
    room = reply_room(pool, model, Role.WORKER)
    style = pool.style(model)

    def fits(task: str) -> bool:
        return pool.fits(model, prompts.build_messages(Role.WORKER, task, [], style=style, kind=kind), room)

    return fits


def member_answers(members: Sequence[Transcript | None]) -> list[str]:
    """The answers of the members' single runs, in the order given; runs that could not
    play or gave an empty answer are left out."""
    return [t.answer for t in members if t is not None and t.answer and t.answer.strip()]


def aggregation_task(item: TaskItem, answers: Sequence[str], fits: Callable[[str], bool]) -> str | None:
    """The aggregator's task text for `item` (None when there is no answer to aggregate):
    the longest clip of `CLIPS` that `fits`, else the shortest (its episode then reports
    the overflow)."""
    if not answers:
        return None
    for limit in CLIPS:
        text = prompts.aggregate_task(item.prompt, answers, limit)
        if fits(text):
            return text
    return text


def combine(item: TaskItem, members: Sequence[Transcript | None], aggregate: Transcript | None) -> Transcript:
    """The moa episode's transcript: every member turn, then the aggregator's (marked with
    `override`), renumbered; the answer is the aggregator's (None without one)."""
    turns = [t for m in members if m is not None for t in m.turns]
    final = []
    if aggregate is not None:
        final = [dataclasses.replace(t, override=OVERRIDE) for t in aggregate.turns]
    transcript = Transcript(task=item.prompt, stop_reason="max_turns")
    transcript.turns = [dataclasses.replace(t, index=i) for i, t in enumerate([*turns, *final])]
    transcript.answer = aggregate.answer if aggregate is not None else None
    return transcript
