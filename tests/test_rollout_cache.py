"""What the rollout cache keys on, and which calls it stores (pool/rollout_cache.py's contract)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from trinity_cli.backends import llamacpp
from trinity_cli.backends.gguf_file import GGUFModel
from trinity_cli.backends.llamacpp import LlamaCppBackend
from trinity_cli.backends.openai_api import OpenAIBackend
from trinity_cli.messages import ChatMessage, GenParams
from trinity_cli.pool.pool import Pool
from trinity_cli.pool.rollout_cache import RolloutCache
from trinity_cli.pool_config import load_pool
from trinity_cli.turns import prompts

from .conftest import write_pool

MESSAGES = [ChatMessage("user", "What is 2 + 2?")]


def gguf_backend(path: Path, **fields: object) -> LlamaCppBackend:
    config = GGUFModel.model_validate({"kind": "gguf", "name": "g", "weights": {"path": str(path)}, **fields})
    return LlamaCppBackend(config)


@pytest.fixture
def fake_gguf(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(range(64)))  # hashed, never loaded
    return path


def test_gguf_fingerprint_changes_with_llama_cpp_version_and_batch_not_threads(
    fake_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llamacpp, "llama_cpp_version", lambda: "0.3.36")
    base = gguf_backend(fake_gguf, n_threads=2, n_batch=512).fingerprint
    assert base == gguf_backend(fake_gguf, n_threads=2, n_batch=512).fingerprint
    assert "llama-cpp-python 0.3.36" in base and "batch512" in base and "threads" not in base
    # Replies do not depend on the threads (gguf_file.py): a Ray actor's 1 thread shares a serial run's cache.
    assert gguf_backend(fake_gguf, n_threads=4, n_batch=512).fingerprint == base
    assert gguf_backend(fake_gguf, n_threads=2, n_batch=256).fingerprint != base
    monkeypatch.setattr(llamacpp, "llama_cpp_version", lambda: "0.3.37")
    assert gguf_backend(fake_gguf, n_threads=2, n_batch=512).fingerprint != base


def test_gguf_default_threads_are_the_cores_used(fake_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trinity_cli.backends import gguf_file

    monkeypatch.setattr(gguf_file.os, "cpu_count", lambda: 6)
    backend = gguf_backend(fake_gguf)
    assert backend.threads == 6
    assert llamacpp.llama_cpp_version() != "none"  # the real version, read without importing llama_cpp


def test_the_fingerprint_needs_no_model_load(fake_gguf: Path) -> None:
    backend = gguf_backend(fake_gguf)
    assert backend.fingerprint.startswith("gguf:")
    assert not backend.loaded


def api_pool(tmp_path: Path, temperature: float, seed: int | None) -> tuple[Pool, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": "4"}}]})

    model = {"name": "api", "kind": "openai", "base_url": "http://testserver/v1", "model": "m",
             "temperature": temperature, "seed": seed}
    config = load_pool(str(write_pool(tmp_path, {"name": "api", "models": [model]})))
    backend = OpenAIBackend(config.models[0], transport=httpx.MockTransport(answer))
    pool = Pool(config, cache=RolloutCache(tmp_path / "cache"),
                backends={"api": backend})
    return pool, seen


@pytest.mark.parametrize("seed", [0, 123, None])
def test_sampled_api_replies_are_never_cached_seed_or_not(tmp_path: Path, seed: int | None) -> None:
    pool, seen = api_pool(tmp_path, temperature=0.7, seed=seed)
    first, second = pool.chat("api", MESSAGES), pool.chat("api", MESSAGES)
    assert len(seen) == 2 and not first.cached and not second.cached
    assert len(pool.cache or []) == 0


def test_greedy_api_replies_are_cached(tmp_path: Path) -> None:
    pool, seen = api_pool(tmp_path, temperature=0.0, seed=None)
    pool.chat("api", MESSAGES)
    again = pool.chat("api", MESSAGES)
    assert len(seen) == 1 and again.cached


def test_seeded_sampling_of_an_in_process_model_is_cached(tmp_path: Path) -> None:
    models = [{"name": "s", "kind": "scripted", "default": "4", "temperature": 0.8, "seed": 5}]
    config = load_pool(str(write_pool(tmp_path, {"name": "s", "models": models})))
    pool = Pool(config, cache=RolloutCache(tmp_path / "cache"))
    pool.chat("s", MESSAGES)
    assert pool.chat("s", MESSAGES).cached
    unseeded = GenParams(temperature=0.8, seed=None)
    pool.chat("s", MESSAGES, unseeded)
    assert not pool.chat("s", MESSAGES, unseeded).cached


def test_a_new_prompt_version_keeps_the_calls_whose_messages_did_not_change(tmp_path: Path, monkeypatch) -> None:
    # The key holds the messages in full, so only re-worded calls miss after a prompt bump.
    models = [{"name": "s", "kind": "scripted", "default": "4"}]
    config = load_pool(str(write_pool(tmp_path, {"name": "s", "models": models})))
    pool = Pool(config, cache=RolloutCache(tmp_path / "cache"))
    before = pool.cache_key("s", MESSAGES)
    monkeypatch.setattr(prompts, "PROMPT_VERSION", "p-next")
    assert pool.cache_key("s", MESSAGES) == before
    assert before is not None and before.startswith("r2:")
