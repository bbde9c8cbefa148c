"""OpenAIBackend against a scripted `httpx.MockTransport`: request shape, usage and cost,
retries and backoff, error translation, and that the API key never leaks."""

from __future__ import annotations

import json
import logging
import random
import socket
from collections.abc import Callable

import httpx
import pytest

from trinity_cli.backends.openai_api import BACKOFF_BASE_S, BACKOFF_CAP_S, OpenAIBackend, OpenAIModel
from trinity_cli.errors import (
    AuthError,
    BackendError,
    BackendUnavailable,
    ContextOverflow,
    ModelNotFound,
)
from trinity_cli.member_config import Price
from trinity_cli.messages import ChatMessage, GenParams

KEY_VAR = "TRINITY_TEST_OPENAI_KEY"
KEY = "sk-test-0123456789-very-SECRET-value"
MESSAGES = [ChatMessage("system", "Be brief."), ChatMessage("user", "What is 2 + 2?")]
PARAMS = GenParams(max_tokens=32, temperature=0.0, top_p=0.9, seed=7, stop=("\n\n",))

Handler = Callable[[httpx.Request], httpx.Response]


def config(**overrides: object) -> OpenAIModel:
    fields: dict[str, object] = {
        "kind": "openai",
        "name": "remote",
        "base_url": "http://testserver/v1/",
        "model": "gpt-test",
        "api_key_env": KEY_VAR,
        "max_retries": 2,
        "price": Price(input_per_1k=1.0, output_per_1k=2.0),
    }
    fields.update(overrides)
    return OpenAIModel.model_validate(fields)


class Recorder:
    """Answers requests from a list of handlers (the last one repeats) and keeps them."""

    def __init__(self, *handlers: Handler) -> None:
        self.handlers = list(handlers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        handler = self.handlers[min(len(self.requests), len(self.handlers)) - 1]
        return handler(request)

    def body(self, index: int = 0) -> dict[str, object]:
        data: dict[str, object] = json.loads(self.requests[index].content)
        return data


def completion(text: str = "4", usage: dict[str, int] | None = None, finish: str = "stop") -> Handler:
    payload: dict[str, object] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
    }
    if usage is not None:
        payload["usage"] = usage
    return lambda request: httpx.Response(200, json=payload)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Handler:
    return lambda request: httpx.Response(status, json={"error": {"message": message}}, headers=headers)


def raising(exc: type[httpx.TransportError]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc("boom", request=request)

    return handler


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make(monkeypatch: pytest.MonkeyPatch, sleeps: list[float]) -> Callable[..., OpenAIBackend]:
    monkeypatch.setenv(KEY_VAR, KEY)

    def build(recorder: Recorder, **overrides: object) -> OpenAIBackend:
        return OpenAIBackend(
            config(**overrides),
            transport=httpx.MockTransport(recorder),
            sleep=sleeps.append,
            rng=random.Random(0),
        )

    return build


def assert_no_key(*texts: str) -> None:
    for text in texts:
        assert KEY not in text


def test_success_sends_openai_request_and_reads_usage_and_cost(make: Callable[..., OpenAIBackend]) -> None:
    recorder = Recorder(completion("4", {"prompt_tokens": 12, "completion_tokens": 5}, finish="length"))
    backend = make(recorder)

    result = backend.chat(MESSAGES, PARAMS)

    assert (result.text, result.prompt_tokens, result.completion_tokens) == ("4", 12, 5)
    assert result.finish_reason == "length"
    assert result.cost_usd == pytest.approx((12 * 1.0 + 5 * 2.0) / 1000)
    assert result.latency_s >= 0
    request = recorder.requests[0]
    assert request.method == "POST"
    assert str(request.url) == "http://testserver/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert recorder.body() == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2 + 2?"},
        ],
        "max_tokens": 32,
        "temperature": 0.0,
        "top_p": 0.9,
        "seed": 7,
        "stop": ["\n\n"],
    }


def test_no_key_no_seed_no_stop_no_price(make: Callable[..., OpenAIBackend]) -> None:
    recorder = Recorder(completion("hi", {"prompt_tokens": 3, "completion_tokens": 1}))
    backend = make(recorder, api_key_env=None, price=None)

    result = backend.chat(MESSAGES, GenParams(max_tokens=8, seed=None))

    assert "authorization" not in recorder.requests[0].headers
    assert "seed" not in recorder.body() and "stop" not in recorder.body()
    assert result.cost_usd is None


