"""The pool: model names -> backends, loaded lazily, evicted when memory is bounded, and
every call routed through the rollout cache.

`max_resident` (pool file) bounds how many in-process models are loaded at once; loading
one more closes the least recently used. API and scripted models never count.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trinity_cli.backends import registry
from trinity_cli.backends.base import Backend
from trinity_cli.config import PoolConfig
from trinity_cli.errors import ConfigError, did_you_mean
from trinity_cli.messages import ChatMessage, Completion, GenParams
from trinity_cli.store import RolloutCache, rollout_key


@dataclass
class PoolStats:
    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


class Pool:
    def __init__(
        self,
        config: PoolConfig,
        cache: RolloutCache | None = None,
        prompt_version: str = "",
        backends: dict[str, Backend] | None = None,
    ) -> None:
        self.config = config
        self.cache = cache
        self.prompt_version = prompt_version
        self._backends: dict[str, Backend] = dict(backends or {})
        self._lru: list[str] = []
        self._lock = threading.RLock()
        self.stats = PoolStats()

    @property
    def names(self) -> list[str]:
        return self.config.names

    def check_names(self, names: Iterable[str], what: str = "--exclude") -> list[str]:
        out = []
        for name in names:
            if name not in self.names:
                raise ConfigError(
                    f"{what}: the pool {self.config.name!r} has no model {name!r}",
                    did_you_mean(name, self.names),
                )
            out.append(name)
        return out

    def check_assets(self) -> None:
        """Locate (and assemble or verify) every local model file now, so a missing or
        broken file is reported before any work starts, not minutes into an episode."""
        for name in self.names:
            backend = self.backend(name)
            path = getattr(backend, "path", None)  # in-process backends expose their file
            if path is not None:
                from trinity_cli import assets

                assets.check_gguf(path)

    def params(self, name: str) -> GenParams:
        model = self.config.model(name)
        return GenParams(
            max_tokens=model.max_tokens, temperature=model.temperature, top_p=model.top_p, seed=model.seed
        )

    def backend(self, name: str) -> Backend:
        with self._lock:
            if name not in self._backends:
                self._backends[name] = registry.create(self.config.model(name))
            return self._backends[name]

    def _make_room_for(self, name: str) -> None:
        backend = self.backend(name)
        if name in self._lru:
            self._lru.remove(name)
        if backend.resident:
            self._lru.append(name)
            while len(self._lru) > self.config.max_resident:
                victim = self._lru.pop(0)
                self._backends[victim].close()

    def chat(self, name: str, messages: Sequence[ChatMessage], params: GenParams | None = None) -> Completion:
        """One call to model `name`, served from the cache when it has the reply."""
        params = params or self.params(name)
        backend = self.backend(name)
        key = None
        if self.cache is not None and backend.deterministic(params):
            key = rollout_key(backend.fingerprint, list(messages), params, self.prompt_version)
            hit = self.cache.get(key)
            if hit is not None:
                self._count(hit)
                return hit
        with self._lock:
            self._make_room_for(name)
            completion = backend.chat(messages, params)
        if key is not None and self.cache is not None:
            self.cache.put(key, completion)
        self._count(completion)
        return completion

    def _count(self, completion: Completion) -> None:
        with self._lock:
            self.stats.calls += 1
            self.stats.cache_hits += int(completion.cached)
            self.stats.prompt_tokens += completion.prompt_tokens
            self.stats.completion_tokens += completion.completion_tokens
            self.stats.seconds += 0.0 if completion.cached else completion.latency_s

    def close(self) -> None:
        for backend in self._backends.values():
            backend.close()
        self._lru.clear()
