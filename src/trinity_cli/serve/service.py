"""The served pool: loaded once, one coordinator per head (built on first use), one
episode at a time, at most `max_queue` requests waiting."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trinity_cli import ask as ask_mod
from trinity_cli.answer_kinds import KINDS, answer_kind
from trinity_cli.ask import answer as answering
from trinity_cli.ask import conversation as conv_mod
from trinity_cli.conductor.workflow import DEFAULT_DEPTH, ConductorSpec
from trinity_cli.coordinator.head import available_heads
from trinity_cli.errors import ConfigError, TrinityError, option
from trinity_cli.events import ProgressFn, RequestAnswered, RequestFailed, ServeLoading, quiet
from trinity_cli.policies.kinds import HeadEngine
from trinity_cli.policies.registry import answering_kind, policy_kind, policy_names
from trinity_cli.pool.pool import open_pool
from trinity_cli.pool_config import load_pool
from trinity_cli.runs.store import RunStore
from trinity_cli.serve.protocol import MODEL, ApiError, ChatRequest
from trinity_cli.serve.warm import REQUEST_FIELDS

log = logging.getLogger("trinity_cli.serve")

@dataclass
class ServeOptions:
    """What `trinity serve` was started with. `head` None: the default head; `max_turns`
    None: a request without `max_turns` gets its head's training max_turns (head.turn_budget)."""

    pool: str | None = None
    head: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    api_key_env: str | None = None
    max_turns: int | None = None
    backbone: str | None = None
    device: str = "auto"
    use_cache: bool = True
    max_body_bytes: int = 1 << 20
    max_queue: int = 64
    conductor: str | None = None  # who conducts for "trinity/conductor" (None: the pool's)
    conductor_depth: int = DEFAULT_DEPTH
    idle_exit_s: float | None = None  # stop after this long without a request (None: never)


