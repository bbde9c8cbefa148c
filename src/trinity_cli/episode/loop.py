"""One multi-turn episode: decide -> build prompt -> call the pool -> record, until a
Verifier accepts, the decision source says stop, or a budget (turns, tokens or cost) is spent.

After the source's pick, the role that acts is the one the source's rules give
(`acting_role`, turns/source_rules.py: a Thinker's suggestion, no Verifier before an answer
or of code that failed its examples, a Worker on the last turn without an answer), recorded
in `Turn.override` when it differs; whether it is asked from the task alone is the rules'
too (`asked_alone`: after code that failed its examples, the next Worker). A budget reached
while an answer exists ends the episode at once; reached before any Worker turn, it allows
one more turn, the last.

Each member is asked in its own style (prompts.py). A member asked before in the episode
makes a fresh attempt: sampled at its `retry_temperature` from a seed derived from its seed,
the task and the attempt number (pool.Pool.params), so a second ask is not the first reply
again, and the same attempt at the same task is one cached call whoever asks it. A
`program` member's answering replies are run in the code sandbox (turns/program.py) before they
are recorded, so the printed value becomes the turn's `Answer:` line.

How answers are settled (turns/settle.py): outside code tasks a Verifier answers alone and
ACCEPTs when its answer equals any earlier answer, which becomes the episode's; on code
tasks every code answer is run against the task's shown examples, a Verifier reads the
proposed code (reason, direct: stated verdict) or tests it (program: its asserts run), and
a Verifier is never asked about code that failed them (rule 3, turns/source_rules.py). Without an ACCEPT the answer
is the plurality of votes (code: the latest code passing its examples).

Besides an ACCEPT and the budgets, the episode ends when its decision source says so
(`stop`, stop_reason the source's: "agreed", a reader's "read"; that turn's reply the answer),
and without either its
source's `final` settles the answer (turns/source_rules.py). The sources declare: the fixed
`agree` stops at the first agreement (on code, the first code that passes its examples);
every head stops, on a code task, at the first code that passes the task's shown examples
(rule 5: running the examples is the Verifier's check on code; a Verifier asked about
passing code would only add a turn); a reader (coordinator/reader.py) stops and picks the
final answer by the score of what the replies show. Fixed schedules (single, self-loops,
`sc`, the matrix) do not stop early.

`kind` is the task's answer kind (answer_kinds/: "numeric", "choice", "math", "exact", "code",
"freeform", a package's; from the task item in evolve and bench, guessed from the task's
wording in ask and serve): answers are compared exactly as that scorer reads them. It is
resolved once, when the episode starts (`answer_kinds.resolve_kind`: an `AnswerKind`, a name,
or None to detect it), and the object is what the decision source, turns/ and the turn
machinery are given.

Models whose context cannot hold the task at all
are routed around (masked like `--exclude`); if no model can hold it, `ContextOverflow`.
When the transcript outgrows a model's context, its oldest turns are left out of that
model's prompt (`Turn.truncated_turns` records how many).

A member whose call fails (the turn records why: episode/turn.py) sits out the rest of the
episode (rule 6, turns/source_rules.py); when its source has no member left to ask, the
episode ends there (stop_reason "failed"), with whatever answer the others gave.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from trinity_cli import conversation
from trinity_cli.answer_kinds import resolve_kind
from trinity_cli.answer_kinds.base import AnswerKind, Checks
from trinity_cli.answer_kinds.short import SHORT
from trinity_cli.episode.turn import MIN_REPLY_ROOM, Call, fit, play, reply_room
from trinity_cli.errors import ConfigError, ContextOverflow
from trinity_cli.events import DecisionMade, ProgressFn, TextWritten, TurnPlayed, quiet
from trinity_cli.messages import ChatMessage, Decision, GenParams, Role, Transcript, Turn
from trinity_cli.pool.pool import Pool
from trinity_cli.turns import prompts, replies, rules, settle
from trinity_cli.turns.choose import what_failed


class DecisionSource(Protocol):
    """What picks (model, role) each turn: the evolved `Coordinator`, a reader, or a fixed
    schedule (bench's single-model and self-loop baselines), told the episode's `kind` (the
    `AnswerKind` it settles answers by). Besides its picks, the loop
    obeys the rules it declares (turns/source_rules.py): `acting_role`, the role that acts
    after its pick; `stop`, whether the episode ends after the latest turn and on which
    turn's reply; `final`, the answer when it ends otherwise."""

    def acting_role(self, decision: Decision, suggested: Role | None, proposed: Turn | None, last: bool,
                    spent: str | None, kind: AnswerKind) -> tuple[Role, str | None]: ...

    def asked_alone(self, decision: Decision, role: Role, proposed: Turn | None, kind: AnswerKind) -> bool: ...

    stop_reason: str

    def stop(self, turns: Sequence[Turn], kind: AnswerKind) -> int | None: ...

    def final(self, turns: Sequence[Turn], kind: AnswerKind) -> str | None: ...

    def can_pick(self, models: Sequence[str], excluded: Collection[str]) -> bool: ...

    @property
    def models(self) -> list[str]: ...

    def decide(
        self,
        task: str,
        turns: Sequence[Turn],
        rng: np.random.Generator,
        excluded: Collection[str] = (),
        context: Sequence[ChatMessage] = (),
        greedy: bool = False,
        kind: AnswerKind = ...,
    ) -> Decision: ...


def _fit(
    pool: Pool, model: str, role: Role, task: str, turns: Sequence[Turn], context: Sequence[ChatMessage],
    kind: AnswerKind, alone: bool = False,
) -> tuple[list[ChatMessage], int]:
    """`model`'s messages as `role`, its oldest turns left out until they fit (asked alone:
    shown no turns, one try), and how many were left out."""
    style = pool.style(model)
    most = 0 if alone else len(turns)
    candidates = (prompts.build_messages(role, task, turns, context, keep_last=keep, style=style, kind=kind,
                                         alone=alone)
                  for keep in range(most, -1, -1))
    overflow = ContextOverflow(
        f"model {model!r}: the task and the answer to check do not fit its context of "
        f"{pool.backend(model).n_ctx} tokens",
        "shorten the question, or raise n_ctx in the pool file",
    )
    messages, shortened = fit(pool, model, role, candidates, overflow)
    return messages, len(turns) - (most - shortened)  # the turns not shown


def told_messages(pool: Pool, model: str, task: str, turns: Sequence[Turn], context: Sequence[ChatMessage],
                  kind: AnswerKind) -> list[ChatMessage] | None:
    """`model`'s messages for a redraw of the latest draft told what its checks found wrong
    (`Decision.told`; the kind's `redraft_messages`), or None for a fresh draft instead: the
    latest turn did not fail its checks, the kind has no such messages, or they do not fit
    `model`'s context with room for a reply."""
    wrong = what_failed(turns[-1]) if turns else None
    if wrong is None:
        return None
    messages = kind.redraft_messages(pool.style(model), task, context, turns[-1].reply, wrong)
    if messages is None or not pool.fits(model, messages, reply_room(pool, model, Role.WORKER)):
        return None
    return messages


def unfit_members(pool: Pool, task: str, kind: AnswerKind, masked: Collection[str] = ()) -> set[str]:
    """The members whose style does not fit `kind` (answer_kinds/base.py `fits_style`: no
    program writes a haiku), masked like `--exclude`; none when that would leave no member."""
    unfit = {m for m in pool.names if not kind.fits_style(pool.style(m), task)}
    return unfit if set(pool.names) - set(masked) - unfit else set()


def fit_context(pool: Pool, task: str, context: Sequence[ChatMessage], members: Collection[str],
                kind: AnswerKind = SHORT) -> tuple[list[ChatMessage], int]:
    """The longest form of the conversation `context` (conversation.shortenings: the oldest
    messages left out first, system messages kept) with which every one of `members` holds
    the task as a first Worker is asked it (its style, `kind`'s own words) and room for a
    reply; and how many messages it leaves out. The shortest form when none fits (the
    members' turns then say so: `usable_models`, ContextOverflow)."""
    form: tuple[list[ChatMessage], int] = (list(context), 0)
    for form in conversation.shortenings(context):
        kept = form[0]
        if all(pool.fits(name, prompts.build_messages(Role.WORKER, task, [], kept, style=pool.style(name), kind=kind),
                         MIN_REPLY_ROOM) for name in members):
            return form
    return form


def usable_models(pool: Pool, task: str, exclude: Collection[str], context: Sequence[ChatMessage] = ()) -> set[str]:
    """Models not excluded whose context holds the task (after `context`); errors if none is
    left."""
    left = pool.left_after(exclude)
    fitting = []
    for name in left:
        messages = prompts.build_messages(Role.WORKER, task, [], context, style=pool.style(name))
        if pool.fits(name, messages, MIN_REPLY_ROOM):
            fitting.append(name)
    if not fitting:
        biggest = max(pool.backend(n).n_ctx for n in left)
        raise ContextOverflow(
            f"the question is longer than every model's context (the largest holds {biggest} tokens)",
            "shorten the question, or use a pool with larger n_ctx",
        )
    return set(fitting)


# Long on purpose: 15 parameters and their contract; the loop itself (decide, act, judge,
# stop) is about 35 lines, each step a helper below.
def run_episode(
    task: str,
    pool: Pool,
    coordinator: DecisionSource,
    max_turns: int = 5,
    seed: int = 0,
    exclude: Collection[str] = (),
    context: Sequence[ChatMessage] = (),
    greedy: bool = False,
    progress: ProgressFn | None = None,
    token_budget: int | None = None,
    cost_budget: float | None = None,
    kind: AnswerKind | str | None = None,
    examples: Checks | None = None,
    usable: Collection[str] | None = None,
    first_index: int = 0,
) -> Transcript:
    """Run one episode (`kind`: the task's answer kind, an `AnswerKind` or its name, None to
    guess it from the task: resolved here, once, module docstring;
    `examples`: a code task's shown tests, run on every code answer: turns/settle.py;
    `progress` receives DecisionMade before each call and TurnPlayed after each turn).
    Decisions are sampled from `np.random.default_rng(seed)`, so the
    same seed, pool replies and head give the same transcript.

    `token_budget` (prompt + completion tokens over all turns) and `cost_budget` (USD,
    priced models only) end the episode with stop_reason "token_budget" or "cost_budget"
    once reached. The turn that crosses the line is kept; if no Worker has answered by
    then, one more turn is played as a Worker (rule 4, turns/source_rules.py), so a budget never leaves an
    episode without an answer.

    `usable`: the members the caller found usable (`usable_models`, which checks `exclude`),
    so they are not checked twice; None: computed here from `exclude`.

    `first_index`: the index of the episode's first turn in the transcript it is part of (a
    conductor's fallback follows the conductor's turn: conductor/run.py); turns are built with
    it, and the indices a source's `stop` and a Verifier's `agreed_with` give are those."""
    if max_turns < 1:
        raise ConfigError(f"max_turns must be at least 1, got {max_turns}")
    if coordinator.models != pool.names:
        raise ConfigError(f"the coordinator routes {coordinator.models}, the pool has {pool.names}")
    resolved = resolve_kind(kind, task)
    masked = set(pool.names) - set(usable if usable is not None else usable_models(pool, task, exclude, context))
    masked |= unfit_members(pool, task, resolved, masked)
    play = _Play(pool, task, list(context), resolved, examples, emit := progress or quiet)
    rng = np.random.default_rng(seed)
    transcript = Transcript(task=task, context=list(context))
    spent: str | None = None  # which budget was reached: "token_budget" or "cost_budget"
    settled: str | None = None  # the answer agreed on, once there is one
    for index in range(max_turns):
        left_out = masked | set(transcript.failures())  # rule 6: a member that failed sits out
        if len(left_out) > len(masked) and not coordinator.can_pick(pool.names, left_out):
            transcript.stop_reason = "failed"
            break
        decision = coordinator.decide(task, transcript.turns, rng, left_out, context, greedy, resolved)
        emit(DecisionMade(first_index + index, decision))
        turns = transcript.turns
        proposed = rules.latest_proposal(turns)
        last = index == max_turns - 1 or spent is not None
        role, override = coordinator.acting_role(decision, turns[-1].suggestion if turns else None, proposed, last,
                                                 spent, resolved)
        alone = coordinator.asked_alone(decision, role, proposed, resolved)
        turn = play.turn(turns, first_index + index, decision, role, override, proposed, alone)
        if turn.error is None:  # a failed call is settled as nothing
            _judge(turn, turns, resolved)
        turns.append(turn)
        emit(TurnPlayed(turn))
        if turn.verdict == "ACCEPT":
            transcript.accepted, transcript.stop_reason = True, "accepted"
            # The answer agreed with (asked alone), or the code the Verifier accepted.
            accepted = turns[turn.agreed_with - first_index] if turn.agreed_with is not None else proposed
            settled = accepted.reply if accepted is not None else None
            break
        if (stopped := coordinator.stop(turns, resolved)) is not None:
            transcript.stop_reason, settled = coordinator.stop_reason, turns[stopped - first_index].reply
            break
        spent = spent or _budget_reached(transcript, token_budget, cost_budget)
        if spent is not None and rules.latest_proposal(turns) is not None:
            transcript.stop_reason = spent
            break
    transcript.answer = settled if settled is not None else coordinator.final(transcript.turns, resolved)
    return transcript


@dataclass
class _Play:
    """What stays the same over the turns of one episode, and how one turn is played."""

    pool: Pool
    task: str
    context: list[ChatMessage]
    kind: AnswerKind
    examples: Checks | None
    emit: ProgressFn

    def turn(self, turns: Sequence[Turn], index: int, decision: Decision, role: Role, override: str | None,
             proposed: Turn | None, alone: bool) -> Turn:
        """Ask `decision.model` as `role` (a fresh attempt if it was asked before; from the task
        alone when the source's rules say so) through the turn machinery (episode/turn.py);
        verdicts are `_judge`'s."""
        model = decision.model
        told = told_messages(self.pool, model, self.task, turns, self.context, self.kind) if decision.told else None
        if told is not None:  # a redraw shown the draft it redraws: not independent of it
            messages, dropped, alone = told, 0, False
        else:
            messages, dropped = _fit(self.pool, model, role, self.task, turns, self.context, self.kind, alone)
        call = Call(model=model, role=role, messages=messages, answering=rules.role_proposes_answer(role, alone),
                    max_tokens=self.kind.max_tokens(Role.WORKER if alone else role),
                    attempt=sum(t.model == model for t in turns), alone=alone, chosen_role=decision.role,
                    model_probs=decision.model_probs, role_probs=decision.role_probs,
                    coordinator_s=decision.seconds, override=override, dropped=dropped,
                    split_last=bool(self.context), split_before=new_message(self.task, self.context))

        def written(piece: str) -> None:
            self.emit(TextWritten(index, model, role.value, piece))

        return play(self.pool, call, index, attempt_salt(self.task, self.context), self.examples, proposed,
                    on_text=written)


def _judge(turn: Turn, turns: Sequence[Turn], kind: AnswerKind) -> None:
    """Settle `turn` against the earlier `turns` (turns/settle.py): a Verifier's verdict (asked
    alone: agreement with any earlier answer; on code: stated or executed, and only ever about
    code that passed its examples, rule 3), a Thinker's suggestion, and whether it votes."""
    if turn.role is Role.VERIFIER and turn.alone:
        turn.agreed_with = settle.agreed_with(turns, settle.answer_of(turn, kind), kind)
        agreed = turn.agreed_with is not None
        turn.verdict, turn.verdict_source = ("ACCEPT", "agreed") if agreed else ("REVISE", "disagreed")
    elif turn.role is Role.VERIFIER:
        if turn.verdict is None:
            turn.verdict, turn.verdict_source = replies.verdict(turn.reply), "stated"
    elif turn.role is Role.THINKER:
        turn.suggestion = replies.suggestion(turn.reply)
    turn.vote = settle.is_vote(turns, turn, kind)


def _budget_reached(transcript: Transcript, token_budget: int | None, cost_budget: float | None) -> str | None:
    """"token_budget" or "cost_budget" once the transcript has spent that budget, else None."""
    if token_budget is not None and transcript.prompt_tokens + transcript.completion_tokens >= token_budget:
        return "token_budget"
    if cost_budget is not None and (transcript.cost_usd or 0.0) >= cost_budget:
        return "cost_budget"
    return None


def attempt_salt(task: str, context: Sequence[ChatMessage]) -> str:
    """What a fresh attempt's seed is derived from besides the member and the attempt
    (pool.attempt_seed): the task and the earlier conversation."""
    return "\x00".join([task, *(f"{m.role}:{m.content}" for m in context)])


def new_message(task: str, context: Sequence[ChatMessage]) -> str:
    """What every call of an episode is split before (GenParams.split_before): the task, when
    the episode continues a conversation; else "" (no split)."""
    return task if context else ""


def turn_params(pool: Pool, transcript: Transcript, turn: Turn) -> GenParams:
    """The generation parameters `turn` of `transcript` was called with (its attempt's,
    and its own reply cap when it records one: `Turn.max_tokens`)."""
    params = pool.params(turn.model, turn.role.value, attempt=turn.attempt,
                         salt=attempt_salt(transcript.task, transcript.context))
    params = replace(params, split_last=bool(transcript.context),  # as every call of its episode (turn.Call)
                     split_before=new_message(transcript.task, transcript.context))
    return params if turn.max_tokens is None else replace(params, max_tokens=turn.max_tokens)
