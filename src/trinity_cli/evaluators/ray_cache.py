"""The rollout cache shared across a Ray cluster (evaluators/ray_actors.py): `CacheKeeper`, which
serves the driver's cache to the actors with single flight across them, and `KeeperCache`,
an actor's view of it. Plain classes with no `ray` import: evaluators/ray_actors.py makes the keeper
a Ray actor and hands each view `ray.get` to wait for the keeper's answers.

Protocol: an actor's `get` is the keeper's `lookup` (a hit, or None making this attempt the
leader of the key; a lookup of a key another attempt leads waits for it to land); `put` is
`publish` (written into the driver's cache at once, so a driver killed outright loses no
finished call); `release` gives up the keys an attempt leads but did not publish (its call
failed). The driver `abandon`s the attempts whose actors it lost or killed: a lookup of theirs
that reaches the keeper late (Ray orders no calls from different callers, and killing an actor
does not recall what it already sent) must not lead a key, or every later lookup of that key
would wait for a leader that is gone. Why a keeper and not cache entries shipped with the
specs: evaluators/ray_actors.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trinity_cli.messages import Completion
from trinity_cli.pool.rollout_cache import RolloutCache


class CacheKeeper:
    """The driver's rollout cache, served to the actors (an async Ray actor: lookups that wait
    for a call in flight do not block the others).

    `lookup` answers a hit, or makes the caller the leader of that key (None) until it
    `publish`es the reply or `release`s what its attempt leads; a lookup of a key someone
    leads waits for it; an abandoned attempt never leads. `made` remembers which keys each
    attempt computed."""

    def __init__(self, directory: str) -> None:
        self.cache = RolloutCache(Path(directory))
        self.flights: dict[str, tuple[asyncio.Event, str]] = {}  # key -> (set when it lands, leader's attempt)
        self.made: dict[str, list[str]] = {}  # attempt -> keys it computed
        self.abandoned: set[str] = set()  # attempts whose actor the driver lost or killed

    async def lookup(self, key: str, attempt: str) -> Completion | None:
        while key in self.flights:
            await self.flights[key][0].wait()
        hit = self.cache.get(key)
        if hit is None and attempt not in self.abandoned:
            self.flights[key] = (asyncio.Event(), attempt)
        return hit

    async def publish(self, key: str, completion: Completion, attempt: str, request: dict[str, Any]) -> None:
        self.cache.put(key, completion, request)
        self.made.setdefault(attempt, []).append(key)
        self._land(key)

    async def release(self, attempt: str) -> None:
        for key in [k for k, (_, owner) in self.flights.items() if owner == attempt]:
            self._land(key)

    async def abandon(self, attempts: list[str]) -> None:
        """The driver gave these attempts up with their actors: what they lead lands, and a
        lookup of theirs that arrives later leads nothing."""
        self.abandoned.update(attempts)
        for attempt in attempts:
            await self.release(attempt)

    async def made_by(self, attempts: list[str]) -> list[str]:
        return [key for attempt in attempts for key in self.made.get(attempt, [])]

    async def forget(self) -> None:
        self.made.clear()

    async def reset(self, attempts: list[str]) -> None:
        """After the actors were killed (`attempts`: every attempt of the aborted batch, which
        are abandoned): nothing is in flight any more."""
        self.abandoned.update(attempts)
        for key in list(self.flights):
            self._land(key)
        self.made.clear()

    def _land(self, key: str) -> None:
        # A leader given up for dead may still publish later: its key may have landed already.
        flight = self.flights.pop(key, None)
        if flight is not None:
            flight[0].set()


class KeeperCache:
    """An actor's view of the driver's rollout cache (a pool.rollout_cache.ReplyCache): reads
    and writes go to the keeper (nothing is stored on the actor's node). One episode at a
    time: `attempt` names it."""

    def __init__(self, keeper: Any, wait: Callable[[Any], Any]) -> None:
        self.keeper = keeper
        self.wait = wait  # ray.get: the keeper's answer to a remote call
        self.attempt = ""
        self.leading: set[str] = set()
        self._lock = threading.Lock()

    def get(self, key: str) -> Completion | None:
        hit: Completion | None = self.wait(self.keeper.lookup.remote(key, self.attempt))
        if hit is None:
            with self._lock:
                self.leading.add(key)
        return hit

    def put(self, key: str, completion: Completion, request: dict[str, Any]) -> None:
        self.wait(self.keeper.publish.remote(key, completion, self.attempt, request))
        with self._lock:
            self.leading.discard(key)

    def release(self) -> None:
        """Give up the keys this attempt leads but did not publish (its call failed)."""
        if self.leading:
            self.wait(self.keeper.release.remote(self.attempt))
            self.leading.clear()

    def close(self) -> None:
        """Nothing to close: the keeper owns the cache."""
