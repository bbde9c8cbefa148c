"""`runtime: server` GGUF members against a stand-in for xllamacpp (no model is loaded):
what the server is started with, how calls and errors map, that calls are not serialised,
that members on one file share one server, and that closing stops it. The real server is
exercised by test_llamaserver_integration.py."""

from __future__ import annotations

import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from trinity_cli.backends import registry
from trinity_cli.backends.llamacpp import LlamaCppBackend
from trinity_cli.backends.llamaserver import LlamaServerBackend
from trinity_cli.errors import BackendError, ConfigError, ContextOverflow
from trinity_cli.messages import ChatMessage, GenParams
from trinity_cli.pool.pool import Pool, load_key
from trinity_cli.pool_config import parse_pool


class FakeServer:
    started: list[FakeServer] = []

    def __init__(self, params: Any) -> None:
        if "broken" in params.model.path:
            raise RuntimeError("Failed to init server, please check the input params.")
        self.params = params
        self.listening_address = "http://127.0.0.1:1"
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.now = self.most = 0
        self.reply: Any = None
        FakeServer.started.append(self)

    def handle_chat_completions(self, request: dict) -> dict:
        with self.lock:
            self.requests.append(request)
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.02)
        with self.lock:
            self.now -= 1
        if self.reply is not None:
            return self.reply
        text = request["messages"][-1]["content"].upper()
        return {"choices": [{"message": {"role": "assistant", "content": f" {text} "}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 2}}


def _namespace() -> types.SimpleNamespace:
    return types.SimpleNamespace(model=types.SimpleNamespace(path=""), cpuparams=types.SimpleNamespace(),
                                 cpuparams_batch=types.SimpleNamespace(), sampling=types.SimpleNamespace(),
                                 kv_unified=True)


@pytest.fixture
def fake_xllamacpp(monkeypatch: pytest.MonkeyPatch) -> type[FakeServer]:
    FakeServer.started = []
    module = types.ModuleType("xllamacpp")
    module.CommonParams = _namespace  # type: ignore[attr-defined]
    module.Server = FakeServer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "xllamacpp", module)
    return FakeServer


