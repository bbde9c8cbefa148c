"""The pool: member names -> backends, loaded lazily, evicted when memory is bounded, and
every call routed through the rollout cache.

Members that run the same GGUF file with the same load settings (`load_key`) share one
backend, so one loaded llama.cpp model serves every style of those weights.
`max_resident` (pool file) bounds how many in-process backends (loaded files) are loaded
at once; loading one more closes the least recently used. API and scripted models never
count. Every load goes through here: `chat` and `fits` make room first, so counting a
long prompt's tokens cannot load a model behind the pool's back.

Locking: the pool's lock guards only its own tables (backends, LRU, pins, calls in
flight, stats); a backend call runs outside it, so API members answer concurrently, and an
in-process model serialises its own calls with its own lock (one llama.cpp context is not
thread-safe). A backend is pinned while a call (or an exact token count) runs on it, and
only unpinned backends are evicted: a thread that needs room while every loaded backend is
busy waits for one to finish, so `max_resident` holds with concurrent episodes too.

Replay-only (`paths.replay_only()`, or `replay_only=True`): a call the rollout cache does
not hold raises `NotRecorded` naming the member and the call, and no model is loaded.

Preloading (`preload`): `trinity serve` loads the weights its members run on in a thread while
the coordinator loads its backbone (serve/service.py), through the LRU like any load.

Filling log-probabilities (`paths.fill_logprobs()`, or `fill_logprobs=True`): a cached reply
without `logprob_stats` (recorded before they were kept) from a backend that gives them
(`Backend.gives_logprobs`) is made again. When the new reply's text and finish reason are the
recorded ones, the entry is rewritten under the same key with the stats filled in (the key
never holds an output); when they differ, the recorded reply stays as it was, with
`logprob_stats` {"v": 1, "unmatched": true} so it is not made again, and a warning is logged.
Either way the caller gets the recorded text, so nothing a run computes changes. Never in
replay-only mode.

Spending caps (pool/spending.py, `limit_spending`): every model call is checked against the
cap in force before it starts and charged after it.

Single flight: concurrent calls with the same rollout cache key make one model call; the
others wait for it and are then answered by the cache, exactly as they would have been
had they come after it. So N episodes at once make the same model calls, and count the
same cache hits, as the same episodes one after another.

A member that fails: whatever a backend's `chat` raises (a plugin's RuntimeError, an API
member's `BackendError`) leaves `chat` as `MemberFailed`, naming the member, its kind and the
error; the turn machinery records it as a failed turn (episode/turn.py). A failed call is
never cached, counted or charged: the same call is made again when asked again, and a call
waiting on it in single flight makes it itself. Errors that are the command's (`TrinityError`s
that are not `BackendError`s: a missing model file, the sandbox, a spending cap) and Ctrl-C
pass through unchanged.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from trinity_cli import paths, seeds
from trinity_cli.backends import registry
from trinity_cli.backends.base import Backend
from trinity_cli.errors import (
    BackendError,
    ConfigError,
    MemberFailed,
    NotRecorded,
    TrinityError,
    did_you_mean,
    option,
)
from trinity_cli.keyed_cache import content_key
from trinity_cli.messages import ChatMessage, Completion, GenParams
from trinity_cli.pool import spending
from trinity_cli.pool.rollout_cache import KEY_TAG, ReplyCache, RolloutCache, rollout_request
from trinity_cli.pool_config import ModelConfig, PoolConfig

log = logging.getLogger(__name__)


def attempt_seed(seed: int | None, name: str, attempt: int, salt: str) -> int:
    """The sampling seed of member `name`'s `attempt`-th fresh attempt at the task `salt`:
    the first 4 bytes (little-endian, below 2**31) of sha256("<seed>:<name>:<attempt>:<salt>")."""
    return seeds.seed(f"{seed}:{name}:{attempt}:{salt}") & 0x7FFFFFFF


def load_key(model: ModelConfig) -> str:
    """Members with equal keys share one backend (the model config's own `load_key`: GGUF
    members of one weights file and load settings share one loaded model)."""
    return model.load_key()


@dataclass
class PoolStats:
    calls: int = 0
    cache_hits: int = 0
    recorded: int = 0  # of the cache hits, replies imported from a recording
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def count(self, cached: bool, prompt_tokens: int, completion_tokens: int, latency_s: float,
              recorded: bool = False) -> None:
        """Count one call (a cache hit costs no model seconds)."""
        self.calls += 1
        self.cache_hits += int(cached)
        self.recorded += int(cached and recorded)
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.seconds += 0.0 if cached else latency_s


class Pool:
    def __init__(
        self,
        config: PoolConfig,
        cache: ReplyCache | None = None,
        backends: dict[str, Backend] | None = None,
        owns_cache: bool = False,
        replay_only: bool | None = None,
        fill_logprobs: bool | None = None,
    ) -> None:
        """`owns_cache`: `close()` closes `cache` too (open_pool's pools own the cache they open);
        `replay_only`: None reads TRINITY_REPLAY_ONLY, `fill_logprobs`: None reads
        TRINITY_FILL_LOGPROBS (module docstring)."""
        self.config = config
        self.replay_only = paths.replay_only() if replay_only is None else replay_only
        fill = paths.fill_logprobs() if fill_logprobs is None else fill_logprobs
        self.fill_logprobs = fill and not self.replay_only
        self.cache = cache
        self._owns_cache = owns_cache
        # Backends by load key; `backends` (tests) gives members' backends by member name.
        self._keys = {m.name: (m.name if backends and m.name in backends else load_key(m))
                      for m in config.all_models}
        self._backends: dict[str, Backend] = dict(backends or {})
        self._lru: list[str] = []  # load keys of resident backends, least recently used first
        self._pins: Counter[str] = Counter()  # load key -> calls running on it now
        self._flights: dict[str, threading.Event] = {}  # cache key -> set when its model call ends
        self._lock = threading.RLock()
        self._room = threading.Condition(self._lock)  # notified when a pin is released
        self.stats = PoolStats()

    @property
    def names(self) -> list[str]:
        return self.config.names

    def check_names(self, names: Iterable[str], what: str = option("exclude")) -> list[str]:
        out = []
        for name in names:
            if name not in self.names:
                raise ConfigError(
                    f"{what}: the pool {self.config.name!r} has no model {name!r}",
                    did_you_mean(name, self.names),
                )
            out.append(name)
        return out

    def left_after(self, exclude: Iterable[str]) -> list[str]:
        """The members not in `exclude`, in pool order; refuses unknown names and an
        exclusion of every member (the one place that says so)."""
        excluded = set(self.check_names(exclude))
        left = [m for m in self.names if m not in excluded]
        if not left:
            raise ConfigError("every model of the pool is excluded", "exclude fewer models")
        return left

    def check_assets(self) -> None:
        """Locate (and assemble or verify) every local model file now, so a missing or
        broken file is reported before any work starts, not minutes into an episode. In
        replay-only mode no model runs, so nothing is located."""
        if self.replay_only:
            return
        for name in [m.name for m in self.config.all_models]:
            self.backend(name).check_files()  # what the kind declares (Backend.check_files)

    def preload(self, names: Iterable[str]) -> threading.Thread | None:
        """Start loading, in a thread, the resident backends of members `names`, when they all
        fit in `max_resident` at once (else which one is asked first is not known) and none is
        loaded yet; returns the thread (join it before `close`), or None when there is nothing
        to load or in replay-only mode. A load that fails here is left to the first call,
        which makes it again and reports it."""
        if self.replay_only:
            return None
        wanted = {self._keys[n]: n for n in names if self.backend(n).resident}
        with self._room:
            if not wanted or len(wanted) > self.config.max_resident or any(k in self._lru for k in wanted):
                return None

        def load() -> None:
            for name in wanted.values():
                backend = self._acquire(name)
                try:
                    backend.load()
                except Exception as error:  # noqa: BLE001 - the first call loads again and says why
                    log.debug("preloading %s failed: %s", name, error)
                finally:
                    self._release(name)

        thread = threading.Thread(target=load, name="trinity-preload", daemon=True)
        thread.start()
        return thread

    def style(self, name: str) -> str:
        """How member `name` is asked to work: "reason", "direct" or "program"."""
        return self.config.model(name).style

    def params(self, name: str, role: str | None = None, attempt: int = 0, salt: str = "") -> GenParams:
        """Member `name`'s sampling parameters; `role` ("thinker", "worker", "verifier")
        applies the member's `role_max_tokens` cap for that role, if it has one.

        `attempt` > 0 (the member was asked before in this episode) gives a fresh attempt:
        temperature `retry_temperature` (its own `temperature` if that is higher), seed
        `attempt_seed(seed, name, attempt, salt)`, `salt` being the task and conversation.
        The seed depends on nothing else, so the same attempt at the same task is the
        same call whichever procedure or head asks it: one cached reply serves them all,
        and heads compared during evolution see the same samples."""
        model = self.config.model(name)
        caps = {str(r): n for r, n in model.role_max_tokens.items()}
        max_tokens = caps.get(role, model.max_tokens) if role else model.max_tokens
        temperature, seed = model.temperature, model.seed
        if attempt > 0 and max(model.retry_temperature, model.temperature) > 0:
            temperature = max(model.retry_temperature, model.temperature)
            seed = attempt_seed(model.seed, name, attempt, salt)
        return GenParams(max_tokens=max_tokens, temperature=temperature, top_p=model.top_p, seed=seed)

    def backend(self, name: str) -> Backend:
        """Member `name`'s backend, constructed (not loaded) on first use; shared by every
        member with the same `load_key`."""
        with self._lock:
            if name not in self._keys:
                self.config.model(name)  # raises with the close matches
            key = self._keys[name]
            if key not in self._backends:
                self._backends[key] = registry.create(self.config.model(name))
            return self._backends[key]

    def _acquire(self, name: str) -> Backend:
        """Member `name`'s backend, made room for under `max_resident` and pinned until
        `_release(name)`: least recently used unpinned backends are closed first; when
        every loaded backend is pinned, this waits for one to be released."""
        backend = self.backend(name)
        key = self._keys[name]
        with self._room:
            while backend.resident:
                if key in self._lru:
                    self._lru.remove(key)
                    self._lru.append(key)
                    break
                if len(self._lru) < self.config.max_resident:
                    self._lru.append(key)
                    break
                victim = next((k for k in self._lru if not self._pins[k]), None)
                if victim is None:
                    self._room.wait()
                    continue
                self._lru.remove(victim)
                self._backends[victim].close()  # unpinned: no call is running on it
            self._pins[key] += 1
        return backend

    def _release(self, name: str) -> None:
        with self._room:
            self._pins[self._keys[name]] -= 1
            self._room.notify_all()

    def fits(self, name: str, messages: Sequence[ChatMessage], max_tokens: int) -> bool:
        """Whether member `name`'s context holds `messages` plus `max_tokens` of reply.
        A cheap bound answers first; an exact count may load the model, through the LRU."""
        backend = self.backend(name)
        if backend.fits_roughly(messages, max_tokens):
            return True
        backend = self._acquire(name)
        try:
            return backend.fits(messages, max_tokens)
        finally:
            self._release(name)

    def prefill(self, calls: Sequence[tuple[str, Sequence[ChatMessage]]],
                stop: Callable[[], bool] | None = None) -> int:
        """Compute ahead what the calls `calls` (member, messages begun: Backend.prefill) will
        share with later calls, in the order given, once per backend and messages (members
        sharing one model and asked alike: the first), never loading a model for it; until
        `stop()` turns true. Tokens evaluated."""
        done: set[tuple[str, tuple[ChatMessage, ...]]] = set()
        evaluated = 0
        for name, messages in calls:
            key = self._keys[name]
            if (key, tuple(messages)) in done or (stop is not None and stop()):
                continue
            done.add((key, tuple(messages)))
            backend = self.backend(name)
            with self._room:
                if backend.resident and key not in self._lru:  # a model not loaded is not loaded for this
                    continue
                self._pins[key] += 1  # not closed by the LRU under the prefill
            try:
                evaluated += backend.prefill(messages, stop)
            finally:
                self._release(name)
        return evaluated

    def cache_key(self, name: str, messages: Sequence[ChatMessage], params: GenParams | None = None) -> str | None:
        """The rollout cache key of a call to member `name`, or None when the call is not
        cached (no cache, or a call its backend does not answer deterministically:
        `Backend.deterministic`)."""
        request = self._request(name, messages, params)
        return None if request is None else content_key(KEY_TAG, request)

    def _request(self, name: str, messages: Sequence[ChatMessage], params: GenParams | None) -> dict | None:
        """The rollout request (rollout_cache.rollout_request) of a cached call, else None."""
        params = params or self.params(name)
        backend = self.backend(name)
        if self.cache is None or not backend.deterministic(params):
            return None
        return rollout_request(backend.fingerprint, list(messages), params, backend.schedule_tag(messages, params))

    def chat(self, name: str, messages: Sequence[ChatMessage], params: GenParams | None = None,
             on_text: Callable[[str], None] | None = None) -> Completion:
        """One call to model `name`, served from the cache when it has the reply; a call
        identical to one in flight waits for it and is then served from the cache.
        `on_text` receives the reply's text as it is written (a cached reply: all at once);
        it is never part of the call's cache key, and what it raises is raised once the call
        is cached (a progress callback that stops a run does not lose a reply it paid for)."""
        params = params or self.params(name)
        if on_text is None:
            return self._chat(name, messages, params, None)
        written: list[str] = []
        raised: list[Exception] = []

        def write(piece: str) -> None:
            written.append(piece)
            if not raised:
                try:
                    on_text(piece)
                except Exception as error:  # raised once the call is cached: a made call is never lost
                    raised.append(error)

        completion = self._chat(name, messages, params, write)
        if raised:
            raise raised[0]
        if not written:  # served from the cache (or made again only for its log-probabilities)
            on_text(completion.text)
        return completion

    def _chat(self, name: str, messages: Sequence[ChatMessage], params: GenParams,
              on_text: Callable[[str], None] | None) -> Completion:
        request = self._request(name, messages, params)
        if request is None or self.cache is None:
            self._refuse_unrecorded(name, messages, "it is not a cached call")
            completion = self._call(name, messages, params, on_text)
            self._count(completion)
            return completion
        key = content_key(KEY_TAG, request)
        while True:
            with self._lock:
                flight = self._flights.get(key)
                leader = flight is None
                if flight is None:
                    flight = self._flights[key] = threading.Event()
            if not leader:
                flight.wait()
                continue  # its reply is in the cache now (or it failed, and this call leads)
            try:
                hit = self.cache.get(key)
                if hit is not None and self._to_fill(name, hit):
                    completion = self._fill(name, messages, params, hit, key, request)
                    self._count(completion)
                    return completion
                if hit is not None:
                    self._count(hit)
                    return hit
                self._refuse_unrecorded(name, messages, f"no recording holds {key[:19]}")
                completion = self._call(name, messages, params, on_text)
                self.cache.put(key, completion, request)
            finally:
                with self._lock:
                    del self._flights[key]
                flight.set()
            self._count(completion)
            return completion

    def _to_fill(self, name: str, hit: Completion) -> bool:
        return self.fill_logprobs and hit.logprob_stats is None and self.backend(name).gives_logprobs

    def _fill(self, name: str, messages: Sequence[ChatMessage], params: GenParams, hit: Completion,
              key: str, request: dict) -> Completion:
        """Make a recorded call again for its log-probabilities (module docstring); the
        recorded reply, with them when the texts match, counted as a model call."""
        assert self.cache is not None
        again = self._call(name, messages, params)
        recorded = replace(hit, cached=False, recorded=False, latency_s=again.latency_s)
        if again.text == hit.text and again.finish_reason == hit.finish_reason:
            filled = replace(recorded, logprob_stats=again.logprob_stats)
        else:
            log.warning("%s: a recorded reply made again came out different (%s); kept as recorded",
                        name, key[:19])
            filled = replace(recorded, logprob_stats={"v": 1, "unmatched": True})
        self.cache.put(key, replace(filled, latency_s=hit.latency_s), request)
        return filled

    def _refuse_unrecorded(self, name: str, messages: Sequence[ChatMessage], why: str) -> None:
        """In replay-only mode, end the command before a model is called: NotRecorded."""
        if not self.replay_only:
            return
        last = messages[-1].content if messages else ""
        snippet = " ".join(last.split())[:70]
        raise NotRecorded(
            f"replay-only: {name}'s call is not recorded ({why}; {len(messages)} messages, the last "
            f"{snippet!r}{'...' if len(last) > 70 else ''})",
            "import a recording that holds it (trinity recordings import PATH), or run without "
            "--replay-only to call the model",
        )

    def _call(self, name: str, messages: Sequence[ChatMessage], params: GenParams,
              on_text: Callable[[str], None] | None = None) -> Completion:
        """One model call; whatever the backend raises but the command's own errors becomes
        `MemberFailed` (module docstring), and nothing of it is cached or charged."""
        spending.check()
        backend = self._acquire(name)
        try:
            completion = (backend.chat(messages, params) if on_text is None
                          else backend.chat_streaming(messages, params, on_text))
        except Exception as error:
            if isinstance(error, TrinityError) and not isinstance(error, BackendError):
                raise  # the command's to report: a missing file, the sandbox, a cap
            reason = error.message if isinstance(error, TrinityError) else f"{type(error).__name__}: {error}"
            raise MemberFailed(name, self.config.model(name).kind, reason) from error
        finally:
            self._release(name)
        spending.charge(completion)
        return completion

    def _count(self, completion: Completion) -> None:
        with self._lock:
            self.stats.count(completion.cached, completion.prompt_tokens, completion.completion_tokens,
                             completion.latency_s, completion.recorded)

    def close(self) -> None:
        """Free every backend, and the rollout cache when the pool owns it. Idempotent."""
        with self._lock:
            for backend in self._backends.values():
                backend.close()
            self._lru.clear()
            if self._owns_cache and self.cache is not None:
                self.cache.close()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_pool(config: PoolConfig, use_cache: bool = True) -> Pool:
    """The pool of `config` with the shared rollout cache (`cache/rollouts/`; none when
    `use_cache` is False), which it owns: `close()` (or leaving a `with` block) closes both."""
    return Pool(config, cache=RolloutCache() if use_cache else None, owns_cache=True)
