"""The pool: shared weights, max_resident counting loaded files, every load through the
LRU, and no pool-wide lock around backend calls."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from trinity_cli.backends.base import Backend
from trinity_cli.messages import ChatMessage, Completion, GenParams
from trinity_cli.pool import pool as pool_module
from trinity_cli.pool.pool import Pool, load_key
from trinity_cli.pool_config import parse_pool

LOADED: list[str] = []  # names of fake in-process backends currently loaded


class FakeResident(Backend):
    """An in-process backend that must be loaded to chat or to count tokens exactly."""

    resident = True

    def __init__(self, config) -> None:
        super().__init__(config.name, config.n_ctx)
        self.loads = 0

    @property
    def fingerprint(self) -> str:
        return f"fake:{self.name}"

    def _load(self) -> None:
        if self.name not in LOADED:
            LOADED.append(self.name)
            self.loads += 1

    def count_tokens(self, text: str) -> int:
        self._load()
        return len(text) // 4 + 1

    def chat(self, messages: Sequence[ChatMessage], params: GenParams) -> Completion:
        self._load()
        return Completion(text=f"reply from {self.name}", prompt_tokens=1, completion_tokens=1, latency_s=0.0)

    def close(self) -> None:
        if self.name in LOADED:
            LOADED.remove(self.name)


def _gguf(name: str, path: str, style: str = "reason", n_ctx: int = 4096) -> dict:
    return {"name": name, "kind": "gguf", "style": style, "weights": {"path": path}, "n_ctx": n_ctx,
            "max_tokens": 64}


def _pool(models: list[dict], max_resident: int, monkeypatch: pytest.MonkeyPatch) -> Pool:
    import yaml

    LOADED.clear()
    monkeypatch.setattr(pool_module.registry, "create", FakeResident)
    config = parse_pool(yaml.safe_dump({"name": "p", "max_resident": max_resident, "models": models}), "p.yaml")
    return Pool(config)


def test_members_on_one_file_share_one_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _pool([_gguf("a-reason", "/m/a.gguf"), _gguf("a-direct", "/m/a.gguf", "direct"),
                  _gguf("b", "/m/b.gguf")], 1, monkeypatch)
    assert pool.backend("a-reason") is pool.backend("a-direct")
    assert pool.backend("a-reason") is not pool.backend("b")
    assert pool.style("a-direct") == "direct" and pool.style("b") == "reason"
    pool.chat("a-reason", [ChatMessage("user", "hi")])
    pool.chat("a-direct", [ChatMessage("user", "hi")])
    # Two members, one loaded file: max_resident 1 is not exceeded and nothing reloads.
    assert LOADED == ["a-reason"] and len(pool._lru) == 1
    assert pool.backend("a-direct").loads == 1
    pool.chat("b", [ChatMessage("user", "hi")])
    assert LOADED == ["b"]


def test_load_key_separates_load_settings() -> None:
    base = parse_pool(
        "name: p\nmodels:\n"
        "  - {name: a, kind: gguf, weights: {path: /m/a.gguf}, n_ctx: 4096}\n"
        "  - {name: b, kind: gguf, weights: {path: /m/a.gguf}, n_ctx: 2048}\n"
        "  - {name: c, kind: gguf, weights: {path: /m/a.gguf}, n_ctx: 4096, style: program, max_tokens: 9}\n",
        "p.yaml",
    )
    a, b, c = base.models
    assert load_key(a) != load_key(b)  # another context size is another llama.cpp load
    assert load_key(a) == load_key(c)  # style and max_tokens are per call, not per load


def test_exact_token_counts_load_through_the_lru(monkeypatch: pytest.MonkeyPatch) -> None:
    # A prompt too long for the cheap bound makes the pool count tokens exactly, which
    # needs the model loaded: that load must respect max_resident like a chat does.
    pool = _pool([_gguf(f"m{i}", f"/m/{i}.gguf", n_ctx=300) for i in range(3)], 1, monkeypatch)
    long = [ChatMessage("user", "word " * 120)]  # ~600 chars: the rough bound says "maybe not"
    for name in pool.names:
        pool.fits(name, long, 16)
        assert len(LOADED) <= 1, LOADED
    assert LOADED == ["m2"]


def test_backend_calls_run_outside_the_pool_lock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Member a's reply waits until member b is being called: with a pool-wide lock held
    # during calls, b could never start and a would time out.
    b_started = threading.Event()

    class Waiting(Backend):
        def __init__(self, config) -> None:
            super().__init__(config.name, 4096)

        @property
        def fingerprint(self) -> str:
            return f"wait:{self.name}"

        def chat(self, messages: Sequence[ChatMessage], params: GenParams) -> Completion:
            if self.name == "a":
                ok = b_started.wait(timeout=10)
                text = "overlapped" if ok else "serialised"
            else:
                b_started.set()
                text = "b"
            return Completion(text=text, prompt_tokens=1, completion_tokens=1, latency_s=0.0)

    import yaml

    monkeypatch.setattr(pool_module.registry, "create", Waiting)
    models = [{"name": n, "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": n} for n in "ab"]
    pool = Pool(parse_pool(yaml.safe_dump({"name": "p", "models": models}), "p.yaml"))
    replies: dict[str, str] = {}
    first = threading.Thread(target=lambda: replies.setdefault("a", pool.chat("a", [ChatMessage("user", "x")]).text))
    first.start()
    replies["b"] = pool.chat("b", [ChatMessage("user", "x")]).text
    first.join(timeout=15)
    assert replies == {"a": "overlapped", "b": "b"}


def test_identical_calls_in_flight_make_one_model_call(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Eight threads ask the same thing at once: one reaches the model, the other seven
    # wait for it and are answered by the cache, as they would be one after another.
    from trinity_cli.pool.rollout_cache import RolloutCache

    started = threading.Event()
    release = threading.Event()
    made: list[str] = []

    class Slow(Backend):
        def __init__(self, config) -> None:
            super().__init__(config.name, 4096)

        @property
        def fingerprint(self) -> str:
            return "slow"

        def chat(self, messages: Sequence[ChatMessage], params: GenParams) -> Completion:
            made.append(messages[-1].content)
            started.set()
            release.wait(timeout=10)
            return Completion(text="done", prompt_tokens=3, completion_tokens=1, latency_s=0.5)

    import yaml

    monkeypatch.setattr(pool_module.registry, "create", Slow)
    config = parse_pool(yaml.safe_dump({"name": "p", "models": [
        {"name": "a", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "a"}]}), "p.yaml")
    pool = Pool(config, cache=RolloutCache(tmp_path / "rollouts"))
    replies: list[Completion] = []
    threads = [threading.Thread(target=lambda: replies.append(pool.chat("a", [ChatMessage("user", "q")])))
               for _ in range(8)]
    for t in threads:
        t.start()
    assert started.wait(timeout=10)
    release.set()
    for t in threads:
        t.join(timeout=10)
    assert made == ["q"]
    assert sorted(r.cached for r in replies) == [False] + [True] * 7
    assert (pool.stats.calls, pool.stats.cache_hits) == (8, 7) and pool.stats.seconds == 0.5
    assert pool.chat("a", [ChatMessage("user", "other")]).cached is False and made == ["q", "other"]


def test_when_the_call_in_flight_fails_a_waiting_call_makes_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from trinity_cli.errors import BackendUnavailable, MemberFailed
    from trinity_cli.pool.rollout_cache import RolloutCache

    waiting = threading.Event()
    attempts: list[int] = []

    class Flaky(Backend):
        def __init__(self, config) -> None:
            super().__init__(config.name, 4096)

        @property
        def fingerprint(self) -> str:
            return "flaky"

        def chat(self, messages: Sequence[ChatMessage], params: GenParams) -> Completion:
            attempts.append(1)
            if len(attempts) == 1:
                waiting.wait(timeout=10)
                raise BackendUnavailable("down")
            return Completion(text="up", prompt_tokens=1, completion_tokens=1, latency_s=0.0)

    import yaml

    monkeypatch.setattr(pool_module.registry, "create", Flaky)
    config = parse_pool(yaml.safe_dump({"name": "p", "models": [
        {"name": "a", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "a"}]}), "p.yaml")
    pool = Pool(config, cache=RolloutCache(tmp_path / "rollouts"))
    outcome: dict[str, object] = {}

    def first() -> None:
        try:
            pool.chat("a", [ChatMessage("user", "q")])
        except MemberFailed as exc:  # the pool names the member (a failed turn in an episode)
            outcome["first"] = exc

    leader = threading.Thread(target=first)
    leader.start()
    while not attempts:
        threading.Event().wait(0.001)
    follower = threading.Thread(target=lambda: outcome.setdefault("second", pool.chat("a", [ChatMessage("user", "q")])))
    follower.start()
    threading.Event().wait(0.05)  # the follower is waiting on the leader's flight now
    waiting.set()
    leader.join(timeout=10)
    follower.join(timeout=10)
    assert str(outcome["first"]) == "member 'a' (kind openai) failed: down"
    assert isinstance(outcome["first"].__cause__, BackendUnavailable)  # type: ignore[attr-defined]
    assert outcome["second"].text == "up" and len(attempts) == 2  # type: ignore[attr-defined]


def test_max_resident_holds_with_concurrent_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    # Six threads call three files with room for one: a file is never evicted while a
    # call runs on it, no more than one is loaded at once, and nobody waits forever.
    import time

    pool = _pool([_gguf(f"m{i}", f"/m/{i}.gguf") for i in range(3)], 1, monkeypatch)
    most = [0]
    original = FakeResident.chat

    def slow_chat(self, messages, params):  # noqa: ANN001, ANN202
        out = original(self, messages, params)
        most[0] = max(most[0], len(LOADED))
        time.sleep(0.005)
        assert self.name in LOADED  # still loaded: not evicted under a running call
        return out

    monkeypatch.setattr(FakeResident, "chat", slow_chat)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for j in range(10):
                pool.chat(f"m{(k + j) % 3}", [ChatMessage("user", f"{k}-{j}")])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads) and not errors
    assert most[0] == 1 and len(pool._lru) == 1 and pool.stats.calls == 60


def test_members_sharing_a_file_pin_it_together_under_concurrent_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two styles of one file and a second file, room for one: pins and the LRU are per
    # loaded file (load key), so a call of one style keeps the file loaded for the other,
    # the two styles never load it twice, and eviction waits for both.
    import time

    pool = _pool([_gguf("a-reason", "/m/a.gguf"), _gguf("a-direct", "/m/a.gguf", "direct"),
                  _gguf("b", "/m/b.gguf")], 1, monkeypatch)
    shared = pool.backend("a-reason")
    most = [0]
    original = FakeResident.chat

    def slow_chat(self, messages, params):  # noqa: ANN001, ANN202
        out = original(self, messages, params)
        most[0] = max(most[0], len(LOADED))
        time.sleep(0.003)
        assert self.name in LOADED  # not evicted under a running call of either style
        return out

    monkeypatch.setattr(FakeResident, "chat", slow_chat)
    errors: list[BaseException] = []
    names = ["a-reason", "a-direct", "a-reason", "b"]

    def work(k: int) -> None:
        try:
            for j in range(12):
                pool.chat(names[(k + j) % 4], [ChatMessage("user", f"{k}-{j}")])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads) and not errors
    assert most[0] == 1 and len(pool._lru) == 1 and pool.stats.calls == 72
    assert set(LOADED) <= {"a-reason", "b"}  # the shared file is loaded under its first member's backend
    assert pool.backend("a-direct") is shared


class SlowLoading(FakeResident):
    """A resident backend whose `load` takes a while and says on which thread it ran."""

    threads: list[str] = []

    def load(self) -> object:
        SlowLoading.threads.append(threading.current_thread().name)
        threading.Event().wait(0.05)
        self._load()
        return None


def test_preload_loads_the_members_weights_in_a_thread_through_the_lru(monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    LOADED.clear()
    SlowLoading.threads = []
    monkeypatch.setattr(pool_module.registry, "create", SlowLoading)
    one_file = [_gguf("a-reason", "/m/a.gguf"), _gguf("a-direct", "/m/a.gguf", "direct")]
    pool = Pool(parse_pool(yaml.safe_dump({"name": "p", "max_resident": 1, "models": one_file}), "p.yaml"))
    thread = pool.preload(pool.names)
    assert thread is not None
    thread.join()
    assert SlowLoading.threads == ["trinity-preload"] and LOADED == ["a-reason"] and len(pool._lru) == 1
    assert pool.preload(pool.names) is None  # loaded already
    pool.chat("a-direct", [ChatMessage("user", "hi")])
    assert pool.backend("a-direct").loads == 1  # the call found it loaded

    # Two files and room for one: which is asked first is not known, so nothing is loaded.
    two = Pool(parse_pool(yaml.safe_dump({"name": "p", "max_resident": 1, "models": [
        _gguf("a", "/m/a.gguf"), _gguf("b", "/m/b.gguf")]}), "p.yaml"))
    assert two.preload(two.names) is None and len(two._lru) == 0
    replaying = Pool(parse_pool(yaml.safe_dump({"name": "p", "models": one_file}), "p.yaml"), replay_only=True)
    assert replaying.preload(replaying.names) is None
