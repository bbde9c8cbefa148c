"""One multi-turn episode: decide -> build prompt -> call the pool -> record, until a
Verifier accepts or a budget (turns, tokens or cost) is spent.

Rules, applied in this order after the coordinator's pick (each recorded in `Turn.override`):
1. A Thinker's `Next: <role>` suggestion replaces the role of the following turn; the
   coordinator still picks the model.
2. A Verifier picked before any Worker answer exists acts as a Worker instead (there is
   nothing to verify; the turn is not wasted).
3. On the last turn, if no answer exists yet, the role is Worker, so every episode ends
   with an answer. The last turn is turn `max_turns`, or the turn after the one that
   reached the token or cost budget: a budget reached while an answer exists ends the
   episode at once; reached before any Worker turn, it allows one more turn, a Worker.

Each member is asked in its own style (roles.py). A `program` member's Worker and
Verifier replies are run in the code sandbox (program.py) before they are recorded, so the
printed value becomes the turn's `Answer:` line; on a code task a program Verifier's
assert block is run against the proposed code and that run decides its verdict.

`kind` is the task's scorer kind ("numeric", "choice", "math", "exact", "code"; from the
task item in evolve and bench, guessed from the task's wording in ask and serve): Verifier
answers are compared exactly as that scorer reads answers.

The answer is the latest Worker reply. Models whose context cannot hold the task at all
are routed around (masked like `--exclude`); if no model can hold it, `ContextOverflow`.
When the transcript outgrows a model's context, its oldest turns are left out of that
model's prompt (`Turn.truncated_turns` records how many).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

import numpy as np

from trinity_cli import program, roles
from trinity_cli.errors import ConfigError, ContextOverflow
from trinity_cli.messages import ChatMessage, Decision, Role, Transcript, Turn
from trinity_cli.pool import Pool
from trinity_cli.tasks.answers import guess_kind

# Reply room a prompt must leave; llama.cpp backends clamp max_tokens to what is left.
MIN_REPLY_ROOM = 128

class DecisionSource(Protocol):
    """What picks (model, role) each turn: the evolved `Coordinator`, or a fixed schedule
    (bench.py's single-model and self-loop baselines)."""

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
    ) -> Decision: ...


TurnCallback = Callable[[Turn], None]
DecisionCallback = Callable[[int, Decision], None]


def reply_room(pool: Pool, model: str, role: Role) -> int:
    """The reply room `model`'s prompt must leave when it acts as `role`."""
    return min(pool.params(model, role.value).max_tokens, MIN_REPLY_ROOM)


def _fit(
    pool: Pool, model: str, role: Role, task: str, turns: Sequence[Turn], context: Sequence[ChatMessage],
    kind: str | None,
) -> tuple[list[ChatMessage], int]:
    room = reply_room(pool, model, role)
    style = pool.style(model)
    for keep in range(len(turns), -1, -1):
        messages = roles.build_messages(role, task, turns, context, keep_last=keep, style=style, kind=kind)
        if pool.fits(model, messages, room):
            return messages, len(turns) - keep
    raise ContextOverflow(
        f"model {model!r}: the task and the answer to check do not fit its context of "
        f"{pool.backend(model).n_ctx} tokens",
        "shorten the question, or raise n_ctx in the pool file",
    )


def usable_models(pool: Pool, task: str, exclude: Collection[str], context: Sequence[ChatMessage] = ()) -> set[str]:
    """Models not excluded whose context holds the task; errors if none is left."""
    excluded = set(pool.check_names(exclude))
    left = [m for m in pool.names if m not in excluded]
    if not left:
        raise ConfigError("every model of the pool is excluded", "exclude fewer models")
    fitting = []
    for name in left:
        messages = roles.build_messages(Role.WORKER, task, [], context, style=pool.style(name))
        if pool.fits(name, messages, MIN_REPLY_ROOM):
            fitting.append(name)
    if not fitting:
        biggest = max(pool.backend(n).n_ctx for n in left)
        raise ContextOverflow(
            f"the question is longer than every model's context (the largest holds {biggest} tokens)",
            "shorten the question, or use a pool with larger n_ctx",
        )
    return set(fitting)


