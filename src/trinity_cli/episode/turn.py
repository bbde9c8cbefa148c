"""One turn, however it was decided: fit the prompt to the member's context, make the call,
run what must be run, record it. The coordinator's episodes (episode/loop.py) and the
conductor's workflow steps (conductor/run.py) both play their turns here, so a turn is
asked, fitted, executed and recorded one way; the two modes differ only in who decides the
next turn and what its messages say.

`fit(pool, model, role, candidates)`: the first of `candidates` (message lists, most
complete first) that leaves the role's reply room in the member's context, and how many
shortenings that took; `ContextOverflow` when none fits.

`play(pool, call, ...)`: the call's generation parameters are the member's for the role and
attempt (a fresh attempt after the first: pool.Pool.params, seeded by `salt`), with the
call's own reply cap when it has one. After the reply:
- a `program` member's answering reply runs in the sandbox (turns/program.py), its printed
  value becoming the turn's `Answer:` line; a `program` code Verifier's asserts run against
  the proposed code, giving the turn's executed verdict;
- when the task has checks (its answer kind's `checks`: a code task's shown examples, a
  free-form request's stated constraints), an answering reply is checked (`Checks.run`):
  every answering reply of an episode; a workflow step's reply when it holds a code block
  (`examples="with code"`: a step that plans in prose has no code to run).

A call that fails (the member's backend raised: `MemberFailed`, pool/pool.py) is a failed
turn, not a failed command: the turn is recorded with no reply, no tokens and `Turn.error`
saying why, nothing is run for it, and it proposes, verifies and votes nothing; whoever
plays the turns goes on (episode/loop.py leaves that member out of the rest of the episode).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from trinity_cli.answer_kinds.base import Checks
from trinity_cli.errors import ContextOverflow, MemberFailed
from trinity_cli.messages import ROLES, ChatMessage, Completion, GenParams, Role, Turn
from trinity_cli.pool.pool import Pool
from trinity_cli.turns import program

# Reply room a prompt must leave; llama.cpp backends clamp max_tokens to what is left.
MIN_REPLY_ROOM = 128


def reply_room(pool: Pool, model: str, role: Role) -> int:
    """The reply room `model`'s prompt must leave when it acts as `role`."""
    return min(pool.params(model, role.value).max_tokens, MIN_REPLY_ROOM)


def fit(pool: Pool, model: str, role: Role, candidates: Iterable[list[ChatMessage]],
        overflow: ContextOverflow) -> tuple[list[ChatMessage], int]:
    """The first candidate that fits `model`'s context as `role`, and its position (module
    docstring); raises `overflow` when none does."""
    room = reply_room(pool, model, role)
    for shortened, messages in enumerate(candidates):
        if pool.fits(model, messages, room):
            return messages, shortened
    raise overflow


@dataclass(frozen=True)
class Call:
    """One call to play: who acts and how, what it is shown, and how it is recorded.

    `answering`: the reply proposes an answer (turns/rules.py; every workflow step);
    `alone`: shown the task alone; `attempt`: the member's earlier calls in this episode or
    workflow; `max_tokens`: a reply cap other than the member's for `role` (the conductor's
    call), else None; `json_schema`: the schema the reply is decoded under (GenParams), else
    None; `split_last`: the episode continues a conversation (GenParams.split_last), and
    `split_before` its new message (GenParams.split_before). The rest
    is recorded on the Turn as it is: the coordinator's pick
    (`chosen_role`, probabilities, seconds), why the acting role differs (`override`), and
    how many earlier turns the prompt left out (`dropped`)."""

    model: str
    role: Role
    messages: list[ChatMessage]
    answering: bool
    attempt: int = 0
    alone: bool = False
    max_tokens: int | None = None
    json_schema: str | None = None
    split_last: bool = False
    split_before: str = ""
    chosen_role: Role | None = None
    model_probs: list[float] | None = None
    role_probs: list[float] | None = None
    coordinator_s: float = 0.0
    override: str | None = None
    dropped: int = 0


def play(pool: Pool, call: Call, index: int, salt: str, examples: Checks | None,
         proposed: Turn | None = None, run_examples: str = "answering",
         on_text: Callable[[str], None] | None = None) -> Turn:
    """Make `call` and record it as turn `index` (module docstring); `proposed` is the code a
    code Verifier checks; `run_examples` is "answering" or "with code"; `on_text` receives
    the reply as it is written (Pool.chat)."""
    model = call.model
    strict = pool.config.sandbox == "strict"
    params = pool.params(model, call.role.value, attempt=call.attempt, salt=salt)
    if call.max_tokens is not None:
        params = replace(params, max_tokens=call.max_tokens)
    if call.json_schema is not None:
        params = replace(params, json_schema=call.json_schema)
    if call.split_last:
        params = replace(params, split_last=True, split_before=call.split_before)
    completion, error = _chat(pool, model, call.messages, params, on_text)
    reply, execution, verdict = completion.text, None, None
    if error is None and pool.style(model) == "program" and call.role is not Role.THINKER:
        if call.answering:
            reply, run = program.run_reply(reply, strict=strict)
        else:  # a program Verifier of code: its asserts run against the proposed code
            assert proposed is not None
            verdict, run = program.run_tests(proposed.reply, reply, strict=strict)
        execution = run.to_dict()
    example_run = None
    wanted = error is None and (call.answering if run_examples == "answering" else "```" in reply)
    if wanted and examples is not None:
        example_run = examples.run(reply, strict=strict)
    names, roles = pool.names, ROLES
    return Turn(
        index=index, model=model, role=call.role, chosen_role=call.chosen_role or call.role,
        model_probs=call.model_probs if call.model_probs is not None else [float(n == model) for n in names],
        role_probs=call.role_probs if call.role_probs is not None else [float(r is call.role) for r in roles],
        messages=call.messages, reply=reply, prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens, latency_s=completion.latency_s,
        coordinator_s=call.coordinator_s, cost_usd=completion.cost_usd, cached=completion.cached,
        override=call.override, truncated_turns=call.dropped, execution=execution, verdict=verdict,
        verdict_source="executed" if verdict else None, alone=call.alone, attempt=call.attempt,
        temperature=params.temperature, sample_seed=params.seed if call.attempt else None, examples=example_run,
        max_tokens=call.max_tokens, finish_reason=completion.finish_reason if error is None else None,
        logprob_stats=completion.logprob_stats, error=error,
    )


def _chat(pool: Pool, model: str, messages: list[ChatMessage], params: GenParams,
          on_text: Callable[[str], None] | None = None) -> tuple[Completion, str | None]:
    """The member's reply and None, or, when its call failed, an empty reply and why (module
    docstring); `on_text` receives the reply as it is written."""
    try:
        return pool.chat(model, messages, params, on_text), None
    except MemberFailed as failure:
        return Completion(text="", prompt_tokens=0, completion_tokens=0, latency_s=0.0), failure.reason