def test_missing_usage_is_estimated(make: Callable[..., OpenAIBackend]) -> None:
    backend = make(Recorder(completion("four, I think")))

    result = backend.chat(MESSAGES, PARAMS)

    assert result.prompt_tokens == backend.prompt_tokens(MESSAGES)
    assert result.completion_tokens == backend.count_tokens("four, I think")


def test_null_content_reads_as_empty_text(make: Callable[..., OpenAIBackend]) -> None:
    payload = {"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "stop"}]}
    backend = make(Recorder(lambda request: httpx.Response(200, json=payload)))

    assert backend.chat(MESSAGES, PARAMS).text == ""


def test_retries_429_and_5xx_then_succeeds(make: Callable[..., OpenAIBackend], sleeps: list[float]) -> None:
    recorder = Recorder(
        error(429, "slow down", headers={"Retry-After": "2"}),
        error(502, "bad gateway"),
        completion("4", {"prompt_tokens": 12, "completion_tokens": 1}),
    )
    backend = make(recorder)

    assert backend.chat(MESSAGES, PARAMS).text == "4"
    assert len(recorder.requests) == 3
    assert sleeps[0] == 2.0  # Retry-After wins over the computed backoff
    assert 2 * BACKOFF_BASE_S <= sleeps[1] <= 3 * BACKOFF_BASE_S


def test_backoff_doubles_with_jitter_and_is_capped(make: Callable[..., OpenAIBackend], sleeps: list[float]) -> None:
    backend = make(Recorder(error(500, "oops")), max_retries=3)
    with pytest.raises(BackendUnavailable):
        backend.chat(MESSAGES, PARAMS)
    for attempt, delay in enumerate(sleeps):
        assert BACKOFF_BASE_S * 2**attempt <= delay <= BACKOFF_BASE_S * (2**attempt + 1)

    sleeps.clear()
    backend = make(Recorder(error(429, "later", headers={"Retry-After": "3600"})), max_retries=1)
    with pytest.raises(BackendUnavailable):
        backend.chat(MESSAGES, PARAMS)
    assert sleeps == [BACKOFF_CAP_S]


def test_5xx_after_retries_is_unavailable(make: Callable[..., OpenAIBackend], sleeps: list[float]) -> None:
    recorder = Recorder(error(503, "overloaded"))
    backend = make(recorder)

    with pytest.raises(BackendUnavailable) as info:
        backend.chat(MESSAGES, PARAMS)

    assert len(recorder.requests) == 3 and len(sleeps) == 2
    assert info.value.message == (
        "model 'remote': server at http://testserver/v1 returned 503 (overloaded) after 2 retries"
    )
    assert info.value.hint and "try again later" in info.value.hint


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (httpx.ReadTimeout, "did not answer within 120 s"),
        (httpx.RemoteProtocolError, "dropped the connection"),
    ],
)
def test_transport_errors_are_translated(
    make: Callable[..., OpenAIBackend], exc: type[httpx.TransportError], words: str
) -> None:
    backend = make(Recorder(raising(exc)), max_retries=1)

    with pytest.raises(BackendUnavailable) as info:
        backend.chat(MESSAGES, PARAMS)

    assert words in info.value.message and "after 1 retry" in info.value.message
    # No httpx exception (which holds the request, auth header included) stays reachable.
    assert info.value.__context__ is None and info.value.__cause__ is None


@pytest.mark.parametrize("status", [401, 403])
def test_rejected_key_is_auth_error_without_retry(make: Callable[..., OpenAIBackend], status: int) -> None:
    recorder = Recorder(error(status, f"Incorrect API key provided: {KEY}"))
    backend = make(recorder)

    with pytest.raises(AuthError) as info:
        backend.chat(MESSAGES, PARAMS)

    assert len(recorder.requests) == 1
    assert f"rejected the request with {status}" in info.value.message
    assert info.value.hint == f"check the key in ${KEY_VAR}"
    assert_no_key(str(info.value), repr(info.value))
    assert "***" in info.value.message


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (404, "The model `gpt-test` does not exist or you do not have access to it."),  # OpenAI, vLLM
        (404, "model 'gpt-test' not found"),  # Ollama
        (400, "gpt-test is not a valid model ID"),  # OpenRouter
    ],
)
def test_unknown_model_is_model_not_found(make: Callable[..., OpenAIBackend], status: int, message: str) -> None:
    recorder = Recorder(error(status, message))

    with pytest.raises(ModelNotFound) as info:
        make(recorder).chat(MESSAGES, PARAMS)

    assert len(recorder.requests) == 1
    assert "has no model 'gpt-test'" in info.value.message and message in info.value.message
    assert info.value.hint and "`model:`" in info.value.hint