def run_episode(
    task: str,
    pool: Pool,
    coordinator: DecisionSource,
    max_turns: int = 5,
    seed: int = 0,
    exclude: Collection[str] = (),
    context: Sequence[ChatMessage] = (),
    greedy: bool = False,
    on_decision: DecisionCallback | None = None,
    on_turn: TurnCallback | None = None,
    token_budget: int | None = None,
    cost_budget: float | None = None,
    kind: str | None = None,
) -> Transcript:
    """Run one episode (`kind`: the task's scorer kind, None to guess it from the task).
    Decisions are sampled from `np.random.default_rng(seed)`, so the
    same seed, pool replies and head give the same transcript.

    `token_budget` (prompt + completion tokens over all turns) and `cost_budget` (USD,
    priced models only) end the episode with stop_reason "token_budget" or "cost_budget"
    once reached. The turn that crosses the line is kept; if no Worker has answered by
    then, one more turn is played as a Worker (rule 3), so a budget never leaves an
    episode without an answer."""
    if max_turns < 1:
        raise ConfigError(f"max_turns must be at least 1, got {max_turns}")
    if coordinator.models != pool.names:
        raise ConfigError(f"the coordinator routes {coordinator.models}, the pool has {pool.names}")
    if kind is None:
        kind = guess_kind(task)
    usable = usable_models(pool, task, exclude, context)
    masked = set(pool.names) - usable
    rng = np.random.default_rng(seed)
    transcript = Transcript(task=task, context=list(context))
    suggested: Role | None = None
    spent: str | None = None  # which budget was reached: "token_budget" or "cost_budget"
    for index in range(max_turns):
        last = index == max_turns - 1 or spent is not None
        decision = coordinator.decide(task, transcript.turns, rng, masked, context, greedy)
        if on_decision:
            on_decision(index, decision)
        role, override = decision.role, None
        if suggested is not None and suggested is not role:
            role, override = suggested, f"thinker suggested {suggested.value}"
        has_answer = roles.latest_answer(transcript.turns) is not None
        if role is Role.VERIFIER and not has_answer:
            role, override = Role.WORKER, "no answer to verify yet: verifier acts as worker"
        if last and not has_answer and role is not Role.WORKER:
            why = "last turn" if spent is None else f"{spent.replace('_', ' ')} spent"
            role, override = Role.WORKER, f"{why} and no answer yet: worker"
        messages, dropped = _fit(pool, decision.model, role, task, transcript.turns, context, kind)
        completion = pool.chat(decision.model, messages, pool.params(decision.model, role.value))
        reply, execution = completion.text, None
        verdict = verdict_how = None
        suggested = None
        proposed = roles.latest_answer(transcript.turns)
        if pool.style(decision.model) == "program" and role is not Role.THINKER:
            strict = pool.config.sandbox == "strict"
            if role is Role.VERIFIER and kind == "code" and proposed is not None:
                verdict, run = program.run_tests(proposed, reply, strict=strict)
                verdict_how = "executed"
            else:
                reply, run = program.run_reply(reply, strict=strict)
            execution = run.to_dict()
        if role is Role.VERIFIER and verdict is None:
            verdict, verdict_how = roles.verdict(reply, proposed, kind)
        elif role is Role.THINKER:
            suggested = roles.suggestion(reply)
        turn = Turn(
            index=index,
            model=decision.model,
            role=role,
            chosen_role=decision.role,
            model_probs=decision.model_probs,
            role_probs=decision.role_probs,
            messages=messages,
            reply=reply,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            latency_s=completion.latency_s,
            coordinator_s=decision.seconds,
            cost_usd=completion.cost_usd,
            cached=completion.cached,
            override=override,
            verdict=verdict,
            verdict_source=verdict_how,
            suggestion=suggested,
            truncated_turns=dropped,
            execution=execution,
        )
        transcript.turns.append(turn)
        if on_turn:
            on_turn(turn)
        if verdict == "ACCEPT":
            transcript.accepted = True
            transcript.stop_reason = "accepted"
            break
        if spent is None:
            spent = _budget_reached(transcript, token_budget, cost_budget)
        if spent is not None and roles.latest_answer(transcript.turns) is not None:
            transcript.stop_reason = spent
            break
    transcript.answer = roles.latest_answer(transcript.turns)
    return transcript


def _budget_reached(transcript: Transcript, token_budget: int | None, cost_budget: float | None) -> str | None:
    """"token_budget" or "cost_budget" once the transcript has spent that budget, else None."""
    if token_budget is not None and transcript.prompt_tokens + transcript.completion_tokens >= token_budget:
        return "token_budget"
    if cost_budget is not None and (transcript.cost_usd or 0.0) >= cost_budget:
        return "cost_budget"
    return None
