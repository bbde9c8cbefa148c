"""The pool: shared weights, max_resident counting loaded files, every load through the
LRU, and no pool-wide lock around backend calls."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from trinity_cli import pool as pool_module
from trinity_cli.backends.base import Backend
from trinity_cli.config import parse_pool
from trinity_cli.messages import ChatMessage, Completion, GenParams
from trinity_cli.pool import Pool, load_key

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
    assert LOADED == ["a-reason"] and pool.resident_count == 1
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
