"""The cache keeper's single flight (evaluators/ray_cache.py), driven directly on one event
loop: no Ray, so the orders of arrival that a cluster produces only now and then are forced."""

from __future__ import annotations

import asyncio
from pathlib import Path

from trinity_cli.evaluators.ray_cache import CacheKeeper
from trinity_cli.messages import Completion

REPLY = Completion(text="Answer: 1", prompt_tokens=3, completion_tokens=2, latency_s=0.1)


async def _within(coro, seconds: float = 2.0):
    return await asyncio.wait_for(coro, seconds)


def test_a_second_lookup_waits_for_the_leader_then_hits(tmp_path: Path) -> None:
    async def scenario() -> None:
        keeper = CacheKeeper(str(tmp_path))
        assert await keeper.lookup("k", "1:0:0") is None  # leads k
        follower = asyncio.ensure_future(keeper.lookup("k", "1:1:0"))
        await asyncio.sleep(0.05)
        assert not follower.done()
        await keeper.publish("k", REPLY, "1:0:0", {"messages": []})
        assert (await _within(follower)).text == REPLY.text
        assert await keeper.made_by(["1:0:0"]) == ["k"]

    asyncio.run(scenario())


def test_a_late_lookup_of_a_killed_batch_leads_nothing(tmp_path: Path) -> None:
    # The driver killed batch 1's actors and reset the keeper; a lookup one of them had sent
    # before it died arrives afterwards. It must not lead the key: nobody would ever publish
    # it, and batch 2's lookup of the same key would wait forever.
    async def scenario() -> None:
        keeper = CacheKeeper(str(tmp_path))
        assert await keeper.lookup("a", "1:0:0") is None
        await keeper.reset(["1:0:0", "1:1:0"])
        assert await keeper.lookup("b", "1:1:0") is None  # the late one
        assert await _within(keeper.lookup("b", "2:1:0")) is None  # batch 2 leads b itself
        assert await _within(keeper.lookup("a", "2:0:0")) is None  # and a, given up at the reset

    asyncio.run(scenario())


def test_an_abandoned_attempt_lands_its_keys_and_leads_no_more(tmp_path: Path) -> None:
    async def scenario() -> None:
        keeper = CacheKeeper(str(tmp_path))
        assert await keeper.lookup("a", "1:0:0") is None
        retry = asyncio.ensure_future(keeper.lookup("a", "1:0:1"))  # waits for the lost leader
        await asyncio.sleep(0.05)
        assert not retry.done()
        await keeper.abandon(["1:0:0"])
        assert await _within(retry) is None  # the retry now leads a
        assert await keeper.lookup("b", "1:0:0") is None  # the lost actor's late call
        assert await _within(keeper.lookup("b", "1:2:0")) is None  # leads nothing: b is free

    asyncio.run(scenario())
