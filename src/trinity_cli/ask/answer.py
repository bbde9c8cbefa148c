"""`trinity ask` as a library call: read the question (stdin when not given), build pool
and coordinator, run one episode, save it, close what it built. What it is asked with and
what it returns (`AskOptions`, `AskResult`) live in the package (ask/__init__.py).

Run record (`runs/run-N/run.json`, kind "ask"):
    {"kind": "ask", "title": first line of the question, "question", "pool": {"name",
     "models", "source"}, "head": {"name", "trained"}, "backbone", "seed" (--seed),
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

Turn budget: `AskOptions.max_turns` when given (--max-turns, a served request's
`max_turns`, serve's --max-turns), else the max_turns the head was evolved with (its
manifest), else 5 (coordinator/head.py's `turn_budget`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trinity_cli.ask import MODES, AskOptions, AskResult, answer_mode, question_seed, read_question
from trinity_cli.coordinator.head import Head, default_greedy, turn_budget
from trinity_cli.coordinator.policy import Coordinator, resolve_head
from trinity_cli.coordinator.reader import ReaderSource
from trinity_cli.episode.loop import usable_models
from trinity_cli.episode.schedules import AGREE_TURNS, agree
from trinity_cli.errors import ConfigError, MemberFailed, option
from trinity_cli.events import AskStarted, ProgressFn, RunAllocated, quiet
from trinity_cli.keyed_cache import journal_to
from trinity_cli.messages import ChatMessage, Transcript
from trinity_cli.policies import registry
from trinity_cli.policies.base import Episode, Policy
from trinity_cli.pool.pool import Pool, open_pool
from trinity_cli.pool_config import load_pool
from trinity_cli.runs.store import JOURNAL, RunStore
from trinity_cli.tasks.answers import guess_kind
from trinity_cli.tasks.doctests import examples_in_text
from trinity_cli.turns import prompts
from trinity_cli.turns.answer_text import answer_text
from trinity_cli.turns.settle import Examples


def question_examples(question: str, kind: str | None) -> Examples | None:
    """The examples a code question shows (its asserts and `>>>` lines), run on every code
    answer (turns/settle.py); None for other questions or when it shows none."""
    if kind != "code":
        return None
    source = examples_in_text(question)
    return Examples(source) if source else None


def build(options: AskOptions) -> tuple[Pool, Coordinator | ReaderSource | None]:
    """Pool and coordinator for `options` (no coordinator in conductor mode); the head, or
    the conductor, is checked against the pool here, before anything runs. Model files are
    located later, once the question is known to fit (`ask`)."""
    if options.mode is not None and options.mode not in MODES:
        raise ConfigError(f"{option('mode')}: unknown mode {options.mode!r}", "use coordinator, conductor or agree")
    config = load_pool(options.pool)
    mode = answer_mode(options, config)
    if mode == "agree" and options.head is not None:
        raise ConfigError(f"{option('mode')} agree asks the members in order: it takes no {option('head')}",
                          f"leave out {option('head')}, or use {option('mode')} coordinator")
    pool = open_pool(config, options.use_cache)
    try:
        if mode == "conductor":
            options.conductor_spec().name(pool)
            return pool, None
        if mode == "agree":
            return pool, None
        head = resolve_head(options.head, config.name, config.names, options.backbone)
    except BaseException:
        pool.close()
        raise
    return pool, registry.engine_of(head, options.backbone, options.device)


def _started(pool: Pool, coordinator: Coordinator | ReaderSource | None, options: AskOptions) -> AskStarted:
    """Who answers: the pool and head, the agree procedure, or in conductor mode the conductor."""
    if answer_mode(options, pool.config) == "agree":
        return AskStarted(pool=pool.config.name, models=tuple(pool.names), head=None, uniform=False,
                          excluded=tuple(options.exclude), procedure="agree",
                          procedure_is_default=options.mode is None)
    if coordinator is None:
        return AskStarted(pool=pool.config.name, models=tuple(pool.names), head=None, uniform=False,
                          excluded=tuple(options.exclude),
                          conductor=options.conductor or pool.config.conductor_name,
                          conductor_depth=options.conductor_depth)
    head = coordinator.head
    return AskStarted(pool=pool.config.name, models=tuple(pool.names), head=str(head.manifest.get("name")),
                      uniform=head.uniform, excluded=tuple(options.exclude))


@dataclass
class _Built:
    """The engines of one ask (policies/base.py): its pool and the coordinator it built."""

    pool: Pool
    built: Coordinator | ReaderSource | None

    def coordinator(self, head: Head, backbone: str | None = None) -> Coordinator:
        assert isinstance(self.built, Coordinator) and head is self.built.head
        return self.built


def answering_policy(options: AskOptions, pool: Pool,
                     coordinator: Coordinator | ReaderSource | None) -> tuple[Policy, int, bool, dict[str, Any]]:
    """Who answers (`answer_mode`) as a policy (policies/), with its turn budget, decision mode
    and the run record's fields that say how (module docstring)."""
    mode = answer_mode(options, pool.config)
    if mode == "conductor":
        spec = options.conductor_spec()
        how = {"mode": "conductor", "conductor_depth": spec.depth, "head": None, "backbone": None, "greedy": None,
               "max_turns": None}
        return registry.make("conductor", spec), 0, False, how
    if mode == "agree":
        max_turns = options.max_turns or AGREE_TURNS
        how = {"mode": "agree", "head": None, "backbone": None, "greedy": None, "max_turns": max_turns}
        return registry.make("fixed", agree(pool.names)), max_turns, False, how
    assert coordinator is not None
    head = coordinator.head
    max_turns = turn_budget(options.max_turns, head)
    greedy = options.greedy if options.greedy is not None else default_greedy(head)
    how = {"mode": "coordinator", "head": {"name": head.manifest.get("name"), "trained": head.learned},
           "backbone": coordinator.backbone_ref, "greedy": greedy, "max_turns": max_turns}
    return registry.policy_of(head, coordinator.backbone_ref), max_turns, greedy, how