class ServedPool:
    """The pool, loaded once, and one coordinator per head (built on first use, cached).

    `answer` runs one episode at a time (a lock held for the whole episode), since
    in-process models are not thread-safe; call it from worker threads.
    """

    def __init__(self, options: ServeOptions, progress: ProgressFn | None = None) -> None:
        """`progress` (the server's console log; None: quiet) receives RequestAnswered after
        each saved episode, RequestFailed after a request failed with a TrinityError, and
        ServeLoading as start-up goes: ("pool", pool name) before the pool's model files are
        checked (and assembled, the first time), ("backbone", head name) before a trained
        default head's backbone loads (converted once, the first time)."""
        self.options = options
        self.progress = progress or quiet
        self.token = _read_token(options.api_key_env)
        self.config = load_pool(options.pool)
        self.pool = open_pool(self.config, options.use_cache)
        self._engines: dict[tuple[str, str | None], HeadEngine | None] = {}
        self._heads_lock = threading.Lock()
        self._episode_lock = threading.Lock()
        self._prefill_stop = threading.Event()  # set: the computing ahead for a conversation's next message stops
        self.pending = 0  # requests admitted and not finished (admit / finish); on the event loop only
        self.last_active = time.monotonic()  # when a request last came or ended (serve/run.py's idle exit)
        # "trinity" answers as ask does without --mode (ask.answer_mode): a head, or the policy the
        # pool file's `router` names; "trinity/NAME" with each other policy that answers questions.
        self.default_mode = ask_mod.answer_mode(ask_mod.AskOptions(head=options.head), self.config)
        self.modes = [n for n in policy_names(asking=True) if not policy_kind(n).takes_head]
        try:
            reads_head = answering_kind(self.default_mode).takes_head
            self.progress(ServeLoading("pool", self.config.name, "" if reads_head else self.default_mode))
            ConductorSpec(options.conductor, options.conductor_depth).name(self.pool)  # refused now, not per request
            self.pool.check_assets()
            loading = self.pool.preload(self.pool.names)  # the weights load now, beside the backbone
            try:
                self._load_default_head()
            finally:
                if loading is not None:
                    loading.join()
        except BaseException:
            self.close()
            raise

    def _load_default_head(self) -> None:
        """What "trinity" answers with: a policy that reads no head (the pool's `router`), or
        the default head, its backbone loaded now, not on the first request."""
        default = self.engine(self.default_mode, None)
        if default is None:
            self.default_head = f"none ({self.default_mode} procedure)"
            self.default_played = f"the {self.default_mode} procedure (the pool file's router)"
            return
        self.default_head = str(default.head.manifest.get("name"))
        self.default_played = str(default.head.describe())
        if default.loads_backbone:
            self.progress(ServeLoading("backbone", self.default_head))
            default.warm()

    def served_models(self) -> list[str]:
        """The model ids: "trinity", then "trinity/HEAD" for "untrained" and each head made
        for this pool (its manifest names the pool's models, in order), then "trinity/NAME"
        for each policy that answers questions without a head (`modes`: conductor, agree, a
        package's; policies/registry.py); a head of such a name is shadowed."""
        heads = ["untrained"]
        for name, directory in available_heads().items():
            try:
                manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
                fits = list(manifest["pool"]["models"]) == self.config.names
            except (OSError, ValueError, KeyError, TypeError):
                fits = False
            if fits and name not in heads:
                heads.append(name)
        return [MODEL, *(f"{MODEL}/{h}" for h in heads if h not in self.modes), *(f"{MODEL}/{m}" for m in self.modes)]

    def describe_models(self) -> dict[str, str]:
        """Each served model id -> what answers under it, in words (`/v1/models`' descriptions):
        "trinity" as `ask` answers (the default head or reader, and the procedure of each answer
        kind that has its own: `AnswerKind.default_mode`), "trinity/HEAD" its head or reader (as
        its manifest says), "trinity/NAME" the policy's summary."""
        own = [f"{kind.name} questions: the {kind.default_mode} policy"
               for kind in KINDS.usable().values() if kind.default_mode is not None]
        out = {MODEL: "answers as trinity ask does: " + "; ".join([self.default_played, *own])}
        heads = available_heads()
        for model in self.served_models()[1:]:
            name = model.removeprefix(f"{MODEL}/")
            if name in self.modes:
                out[model] = policy_kind(name).summary
            elif name == "untrained":
                out[model] = "untrained head (uniform random routing)"
            else:
                out[model] = _head_words(name, heads[name])
        return out

    def engine(self, mode: str, head: str | None) -> HeadEngine | None:
        """What policy `mode` keeps between questions (policies/kinds.py), built on first use
        and checked against the pool: for a policy that reads a head, the coordinator (or a
        reader's source) of head name `head` (None: --head, else the default head)."""
        kind = answering_kind(mode)
        key = (mode, (head if head is not None else self.options.head) if kind.takes_head else None)
        with self._heads_lock:
            if key not in self._engines:
                asking = ask_mod.AskOptions(head=key[1], backbone=self.options.backbone, device=self.options.device,
                                            mode=mode, conductor=self.options.conductor,
                                            conductor_depth=self.options.conductor_depth)
                self._engines[key] = kind.engine(self.pool, asking)
            return self._engines[key]

    def admit(self) -> None:
        """Count one more queued request, or refuse it (503) when `max_queue` are waiting."""
        if self.pending >= self.options.max_queue:
            raise ApiError(
                503,
                f"server busy: {self.pending} requests are queued, try again shortly",
                "server_error",
                code="server_busy",
                headers={"Retry-After": "5"},
            )
        self.pending += 1
        self.last_active = time.monotonic()

    def finish(self) -> None:
        """An admitted request is answered (or failed)."""
        self.pending -= 1
        self.last_active = time.monotonic()

    def idle_for(self) -> float:
        """Seconds since the last request came or ended, 0 while one is running."""
        return 0.0 if self.pending else time.monotonic() - self.last_active

    def answer(self, request: ChatRequest, progress: ProgressFn | None = None) -> ask_mod.AskResult:
        """Run one episode for `request` and save it (blocking). `progress` receives the
        episode's events (ask.answer.ask): RunAllocated, DecisionMade, TurnPlayed."""
        try:
            # the kind's own procedure when no mode or head is named, as `ask` plays it (kind_default)
            named = ask_mod.AskOptions(mode=request.mode, head=request.head or self.options.head)
            kind = answer_kind(answering.question_kind(request.task, ask_mod.AskOptions(kind=request.kind)))
            mode = ask_mod.answer_mode(answering.kind_default(named, kind), self.config)
            reads_head = answering_kind(mode).takes_head
            coordinator = self.engine(mode, request.head)
            with self._episode_lock:
                # ask checks the exclusions and the contexts before a run is allocated, so those
                # errors come before any stream starts.
                options = ask_mod.AskOptions(
                    pool=self.options.pool,
                    head=(request.head or self.options.head) if reads_head else None,
                    backbone=self.options.backbone,
                    device=self.options.device,
                    max_turns=request.max_turns,
                    seed=request.seed,
                    greedy=request.greedy,
                    exclude=request.exclude,
                    use_cache=self.options.use_cache,
                    token_budget=request.token_budget,
                    cost_budget=request.cost_budget,
                    mode=mode,
                    conductor=self.options.conductor,
                    conductor_depth=self.options.conductor_depth,
                    kind=request.kind,
                )
                result = answering.ask(
                    request.task,
                    options,
                    progress,
                    context=request.context,
                    built=(self.pool, coordinator),
                    extra={"via": "serve", "served_model": request.model},
                )
        except TrinityError as exc:
            self.progress(RequestFailed(exc))
            raise
        self.progress(RequestAnswered(result))
        return result

    def ask_warm(self, question: str, fields: dict[str, Any], progress: ProgressFn | None = None,
                 conversation: str | None = None) -> ask_mod.AskResult:
        """Answer a `trinity ask` that came to this warm server (serve/warm.py) as `ask.answer.ask`
        answers it in process: the server's pool and head, the request's `fields`
        (warm.REQUEST_FIELDS), the same run saved; with `conversation` ("latest" or a run id),
        as that conversation's next message, saved in its run (`continue_conversation`)."""
        unknown = set(fields) - set(REQUEST_FIELDS)
        if unknown:
            raise ConfigError(f"a warm ask request with unknown fields: {', '.join(sorted(unknown))}")
        options = ask_mod.AskOptions(pool=self.options.pool, head=self.options.head, backbone=self.options.backbone,
                                     device=self.options.device, use_cache=self.options.use_cache, **fields)
        if conversation is not None:
            return self.continue_conversation(conversation, question, options, progress)
        coordinator = self.engine(ask_mod.answer_mode(options, self.config), None)
        with self._episode_lock:
            return answering.ask(question, options, progress, built=(self.pool, coordinator))

    def continue_conversation(self, run_id: str | None, question: str, options: ask_mod.AskOptions,
                              progress: ProgressFn | None = None, conv: conv_mod.Conversation | None = None,
                              store: RunStore | None = None) -> ask_mod.AskResult:
        """Answer `question` as the next message of conversation `conv`, or else of run `run_id`
        ("latest", a run id; None: a new one), on the loaded pool, and save the exchange
        (ask/conversation.py): its kind as `message_options` reads it, who answers as `answer`
        chooses for a request (`trinity chat`'s messages and a warm `ask -c`)."""
        self._prefill_stop.set()  # what was computed ahead for this message stays; the rest is not wanted now
        emit = progress or quiet
        store = store or RunStore()
        if conv is None:
            conv = conv_mod.open_conversation(run_id, store, options.system)
        asked = options
        options = conv_mod.message_options(conv, question, options, emit)
        kind = answer_kind(answering.question_kind(question, options))
        mode = ask_mod.answer_mode(answering.kind_default(ask_mod.AskOptions(mode=options.mode, head=options.head),
                                                          kind), self.config)
        engine = self.engine(mode, None)
        with self._episode_lock:
            result = conv_mod.answer(conv, question, replace(options, mode=mode), self.pool, engine, store, emit)
        self._prefill(conv, asked)
        return result

    def _prefill(self, conv: conv_mod.Conversation, options: ask_mod.AskOptions) -> None:
        """Compute ahead, in a thread of its own, the prompt the conversation's next message is
        likely to be answered with (conv_mod.next_calls, Pool.prefill), so its answer starts
        sooner; the next message (or `close`) stops it. It never changes an answer."""
        stop = threading.Event()
        self._prefill_stop = stop
        calls = conv_mod.next_calls(conv, options, self.pool)
        if not calls:
            return

        def run() -> None:
            try:
                self.pool.prefill(calls, stop.is_set)
            except Exception:  # computing ahead only saves time: a failure here loses no answer
                log.debug("computing the next message's prompt ahead failed", exc_info=True)

        threading.Thread(target=run, name="trinity-prefill", daemon=True).start()

    def close(self, wait_s: float = 30.0) -> None:
        """Free the models, after the running episode (if any) ends; a model is never
        closed under an episode, so after `wait_s` seconds nothing is closed at all."""
        self._prefill_stop.set()
        if not self._episode_lock.acquire(timeout=wait_s):
            log.warning("an episode is still running after %.0f s: models left open", wait_s)
            return
        try:
            self.pool.close()
            for engine in self._engines.values():
                if engine is not None:
                    engine.close()
        finally:
            self._episode_lock.release()


def _head_words(name: str, directory: Path) -> str:
    """A served head's description from its manifest alone (nothing is loaded): a reader or a
    head, and how it was made."""
    try:
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"head {name}"
    policy = "reader" if manifest.get("policy") == "reader" else "head"
    made = manifest.get("made")
    return f"{policy} {name}" + (f" ({made})" if isinstance(made, str) else "")


def _read_token(var: str | None) -> str | None:
    if var is None:
        return None
    token = os.environ.get(var)
    if not token:
        raise ConfigError(
            f"{option('api_key_env')} {var}: the environment variable is not set",
            f"export {var}=<a secret token> before starting, or leave out {option('api_key_env')}",
        )
    return token