def gguf_file(tmp_path: Path, name: str = "m.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(b"GGUF" + b"\0" * 64)
    return path


def pool_for(tmp_path: Path, models: list[dict], max_resident: int = 2) -> Pool:
    text = yaml.safe_dump({"name": "p", "max_resident": max_resident, "models": models})
    return Pool(parse_pool(text, "p.yaml"))


def member(tmp_path: Path, name: str, file: Path, **extra: Any) -> dict:
    return {"name": name, "kind": "gguf", "weights": {"path": str(file)}, "n_ctx": 2048, "n_threads": 2,
            "runtime": "server", "slots": 4, "max_tokens": 64, **extra}


def test_config_and_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # constructing must not import it
    file = gguf_file(tmp_path)
    pool = pool_for(tmp_path, [member(tmp_path, "a", file), member(tmp_path, "b", file, runtime="inprocess")])
    assert isinstance(pool.backend("a"), LlamaServerBackend) and isinstance(pool.backend("b"), LlamaCppBackend)
    config = pool.config
    assert load_key(config.model("a")) != load_key(config.model("b"))
    assert load_key(config.model("a")) != load_key(config.model("a").model_copy(update={"slots": 8}))
    with pytest.raises(ConfigError, match="runtime"):
        pool_for(tmp_path, [member(tmp_path, "c", file, runtime="remote")])
    with pytest.raises(ConfigError, match="slots"):
        pool_for(tmp_path, [member(tmp_path, "c", file, slots=0)])
    assert registry.create(config.model("a")).fingerprint.endswith("|server")


def test_server_settings_calls_and_close(tmp_path: Path, fake_xllamacpp: type[FakeServer]) -> None:
    backend = LlamaServerBackend(parse_pool(yaml.safe_dump({"name": "p", "models": [
        member(tmp_path, "a", gguf_file(tmp_path), seed=5)]}), "p.yaml").models[0])
    backend.count_tokens = lambda text: len(text.split())  # type: ignore[method-assign]
    c = backend.chat([ChatMessage("user", "hello there")], GenParams(max_tokens=32, temperature=0.0, seed=3,
                                                                      stop=("\n\n",)))
    assert (c.text, c.prompt_tokens, c.completion_tokens, c.cached) == ("HELLO THERE", 11, 2, False)
    (server,) = fake_xllamacpp.started
    p = server.params
    # Each of the 4 slots holds n_ctx tokens.
    assert (p.n_parallel, p.n_ctx, p.kv_unified, p.cpuparams.n_threads, p.sampling.seed) == (4, 8192, False, 2, 5)
    assert server.requests[0] == {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 32,
                                  "temperature": 0.0, "top_p": 1.0, "cache_prompt": True, "seed": 3,
                                  "stop": ["\n\n"]}
    server.reply = {"error": {"code": 400, "message": "the request exceeds the available context size"}}
    with pytest.raises(ContextOverflow):
        backend.chat([ChatMessage("user", "x")], GenParams())
    server.reply = {"code": 500, "type": "server_error", "message": "boom"}
    with pytest.raises(BackendError, match="boom"):
        backend.chat([ChatMessage("user", "x")], GenParams())
    with pytest.raises(ContextOverflow):  # refused before it reaches the server
        backend.chat([ChatMessage("user", "word " * 2100)], GenParams())
    backend.close()
    assert not backend.loaded
    server.reply = None
    backend.chat([ChatMessage("user", "again")], GenParams())
    assert len(fake_xllamacpp.started) == 2  # a new server after close


def test_a_file_the_server_cannot_load_is_an_asset_error(tmp_path: Path, fake_xllamacpp) -> None:
    from trinity_cli.errors import AssetError

    config = parse_pool(yaml.safe_dump({"name": "p", "models": [
        member(tmp_path, "a", gguf_file(tmp_path, "broken.gguf"))]}), "p.yaml").models[0]
    with pytest.raises(AssetError, match="could not start"):
        LlamaServerBackend(config).load()


def test_members_on_one_file_share_one_server_and_call_it_at_once(tmp_path: Path, fake_xllamacpp) -> None:
    file = gguf_file(tmp_path)
    pool = pool_for(tmp_path, [member(tmp_path, "reason", file), member(tmp_path, "direct", file, style="direct")])
    assert pool.backend("reason") is pool.backend("direct")
    pool.backend("reason").count_tokens = lambda text: len(text.split())  # type: ignore[method-assign]
    threads = [threading.Thread(target=pool.chat, args=(("reason", "direct")[i % 2], [ChatMessage("user", f"q{i}")]))
               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (server,) = fake_xllamacpp.started
    assert len(server.requests) == 8 and server.most > 1  # no lock of ours around the server
    assert len(pool._lru) == 1
    pool.close()
    assert not pool.backend("reason").loaded


def test_missing_xllamacpp_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    config = parse_pool(yaml.safe_dump({"name": "p", "models": [member(tmp_path, "a", gguf_file(tmp_path))]}),
                        "p.yaml").models[0]
    with pytest.raises(BackendError, match="xllamacpp") as info:
        LlamaServerBackend(config).load()
    assert "pip install xllamacpp" in (info.value.hint or "")


def test_server_fingerprint_names_the_build_batch_and_slots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for in-process GGUF models (test_rollout_cache), a reply cached by one llama.cpp
    build or with other batch or slot settings is not reused; no server starts."""
    from trinity_cli.backends import llamaserver

    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # computing it must not import it
    monkeypatch.setattr(llamaserver, "xllamacpp_version", lambda: "0.2.0")
    file = gguf_file(tmp_path)

    def fingerprint(**extra: Any) -> str:
        return registry.create(pool_for(tmp_path, [member(tmp_path, "a", file, **extra)]).config.model("a")).fingerprint

    base = fingerprint(n_batch=512)
    assert base == fingerprint(n_batch=512)
    assert "xllamacpp 0.2.0" in base and "batch512" in base and "slots4" in base and "threads" not in base
    assert base.endswith("|server")
    assert fingerprint(n_batch=256) != base and fingerprint(n_batch=512, n_threads=4) == base
    assert fingerprint(n_batch=512, slots=8) != base
    monkeypatch.setattr(llamaserver, "xllamacpp_version", lambda: "0.2.1")
    assert fingerprint(n_batch=512) != base