def _answer(
    question: str, pool: Pool, coordinator: Coordinator | ReaderSource | None, options: AskOptions,
    context: Sequence[ChatMessage],
    kind: str | None, examples: Examples | None, episode_seed: int, usable: set[str], progress: ProgressFn,
) -> tuple[Transcript, dict[str, Any]]:
    """Play the question with the answering policy. Returns the transcript and the run
    record's fields that say how (module docstring)."""
    policy, max_turns, greedy, how = answering_policy(options, pool, coordinator)
    episode = Episode(question, seed=episode_seed, max_turns=max_turns, greedy=greedy, kind=kind, examples=examples,
                      context=context, usable=usable, progress=progress, token_budget=options.token_budget,
                      cost_budget=options.cost_budget)
    transcript = policy.play(_Built(pool, coordinator), episode)
    if transcript.workflow is not None:  # the conductor that wrote it
        how = {**how, "conductor": transcript.workflow["conductor"]}
    return transcript, how


def _record(question: str, pool: Pool, how: dict[str, Any], options: AskOptions, episode_seed: int, kind: str | None,
            examples: Examples | None, transcript: Transcript, answer: str, wall: float) -> dict[str, Any]:
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
        "examples": examples.source if examples else None,
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


def ask(
    question: str | None,
    options: AskOptions,
    progress: ProgressFn | None = None,
    context: Sequence[ChatMessage] = (),
    store: RunStore | None = None,
    built: tuple[Pool, Coordinator | ReaderSource | None] | None = None,
    extra: dict[str, Any] | None = None,
) -> AskResult:
    """Answer `question` (None or "-": read it from stdin, see `read_question`) with the
    coordinated pool and save the run.

    `built` reuses an already built (pool, coordinator) and leaves it open; otherwise both
    are built here and closed before returning, whatever happens. `progress` receives
    AskStarted once they are ready, RunAllocated when the run directory exists, then the
    episode's DecisionMade and TurnPlayed (events.py). `extra` adds fields to the run record
    (e.g. {"via": "serve"}). Nothing is saved if the episode fails, is interrupted, or no member
    answered (`refuse_unanswered`)."""
    question = read_question(question)
    pool, coordinator = built or build(options)
    store = store or RunStore()
    emit = progress or quiet
    try:
        # The one check of the exclusions and of the question against every context, before
        # any model file is located and before a run exists (serve answers errors plainly then).
        usable = usable_models(pool, question, options.exclude, context)
        pool.check_assets()
        emit(_started(pool, coordinator, options))
        start = time.perf_counter()
        kind = guess_kind(question)
        episode_seed = question_seed(options.seed, question, context)
        examples = question_examples(question, kind)
        with store.new_run() as run_dir, journal_to(run_dir / JOURNAL):
            emit(RunAllocated(run_dir.name))
            transcript, how = _answer(question, pool, coordinator, options, context, kind, examples, episode_seed,
                                      usable, emit)
            refuse_unanswered(transcript, pool)
            wall = time.perf_counter() - start
            answer = answer_text(transcript.answer, kind)
            record = {**_record(question, pool, how, options, episode_seed, kind, examples, transcript, answer,
                                wall), **(extra or {})}
            store.save(run_dir, record)
    finally:
        if built is None:
            pool.close()
            if coordinator is not None:
                coordinator.close()
    return AskResult.of_record(run_dir.name, record)