def test_too_long_prompt_is_context_overflow(make: Callable[..., OpenAIBackend]) -> None:
    message = "This model's maximum context length is 2048 tokens. However, you requested 3000 tokens."
    with pytest.raises(ContextOverflow):
        make(Recorder(error(400, message))).chat(MESSAGES, PARAMS)


def test_other_4xx_is_backend_error_with_truncated_server_message(make: Callable[..., OpenAIBackend]) -> None:
    recorder = Recorder(error(422, "temperature must be at most 2. " + "x" * 500))

    with pytest.raises(BackendError) as info:
        make(recorder).chat(MESSAGES, PARAMS)

    assert type(info.value) is BackendError
    assert "returned 422 (temperature must be at most 2. xxx" in info.value.message
    assert len(info.value.message) < 300
    assert len(recorder.requests) == 1


def test_redirect_is_not_followed(make: Callable[..., OpenAIBackend]) -> None:
    moved = httpx.Response(308, headers={"Location": "https://elsewhere.example/v1/chat/completions"})
    recorder = Recorder(lambda request: moved)

    with pytest.raises(BackendError) as info:
        make(recorder).chat(MESSAGES, PARAMS)

    assert len(recorder.requests) == 1
    assert "redirected the request (308) to https://elsewhere.example/v1" in info.value.message


@pytest.mark.parametrize(
    ("response", "words"),
    [
        (httpx.Response(200, text="<html>proxy login</html>"), "malformed response"),
        (httpx.Response(200, json={"choices": []}), "malformed response"),
        (httpx.Response(200, json={"error": {"message": "upstream failed"}}), "an error"),
    ],
)
def test_unusable_2xx_body_is_backend_error(
    make: Callable[..., OpenAIBackend], response: httpx.Response, words: str
) -> None:
    with pytest.raises(BackendError) as info:
        make(Recorder(lambda request: response)).chat(MESSAGES, PARAMS)

    assert type(info.value) is BackendError
    assert words in info.value.message


@pytest.mark.parametrize("value", [None, "", "   "])
def test_unset_key_variable_is_auth_error_before_any_request(
    make: Callable[..., OpenAIBackend], monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv(KEY_VAR)
    else:
        monkeypatch.setenv(KEY_VAR, value)
    recorder = Recorder(completion())

    with pytest.raises(AuthError) as info:
        make(recorder).chat(MESSAGES, PARAMS)

    assert info.value.message == f"model 'remote': environment variable {KEY_VAR} is not set"
    assert info.value.hint == f"export {KEY_VAR}=..."
    assert recorder.requests == []


def test_key_never_leaks(make: Callable[..., OpenAIBackend], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echo = f"bad key {KEY}"
    failures: list[Handler] = [
        error(401, echo),
        error(404, f"model not found for key {KEY}"),
        error(418, echo),
        lambda request: httpx.Response(200, text=echo),
        error(500, echo),
    ]
    texts: list[str] = []
    for handler in failures:
        backend = make(Recorder(handler), max_retries=1)
        with pytest.raises(BackendError) as info:
            backend.chat(MESSAGES, PARAMS)
        texts += [str(info.value), repr(info.value), info.value.hint or ""]
        texts += [repr(backend), backend.fingerprint]

    assert_no_key(*texts, caplog.text)
    assert "retry 1 of 1" in caplog.text  # the retry was logged, redacted


def test_fingerprint_is_normalised_url_and_model(make: Callable[..., OpenAIBackend]) -> None:
    backend = make(Recorder(completion()))

    assert backend.fingerprint == "openai:http://testserver/v1|gpt-test"
    assert backend.count_tokens("abcdefghi") == 4  # the base class's estimate: len // 3 + 1
    assert backend.resident is False


def test_close_and_reuse(make: Callable[..., OpenAIBackend]) -> None:
    recorder = Recorder(completion())
    backend = make(recorder)
    backend.close()  # closing an unused backend is fine

    backend.chat(MESSAGES, PARAMS)
    backend.close()
    backend.chat(MESSAGES, PARAMS)

    assert len(recorder.requests) == 2


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_refused_connection_on_a_closed_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, KEY)
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    backend = OpenAIBackend(config(base_url=base_url, max_retries=0, timeout_s=5))

    with pytest.raises(BackendUnavailable) as info:
        backend.chat(MESSAGES, PARAMS)
    backend.close()

    assert info.value.message == f"model 'remote': server at {base_url} refused the connection"
    assert info.value.hint and "is the server running?" in info.value.hint
    assert info.value.__context__ is None


def test_registry_builds_this_backend() -> None:
    from trinity_cli.backends import registry

    assert isinstance(registry.create(config()), OpenAIBackend)
