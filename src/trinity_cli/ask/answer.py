"""`trinity ask` as a library call: read the question (stdin when not given), build pool
and coordinator, run one episode, save it, close what it built. What it is asked with and
what it returns (`AskOptions`, `AskResult`) live in the package (ask/__init__.py).

Run record (`runs/run-N/run.json`, kind "ask"):
    {"kind": "ask", "title": first line of the question, "question", "pool": {"name",
     "models", "source"}, "head": {"name", "trained", "policy": "head" or "reader", "made",
     "default": picked because none was named}, "backbone", "seed" (--seed),
     "episode_seed" (`question_seed`: what the coordinator's draws came from), "greedy",
     "answer_kind" (the scorer kind guessed from the question, or null), "max_turns" (the budget
     played), "exclude", "transcript": Transcript.to_dict(), "answer" (turns/answer_text.py: the
     answer alone; the transcript's "answer" is the whole reply), "wall_s", "pool_calls",
     "cache_hits"}

Seeds: every question draws its own decisions. The episode seed is `question_seed(--seed,
question, context)`, a hash as bench's `episode_seed` is of (seed, item), so the same
question with the same seed replays exactly and two questions draw independently.

Conductor mode (`AskOptions.mode` "conductor", conductor/run.py): no coordinator is built (no
backbone loads); the conductor writes a workflow and trinity runs it. The record then has
"mode": "conductor", "conductor": the conducting model, "conductor_depth", "head": null,
"backbone": null, and the transcript its "workflow". Coordinator runs record "mode":
"coordinator".

Agree mode (`AskOptions.mode` "agree", episode/schedules.agree): no head and no coordinator;
the members are asked in pool order, each from the question alone, until two answers agree
(code: until one passes the question's examples), at most `max_turns` (default AGREE_TURNS)
calls. It is the mode when none is given, no --head is named and the pool file says
`router: agree` (a pool whose trained heads do not validate above it). The record then has
"mode": "agree", "head": null, "backbone": null.

Other modes: any name the policies registry holds that answers questions (policies/registry.py:
a package's own, registered by entry point) plays its policy as agree mode does; the record has
"mode": its name, "head": null, "backbone": null and its turn budget (the policy's `max_turns`,
default 5, unless one is given).

Turn budget: `AskOptions.max_turns` when given (--max-turns, a served request's
`max_turns`, serve's --max-turns), else the max_turns the head was evolved with (its
manifest), else 5 (coordinator/head.py's `turn_budget`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from trinity_cli.answer_kinds import answer_kind, detect, kind_name
from trinity_cli.answer_kinds.base import AnswerKind, Checks
from trinity_cli.answer_kinds.constraints import Constraints
from trinity_cli.answer_kinds.examples import Examples
from trinity_cli.ask import AskOptions, AskResult, answer_mode, question_seed, read_question
from trinity_cli.coordinator.head import Head
from trinity_cli.coordinator.policy import Coordinator
from trinity_cli.episode.loop import fit_context, usable_models
from trinity_cli.errors import MemberFailed, option
from trinity_cli.events import ContextShortened, ProgressFn, RunAllocated, quiet
from trinity_cli.keyed_cache import journal_to
from trinity_cli.messages import ChatMessage, Transcript
from trinity_cli.policies.base import Episode
from trinity_cli.policies.kinds import Answering, HeadEngine
from trinity_cli.policies.registry import answering_kind
from trinity_cli.pool.pool import Pool, open_pool
from trinity_cli.pool_config import load_pool
from trinity_cli.runs.store import JOURNAL, RunStore
from trinity_cli.turns import prompts
from trinity_cli.turns.answer_text import answer_text


def question_kind(question: str, options: AskOptions) -> str | None:
    """The answer kind of a question: `options.kind` when given (checked against the
    registry), else the one its wording asks for (answer_kinds/registry.py `detect`)."""
    return kind_name(options.kind) if options.kind is not None else detect(question)


def question_examples(question: str, kind: AnswerKind) -> Checks | None:
    """What trinity checks on every answer of the question (its kind's `checks`: the asserts
    and `>>>` lines a code question shows, the constraints a free-form request states); None
    when there are none."""
    checks: Checks | None = kind.checks(question)
    return checks


def kind_default(options: AskOptions, kind: AnswerKind) -> AskOptions:
    """`options` for a question of answer kind `kind`: when they name neither a mode nor a head,
    the kind's own procedure if it has one (`AnswerKind.default_mode`: a free-form question gets
    the `drafts` policy, validated on IFEval and never measured against a head: docs/freeform.md)."""
    mode = kind.default_mode
    if mode is None or options.mode is not None or options.head is not None:
        return options
    return replace(options, mode=mode)


def build(options: AskOptions) -> tuple[Pool, HeadEngine | None]:
    """The pool, and what the answering policy keeps between questions (a head's coordinator,
    or a reader's source; None for a policy that reads no head): the policy's name is found in
    the registry (policies/registry.py) and the choice checked against the pool here, before
    anything runs. Model files are located later, once the question is known to fit (`ask`)."""
    if options.mode is not None:
        answering_kind(options.mode)  # an unknown name is refused before the pool is read
    kind_name(options.kind)  # an unknown kind is refused before anything loads
    config = load_pool(options.pool)
    kind = answering_kind(answer_mode(options, config))
    kind.check(options)
    pool = open_pool(config, options.use_cache)
    try:
        return pool, kind.engine(pool, options)
    except BaseException:
        pool.close()
        raise


@dataclass
class _Built:
    """The engines of one ask (policies/base.py): its pool and the coordinator it built."""

    pool: Pool
    built: HeadEngine | None

    def coordinator(self, head: Head, backbone: str | None = None) -> Coordinator:
        assert isinstance(self.built, Coordinator) and head is self.built.head
        return self.built


def answering(options: AskOptions, pool: Pool, engine: HeadEngine | None) -> Answering:
    """Who answers (`answer_mode`, a name the policies registry resolves): the policy, its turn
    budget, decision mode, the run record's fields that say how (module docstring) and the
    `AskStarted` event."""
    return answering_kind(answer_mode(options, pool.config)).answering(pool, engine, options)


def _answer(
    question: str, pool: Pool, coordinator: HeadEngine | None, how: Answering, options: AskOptions,
    context: Sequence[ChatMessage],
    kind: AnswerKind, examples: Checks | None, episode_seed: int, usable: set[str], progress: ProgressFn,
) -> tuple[Transcript, dict[str, Any]]:
    """Play the question with the answering policy (`how`). Returns the transcript and the run
    record's fields that say who answered (module docstring)."""
    episode = Episode(question, seed=episode_seed, max_turns=how.max_turns, greedy=how.greedy, kind=kind,
                      examples=examples, context=context, usable=usable, progress=progress,
                      token_budget=options.token_budget, cost_budget=options.cost_budget)
    transcript = how.policy.play(_Built(pool, coordinator), episode)
    record = how.record
    if transcript.workflow is not None:  # the conductor that wrote it
        record = {**record, "conductor": transcript.workflow["conductor"]}
    return transcript, record


def _record(question: str, pool: Pool, how: dict[str, Any], options: AskOptions, episode_seed: int, kind: str | None,
            examples: Checks | None, transcript: Transcript, answer: str, wall: float) -> dict[str, Any]:
    """The ask run's record (run.json): the question, the pool, who answered (`how`: head or
    conductor), seeds, the transcript and the answer alone."""
    return {
        "kind": "ask",
        "title": question.splitlines()[0][:100],
        "question": question,
        "pool": {"name": pool.config.name, "models": pool.names, "source": pool.config.source},
        **how,
        "prompt_version": prompts.PROMPT_VERSION,
        "seed": options.seed,
        "episode_seed": episode_seed,
        "answer_kind": kind,
        "examples": examples.source if isinstance(examples, Examples) else None,
        "constraints": (examples.dicts or None) if isinstance(examples, Constraints) else None,
        "exclude": list(options.exclude),
        "transcript": transcript.to_dict(),
        "answer": answer,
        "wall_s": wall,
        "pool_calls": len(transcript.turns),
        "cache_hits": sum(t.cached for t in transcript.turns),
    }


def refuse_unanswered(transcript: Transcript, pool: Pool) -> None:
    """`MemberFailed` when the episode has no answer because members failed (failed turns:
    episode/turn.py), naming each failed member and its kind in one line; a member that
    failed while another answered is only its turn's record."""
    failures = transcript.failures()
    if not failures or (transcript.answer or "").strip():
        return
    (member, reason), *others = failures.items()
    reason += "".join(f"; member {m!r} (kind {pool.config.model(m).kind}) failed: {r}" for m, r in others)
    raise MemberFailed(member, pool.config.model(member).kind, reason,
                       f"no member answered: fix {'them' if others else 'it'}, or leave "
                       f"{'them' if others else 'it'} out with {option('exclude')}")


@dataclass
class Ready:
    """A question checked and resolved, nothing played yet (`ready`): its text, the options it
    is answered with (the kind's own procedure applied: `kind_default`), the conversation
    before it as the members are shown it (`fit_context`), its kind (the name the record
    keeps, and the object the episode carries), who answers, its checks, its episode seed and
    the members that can hold it."""

    question: str
    options: AskOptions
    context: list[ChatMessage]
    kind_name: str | None
    kind: AnswerKind
    how: Answering
    examples: Checks | None
    episode_seed: int
    usable: set[str]


def ready(question: str, options: AskOptions, pool: Pool, coordinator: HeadEngine | None,
          context: Sequence[ChatMessage], emit: ProgressFn) -> Ready:
    """Check and resolve `question` after the conversation `context` (module docstring of
    conversation.py): the exclusions, every member's context (the oldest messages of a
    conversation too long for a member are left out: `ContextShortened` says how many), the
    model files, its kind and who answers (`AskStarted`). Raises before anything is played or
    saved."""
    # The one check of the exclusions and of the question against every context, before any
    # model file is located and before a run exists (serve answers errors plainly then).
    usable = usable_models(pool, question, options.exclude, [m for m in context if m.role == "system"])
    pool.check_assets()
    kind = question_kind(question, options)  # the name, as the record keeps it
    found = answer_kind(kind)  # the kind, resolved once: the episode carries this object
    kept, left_out = fit_context(pool, question, context, usable, found)
    options = kind_default(options, found)
    how = answering(options, pool, coordinator)
    procedure = found.procedure_summary(how.started.procedure)
    started = how.started if procedure is None else replace(how.started, summary=procedure)
    emit(replace(started, answer_kind=found.name, kind_read=options.kind is None))
    if left_out:
        emit(ContextShortened(left_out, len(context), min(pool.backend(name).n_ctx for name in usable)))
    return Ready(question, options, kept, kind, found, how, question_examples(question, found),
                 question_seed(options.seed, question, kept), usable)


def play_ready(question: Ready, pool: Pool, coordinator: HeadEngine | None, emit: ProgressFn) -> dict[str, Any]:
    """Play a question made `ready` and return its run record (module docstring), unsaved;
    `MemberFailed` when no member answered (`refuse_unanswered`)."""
    start = time.perf_counter()
    transcript, said = _answer(question.question, pool, coordinator, question.how, question.options, question.context,
                               question.kind, question.examples, question.episode_seed, question.usable, emit)
    refuse_unanswered(transcript, pool)
    answer = answer_text(transcript.answer, question.kind, question.question)
    return _record(question.question, pool, said, question.options, question.episode_seed, question.kind_name,
                   question.examples, transcript, answer, time.perf_counter() - start)


def ask(
    question: str | None,
    options: AskOptions,
    progress: ProgressFn | None = None,
    context: Sequence[ChatMessage] = (),
    store: RunStore | None = None,
    built: tuple[Pool, HeadEngine | None] | None = None,
    extra: dict[str, Any] | None = None,
) -> AskResult:
    """Answer `question` (None or "-": read it from stdin, see `read_question`) after the
    conversation `context` (earlier chat messages, oldest first; `options.system` before them)
    with the coordinated pool and save the run.

    `built` reuses an already built (pool, coordinator) and leaves it open; otherwise both
    are built here and closed before returning, whatever happens. `progress` receives
    AskStarted once they are ready (and ContextShortened when the conversation was cut to
    fit), RunAllocated when the run directory exists, then the episode's DecisionMade and
    TurnPlayed (events.py). `extra` adds fields to the run record (e.g. {"via": "serve"}).
    Nothing is saved if the episode fails, is interrupted, or no member answered
    (`refuse_unanswered`)."""
    question = read_question(question)
    if options.system:
        context = [ChatMessage("system", options.system), *context]
    pool, coordinator = built or build(options)
    store = store or RunStore()
    emit = progress or quiet
    try:
        prepared = ready(question, options, pool, coordinator, context, emit)
        with store.new_run() as run_dir, journal_to(run_dir / JOURNAL):
            emit(RunAllocated(run_dir.name))
            record = {**play_ready(prepared, pool, coordinator, emit), **(extra or {})}
            store.save(run_dir, record)
    finally:
        if built is None:
            pool.close()
            if coordinator is not None:
                coordinator.close()
    return AskResult.of_record(run_dir.name, record)
