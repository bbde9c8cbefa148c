"""Models behind an OpenAI-compatible HTTP API: OpenAI, OpenRouter, vLLM, Ollama, llama.cpp's server.

One call is one `POST {base_url}/chat/completions` through a sync `httpx.Client`, created on
first use and closed by `close()`. Contracts:

* The API key is read from the environment variable named by `api_key_env` at call time and
  sent as `Authorization: Bearer ...`; it is never stored on the backend, and never appears
  in a fingerprint, repr, log line or error (server messages that echo it are redacted).
  `api_key_env: null` sends no auth header.
* Transient failures are retried up to `max_retries` times with exponential backoff: HTTP
  408, 429 and 5xx, refused connections, timeouts and dropped connections. The delay before
  retry `n` (0-based) is `BACKOFF_BASE_S * 2**n` plus up to `BACKOFF_BASE_S` of jitter, or the
  server's `Retry-After` when given, never more than `BACKOFF_CAP_S`.
* Redirects are not followed (the key must not travel to another address): a 3xx is an
  error naming where it points. 401/403 -> `AuthError`; 404, or a 400 saying the model does
  not exist -> `ModelNotFound`; 413, or a 400 about the context length -> `ContextOverflow`;
  other 4xx and unusable bodies -> `BackendError` quoting the server (200 characters at most).
* Every failure leaves as a `BackendError` subclass; no httpx exception escapes, not even as
  `__context__`, because httpx exceptions carry the request and so the auth header.
* Calls may come from several threads at once (`--parallel`): they share one client (httpx's
  connection pool), and at most `max_concurrency` of them (pool file; default no cap) hold a
  request to this model at a time, the others waiting for a free slot. A call keeps its slot
  through its retries, so a rate-limited server is not hit harder by waiting calls.
  `latency_s` counts from when the call got its slot.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import httpx
from pydantic import Field

from trinity_cli.backends.base import Backend
from trinity_cli.errors import AuthError, BackendError, BackendUnavailable, ContextOverflow, ModelNotFound
from trinity_cli.member_config import MemberBase
from trinity_cli.messages import ChatMessage, Completion, GenParams

logger = logging.getLogger(__name__)

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
RETRY_STATUS = frozenset({408, 429})
MAX_SERVER_MESSAGE = 200

# Server messages that mean "no such model" (OpenAI/vLLM/Ollama/OpenRouter wordings) ...
_MODEL_MISSING = re.compile(
    r"model_not_found|no such model|unknown model|not a valid model|invalid model"
    r"|model\b.{0,120}\b(does not exist|not found|not exist|is not available)",
    re.IGNORECASE | re.DOTALL,
)
# ... and "the prompt does not fit" (OpenAI, vLLM, llama.cpp's server).
_CONTEXT_FULL = re.compile(
    r"context[ _](length|window|size)|maximum context|too many tokens|prompt is too long",
    re.IGNORECASE,
)


class OpenAIModel(MemberBase):
    """An `openai` member: a model behind an OpenAI-compatible chat-completions API."""

    kind: Literal["openai"]
    base_url: str = Field(pattern=r"^https?://")
    model: str
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    n_ctx: int = Field(default=32768, ge=256)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0)
    max_concurrency: int | None = Field(default=None, ge=1)
    retry_temperature: float = Field(default=0.0, ge=0)
    # The server follows `response_format: {"type": "json_schema", ...}` (OpenAI's structured
    # outputs; vLLM, llama.cpp's server and others): the conductor's workflow is then written
    # under its schema. Off unless said: a server that ignores it would still answer.
    structured_outputs: bool = False


class OpenAIBackend(Backend):
    """One model served over the OpenAI chat-completions API.

    `transport` replaces httpx's network transport (tests pass an `httpx.MockTransport`),
    `sleep` the backoff wait, `rng` the jitter source (a private `random.Random`, so the
    global random state other code seeds is never touched).
    """

    resident = False
    config_model = OpenAIModel
    summary = "a model behind an OpenAI-compatible API (OpenAI, vLLM, Ollama, llama.cpp's server)"

    def __init__(
        self,
        config: OpenAIModel,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(config.name, config.n_ctx)
        self.config = config
        self.base_url = config.base_url.rstrip("/")
        self._transport = transport
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()
        limit = config.max_concurrency
        self._slots: threading.BoundedSemaphore | None = threading.BoundedSemaphore(limit) if limit else None

    def __repr__(self) -> str:
        return f"OpenAIBackend(name={self.name!r}, base_url={self.base_url!r}, model={self.config.model!r})"

    @property
    def fingerprint(self) -> str:
        """`openai:{base_url}|{model}`: the server and the model id, never the key."""
        return f"openai:{self.base_url}|{self.config.model}"

    def supports_json_schema(self) -> bool:
        """When the pool file says the server follows structured outputs (`structured_outputs`)."""
        return self.config.structured_outputs

    def deterministic(self, params: GenParams) -> bool:
        """Only greedy calls (temperature 0) count as deterministic. Servers treat `seed` as
        best effort (OpenAI documents it so; vLLM and others may ignore it), so a sampled
        reply is not a function of the request and is never cached, seed or not."""
        return params.temperature == 0.0

    def count_tokens(self, text: str) -> int:
        """The base class's character estimate (about 3 characters a token, rounded up).

        A remote model's tokenizer is not available here; the estimate errs on the high side
        so transcripts are trimmed before the server would refuse them.
        """
        return super().count_tokens(text)

    def close(self) -> None:
        """Close the HTTP connection pool; the next `chat()` opens a new one."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def chat(self, messages: Sequence[ChatMessage], params: GenParams) -> Completion:
        """Send `messages` with `params` as given and return the first choice.

        `latency_s` is the wall time of the whole call, retries and backoff included. Token
        counts come from the response's `usage`; servers that omit it get an estimate from
        `count_tokens` for the missing counts. `cost_usd` is `price.cost(...)` when the model
        has a price, else None. Raises `AuthError`, `ModelNotFound`, `ContextOverflow`,
        `BackendUnavailable` (after retries) or `BackendError`.
        """
        key = self._api_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if params.json_schema is not None and self.supports_json_schema():
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "reply", "schema": json.loads(params.json_schema)}}

        with self._slots if self._slots is not None else contextlib.nullcontext():
            start = time.perf_counter()
            response = self._post(body, headers, key)
            latency = time.perf_counter() - start
        if response.status_code >= 300:
            raise self._status_error(response, key)
        text, finish_reason, usage = self._parse(response, key)

        prompt_tokens = usage.get("prompt_tokens")
        completion_tokens = usage.get("completion_tokens")
        if not isinstance(prompt_tokens, int):
            prompt_tokens = self.prompt_tokens(messages)
        if not isinstance(completion_tokens, int):
            completion_tokens = self.count_tokens(text) if text else 0
        price = self.config.price
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency,
            finish_reason=finish_reason,
            cost_usd=price.cost(prompt_tokens, completion_tokens) if price is not None else None,
        )

    # -- internals ---------------------------------------------------------------------

    def _where(self) -> str:
        return f"model {self.name!r}: server at {self.base_url}"

    def _api_key(self) -> str | None:
        var = self.config.api_key_env
        if var is None:
            return None
        key = os.environ.get(var, "").strip()
        if not key:
            raise AuthError(f"model {self.name!r}: environment variable {var} is not set", f"export {var}=...")
        return key

    @property
    def client(self) -> httpx.Client:
        with self._client_lock:
            if self._client is None:
                timeout = httpx.Timeout(self.config.timeout_s)
                self._client = httpx.Client(timeout=timeout, transport=self._transport)
            return self._client

    def _post(self, body: dict[str, Any], headers: dict[str, str], key: str | None) -> httpx.Response:
        """POST with retries. Returns the first response that is not worth retrying (2xx or
        a permanent 4xx); raises `BackendUnavailable` once retries are spent.

        httpx exceptions are reduced to strings inside the `except` blocks and errors raised
        only after them, so nothing raised here keeps a reference to the request.
        """
        url = f"{self.base_url}/chat/completions"
        retries = self.config.max_retries
        failure = ""
        hint = ""
        bad_url = False
        for attempt in range(retries + 1):
            retry_after: float | None = None
            try:
                response = self.client.post(url, json=body, headers=headers)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol):
                bad_url = True
            except httpx.TimeoutException:
                failure = f"did not answer within {self.config.timeout_s:g} s"
                hint = "the server is slow or stuck: check it, or raise timeout_s in the pool file"
            except httpx.ConnectError as exc:
                failure = _connect_failure(str(exc), key)
                hint = "is the server running? check base_url in the pool file"
            except httpx.RequestError as exc:
                failure = f"dropped the connection ({type(exc).__name__})"
                hint = "the server or a proxy closed the connection: check the server's logs"
            else:
                status = response.status_code
                if status not in RETRY_STATUS and status < 500:
                    return response
                retry_after = _retry_after(response.headers)
                failure = f"returned {status}"
                message = _server_message(response, key)
                if status == 429:
                    hint = "rate limited: wait and try again, or raise max_retries in the pool file"
                else:
                    hint = "the server is failing: try again later or check its logs"
                if message:
                    failure += f" ({message})"
            if bad_url:
                raise BackendError(
                    f"model {self.name!r}: base_url {self.base_url} is not a usable URL",
                    "check base_url in the pool file",
                )
            if attempt < retries:
                delay = self._backoff(attempt, retry_after)
                logger.info("%s %s; retry %d of %d in %.2f s", self._where(), failure, attempt + 1, retries, delay)
                self._sleep(delay)
        if retries:
            failure += f" after {retries} {'retry' if retries == 1 else 'retries'}"
        raise BackendUnavailable(f"{self._where()} {failure}", hint)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(BACKOFF_CAP_S, max(0.0, retry_after))
        delay = BACKOFF_BASE_S * 2**attempt + self._rng.uniform(0, BACKOFF_BASE_S)
        return min(BACKOFF_CAP_S, delay)

    def _status_error(self, response: httpx.Response, key: str | None) -> BackendError:
        """The error for a response that is neither a success nor worth retrying: a redirect
        (not followed, so the key never travels to another address) or a 4xx."""
        status = response.status_code
        if status < 400:
            location = _truncate(response.headers.get("location", "elsewhere"), 120)
            return BackendError(
                f"{self._where()} redirected the request ({status}) to {location}",
                "set base_url in the pool file to the address the server redirects to",
            )
        message = _server_message(response, key)
        detail = f" ({message})" if message else ""
        if status in (401, 403):
            var = self.config.api_key_env
            hint = (
                f"check the key in ${var}"
                if var
                else "the server wants a key: set api_key_env in the pool file and export that variable"
            )
            return AuthError(f"{self._where()} rejected the request with {status}{detail}", hint)
        # A 400 about the context is checked first: its wording can mention "model" too.
        if status == 413 or (status == 400 and _CONTEXT_FULL.search(message)):
            return ContextOverflow(
                f"{self._where()} refused the prompt as too long{detail}",
                "shorten the conversation or lower max_tokens; set n_ctx in the pool file to the server's",
            )
        if status == 404 or (status == 400 and _MODEL_MISSING.search(message)):
            said = f"{status}: {message}" if message else str(status)
            return ModelNotFound(
                f"{self._where()} has no model {self.config.model!r} ({said})",
                f"check `model:` for {self.name!r} in the pool file, and that base_url is the API root (…/v1)",
            )
        return BackendError(f"{self._where()} returned {status}{detail}", "check the request parameters")

    def _parse(self, response: httpx.Response, key: str | None) -> tuple[str, str, dict[str, Any]]:
        """(text, finish_reason, usage) from a 2xx body; `BackendError` if it is not a completion."""
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None
        choices = data.get("choices") if isinstance(data, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices else None
        message = choice.get("message") if isinstance(choice, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if (
            not isinstance(data, dict)
            or not isinstance(choice, dict)
            or not isinstance(message, dict)
            or not (content is None or isinstance(content, str))
        ):
            problem = "an error" if isinstance(data, dict) and "error" in data else "a malformed response"
            raise BackendError(
                f"{self._where()} returned {problem} with status {response.status_code}: "
                f"{_server_message(response, key)!r}",
                "check that base_url points at an OpenAI-compatible API root (…/v1)",
            )
        usage = data.get("usage")
        finish_reason = choice.get("finish_reason")
        return (
            content or "",
            finish_reason if isinstance(finish_reason, str) else "stop",
            usage if isinstance(usage, dict) else {},
        )


def _truncate(text: str, limit: int = MAX_SERVER_MESSAGE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _redact(text: str, key: str | None) -> str:
    return text.replace(key, "***") if key else text


def _server_message(response: httpx.Response, key: str | None) -> str:
    """The server's error message (OpenAI `error.message`, FastAPI `detail`, or the raw
    body), whitespace-collapsed, key redacted, at most `MAX_SERVER_MESSAGE` characters."""
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    message: Any = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            message = error.get("message") or error.get("code")
        elif isinstance(error, str):
            message = error
        if message is None:
            message = data.get("detail") or data.get("message")
    if not isinstance(message, str):
        message = response.text if data is None else json.dumps(data) if data else ""
    return _truncate(_redact(message, key))


def _connect_failure(description: str, key: str | None) -> str:
    """'refused the connection', or why else a connection could not be opened."""
    if "refused" in description.lower():
        return "refused the connection"
    return f"could not be reached ({_truncate(_redact(description, key), 120)})"


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds from `Retry-After` (delta-seconds or an HTTP date) or OpenAI's `retry-after-ms`."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()
