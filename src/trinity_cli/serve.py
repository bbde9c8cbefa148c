"""`trinity serve`: the coordinated pool as one OpenAI-compatible model.

`create_app(options)` builds a FastAPI app (pool loaded and default head resolved up
front, so a bad pool, head or key variable fails at start, not on the first request);
`run(options)` serves it with uvicorn. FastAPI, Starlette and anyio are imported by this
module alone, which `cli.py` imports only inside the `serve` command, so `trinity --help`
stays instant.

Endpoints
    GET  /v1/models
        {"object": "list", "data": [{"id", "object": "model", "created", "owned_by": "trinity"}]}
        ids: "trinity" (the head given with --head, else the default head) and
        "trinity/HEAD" for "untrained" and every available head made for this pool.
    POST /v1/chat/completions
        An OpenAI chat completion request. The last message must be the user's: it is the
        task; earlier messages are context. Content is a string or a list of text parts;
        roles are system, developer (read as system), user and assistant.
        Extensions: `max_turns` (int 1..50, default --max-turns), `exclude` (model names
        to route around), `max_tokens_total` and `max_cost_usd` (ceilings for the whole
        episode), `seed` (int >= 0, the coordinator's sampling; default 0).
        The pool's own generation settings apply: temperature, top_p, max_tokens, stop
        and the like are accepted and ignored; `n` other than 1 and `tools` are refused.

Response (non-streaming): `chat.completion` with one choice whose content is the
episode's answer, `usage` summed over every pool call of the episode, finish_reason
"stop" ("length" when a ceiling ended the episode before any answer), and a `trinity`
field {"run", "head", "turns": [{"model", "role", "verdict"}], "accepted",
"stop_reason", "cost_usd"}. Header `X-Trinity-Run: run-N` names the saved run
(`trinity inspect run-N` replays it; the record has "via": "serve"). The completion id
is "chatcmpl-run-N".

Streaming (`"stream": true`): `text/event-stream`, sent once the run is allocated (its
id in `X-Trinity-Run`). First a chunk with delta {"role": "assistant", "content": ""};
then, as the episode goes, SSE comment lines that clients ignore:
`: turn 1 m0 as worker…` when the coordinator decides and `: turn 1 m0 worker 12->34 tok
0.5s [ACCEPT]` when the turn is done; then the answer as content deltas (one per line),
a chunk with delta {} and the finish_reason (with the `trinity` field), a chunk with
`"choices": []` and `usage` when `stream_options.include_usage` is true, and
`data: [DONE]`. An error after the stream started is one `data: {"error": {...}}` event,
and the stream ends without [DONE]; the run is then not saved.

Errors: always JSON `{"error": {"message", "type", "param", "code"}}`, never a traceback.
    400 invalid_request_error: bad JSON, missing or empty messages, no user message,
        oversize messages (code messages_too_long), bad extension values, unknown
        `exclude` name or every model excluded, a task no model's context can hold
        (code context_length_exceeded)
    401 invalid_request_error, code invalid_api_key: missing or wrong bearer token
    404 not_found_error, code model_not_found: a model id not in /v1/models
    413 invalid_request_error, code request_too_large: body over `max_body_bytes`
    503 server_error, code backend_unavailable: a pool model could not be reached
        (the server keeps running); code server_busy: `max_queue` requests are waiting
    500 server_error: any other failure (its message; details in the server's log)

Auth: with `api_key_env`, the token is read from that environment variable once, at
start (unset or empty: `ConfigError`), and every request needs
`Authorization: Bearer <token>` (compared in constant time), or it is answered 401
before anything runs. The token is never printed or logged.

Concurrency: a llama.cpp context is not thread-safe, so episodes run one at a time,
each in a worker thread (the event loop stays free); other requests queue, up to
`max_queue` of them. A client that disconnects does not stop its episode: it runs to
the end and is saved.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import ipaddress
import json
import logging
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.responses import Response

from trinity_cli import ask as ask_mod
from trinity_cli.config import load_pool
from trinity_cli.coordinator.head import available_heads
from trinity_cli.coordinator.policy import Coordinator, resolve_head
from trinity_cli.episode import usable_models
from trinity_cli.errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    ContextOverflow,
    HeadMismatch,
    NotFound,
    TrinityError,
    did_you_mean,
)
from trinity_cli.messages import ChatMessage, Turn
from trinity_cli.pool import open_pool
from trinity_cli.store import RunStore

log = logging.getLogger(__name__)

MODEL = "trinity"
MAX_TURNS_LIMIT = 50
MAX_MESSAGES = 256
MAX_MESSAGE_CHARS = 200_000  # all messages together; the 1 MiB body limit comes first for most
CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}

Emit = Callable[[str, Any], None]


@dataclass
class ServeOptions:
    """What `trinity serve` was started with. `head` None: the default head."""

    pool: str | None = None
    head: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    api_key_env: str | None = None
    max_turns: int = 5
    backbone: str | None = None
    device: str = "auto"
    use_cache: bool = True
    max_body_bytes: int = 1 << 20
    max_queue: int = 64


class ApiError(Exception):
    """An error answered as an OpenAI-style JSON body with `status`."""

    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def _bad(message: str, param: str | None = None, code: str | None = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def api_error(exc: BaseException) -> ApiError:
    """The HTTP answer for an error raised while serving a request."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BackendUnavailable):
        return ApiError(503, str(exc), "server_error", code="backend_unavailable")
    if isinstance(exc, ContextOverflow):
        return ApiError(400, str(exc), param="messages", code="context_length_exceeded")
    if isinstance(exc, BackendError):
        return ApiError(500, str(exc), "server_error", code="backend_error")
    if isinstance(exc, NotFound):
        return ApiError(404, str(exc), "not_found_error", param="model", code="model_not_found")
    if isinstance(exc, (ConfigError, HeadMismatch)):
        return ApiError(400, str(exc), code="invalid_request")
    if isinstance(exc, TrinityError):
        return ApiError(500, str(exc), "server_error", code="trinity_error")
    log.error("request failed", exc_info=(type(exc), exc, exc.__traceback__))
    return ApiError(500, f"internal error ({type(exc).__name__}); see the server's log", "server_error")


# -- requests ---------------------------------------------------------------------------


@dataclass
class ChatRequest:
    """A validated chat completion request. `head` None: the server's default head."""

    model: str
    head: str | None
    task: str
    context: list[ChatMessage]
    stream: bool = False
    include_usage: bool = False
    max_turns: int = 5
    exclude: list[str] = field(default_factory=list)
    token_budget: int | None = None
    cost_budget: float | None = None
    seed: int = 0


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise _bad(f"{where}: only text content parts are supported", "messages")
            texts.append(part["text"])
        return "\n".join(texts)
    raise _bad(f"{where} must be a string or a list of text parts", "messages")


def parse_messages(raw: Any) -> tuple[str, list[ChatMessage]]:
    """(task, context) from an OpenAI `messages` list; raises `ApiError` 400."""
    if not isinstance(raw, list) or not raw:
        raise _bad("'messages' must be a non-empty list of {role, content} objects", "messages")
    if len(raw) > MAX_MESSAGES:
        raise _bad(f"too many messages ({len(raw)}, at most {MAX_MESSAGES})", "messages", "messages_too_long")
    messages = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise _bad(f"messages[{i}] must be an object with 'role' and 'content'", "messages")
        role = item.get("role")
        if role not in CHAT_ROLES:
            raise _bad(f"messages[{i}]: role {role!r} is not supported (use system, user or assistant)", "messages")
        messages.append(ChatMessage(CHAT_ROLES[role], _text(item.get("content"), f"messages[{i}].content")))
    size = sum(len(m.content) for m in messages)
    if size > MAX_MESSAGE_CHARS:
        raise _bad(
            f"the messages hold {size} characters, at most {MAX_MESSAGE_CHARS} are accepted",
            "messages",
            "messages_too_long",
        )
    if not any(m.role == "user" for m in messages):
        raise _bad("no user message: the last user message is the task", "messages")
    if messages[-1].role != "user":
        raise _bad(
            "the last message must be the user's: it is the task, earlier messages are context", "messages"
        )
    task = messages[-1].content.strip()
    if not task:
        raise _bad("the last user message is empty", "messages")
    return task, messages[:-1]


def parse_request(
    body: bytes, pool_models: list[str], served: list[str], default_max_turns: int = 5
) -> ChatRequest:
    """Validate a chat completion request body against the pool's models and the served
    model ids; raises `ApiError` (400, or 404 for an unknown model)."""
    try:
        data = json.loads(body)
    except ValueError:
        raise _bad("the request body is not valid JSON", code="invalid_json") from None
    if not isinstance(data, dict):
        raise _bad("the request body must be a JSON object", code="invalid_json")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise _bad(f"'model' is required: use {MODEL!r} or one of GET /v1/models", "model")
    if model not in served:
        raise ApiError(
            404,
            f"model {model!r} is not served here ({did_you_mean(model, served)})",
            "not_found_error",
            "model",
            "model_not_found",
        )
    head = model.partition("/")[2] or None
    task, context = parse_messages(data.get("messages"))
    if data.get("n") not in (None, 1):
        raise _bad("only n=1 is supported: the episode gives one answer", "n")
    for name in ("tools", "functions"):
        if data.get(name):
            raise _bad(f"'{name}' is not supported by trinity serve", name)
    stream = data.get("stream") or False
    if not isinstance(stream, bool):
        raise _bad("'stream' must be true or false", "stream")
    stream_options = data.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise _bad("'stream_options' must be an object", "stream_options")
    max_turns = data.get("max_turns", default_max_turns)
    if not _is_int(max_turns) or not 1 <= max_turns <= MAX_TURNS_LIMIT:
        raise _bad(f"'max_turns' must be an integer from 1 to {MAX_TURNS_LIMIT}", "max_turns")
    exclude = data.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(x, str) for x in exclude):
        raise _bad("'exclude' must be a list of model names", "exclude")
    for name in exclude:
        if name not in pool_models:
            raise _bad(f"exclude: the pool has no model {name!r} ({did_you_mean(name, pool_models)})", "exclude")
    if set(exclude) >= set(pool_models):
        raise _bad("every model of the pool is excluded: exclude fewer models", "exclude")
    token_budget = data.get("max_tokens_total")
    if token_budget is not None and (not _is_int(token_budget) or token_budget < 1):
        raise _bad("'max_tokens_total' must be a positive integer", "max_tokens_total")
    cost_budget = data.get("max_cost_usd")
    if cost_budget is not None and (
        isinstance(cost_budget, bool)
        or not isinstance(cost_budget, (int, float))
        or not math.isfinite(cost_budget)
        or cost_budget <= 0
    ):
        raise _bad("'max_cost_usd' must be a positive number", "max_cost_usd")
    seed = data.get("seed")
    if seed is not None and (not _is_int(seed) or seed < 0):
        raise _bad("'seed' must be a non-negative integer", "seed")
    return ChatRequest(
        model=model,
        head=head,
        task=task,
        context=context,
        stream=stream,
        include_usage=bool(stream_options.get("include_usage")),
        max_turns=max_turns,
        exclude=list(dict.fromkeys(exclude)),
        token_budget=token_budget,
        cost_budget=float(cost_budget) if cost_budget is not None else None,
        seed=seed or 0,
    )


# -- the served pool --------------------------------------------------------------------


class _AnnouncingStore(RunStore):
    """A run store that reports each run id as soon as it is allocated."""

    def __init__(self, on_allocate: Callable[[str], None]) -> None:
        super().__init__()
        self._on_allocate = on_allocate

    def allocate(self) -> Path:
        path = super().allocate()
        self._on_allocate(path.name)
        return path


class ServedPool:
    """The pool, loaded once, and one coordinator per head (built on first use, cached).

    `answer` runs one episode at a time (a lock held for the whole episode), since
    in-process models are not thread-safe; call it from worker threads.
    """

    def __init__(self, options: ServeOptions, verbose: bool = False) -> None:
        self.options = options
        self.verbose = verbose
        self.token = _read_token(options.api_key_env)
        self.config = load_pool(options.pool)
        self.pool = open_pool(self.config, options.use_cache)
        self._coordinators: dict[str | None, Coordinator] = {}
        self._heads_lock = threading.Lock()
        self._episode_lock = threading.Lock()
        self.pending = 0  # requests admitted and not finished; touched on the event loop only
        try:
            self.pool.check_assets()
            self.default_head = str(self.coordinator(None).head.manifest.get("name"))
        except BaseException:
            self.close()
            raise

    def served_models(self) -> list[str]:
        """The model ids: "trinity", then "trinity/HEAD" for "untrained" and each head made
        for this pool (its manifest names the pool's models, in order)."""
        heads = ["untrained"]
        for name, directory in available_heads().items():
            try:
                manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
                fits = list(manifest["pool"]["models"]) == self.config.names
            except (OSError, ValueError, KeyError, TypeError):
                fits = False
            if fits and name not in heads:
                heads.append(name)
        return [MODEL, *(f"{MODEL}/{h}" for h in heads)]

    def coordinator(self, head: str | None) -> Coordinator:
        """The coordinator for head name `head` (None: --head, else the default head)."""
        key = head if head is not None else self.options.head
        with self._heads_lock:
            if key not in self._coordinators:
                found = resolve_head(key, self.config.name, self.config.names, self.options.backbone)
                self._coordinators[key] = Coordinator(
                    found, backbone_ref=self.options.backbone, device=self.options.device
                )
            return self._coordinators[key]

    def admit(self) -> None:
        """Count one more queued request, or refuse it (503) when `max_queue` are waiting."""
        if self.pending >= self.options.max_queue:
            raise ApiError(
                503,
                f"server busy: {self.pending} requests are queued, try again shortly",
                "server_error",
                code="server_busy",
                headers={"Retry-After": "5"},
            )
        self.pending += 1

    def answer(self, request: ChatRequest, emit: Emit | None = None) -> ask_mod.AskResult:
        """Run one episode for `request` and save it (blocking). `emit(kind, payload)`
        receives ("started", run_id), ("decision", (index, Decision)) and ("turn", Turn)."""
        notify = emit or _ignore
        try:
            coordinator = self.coordinator(request.head)
            with self._episode_lock:
                # Checked before a run is allocated, so these errors come before any stream starts.
                usable_models(self.pool, request.task, request.exclude, request.context)
                options = ask_mod.AskOptions(
                    pool=self.options.pool,
                    head=request.head or self.options.head,
                    backbone=self.options.backbone,
                    device=self.options.device,
                    max_turns=request.max_turns,
                    seed=request.seed,
                    exclude=request.exclude,
                    use_cache=self.options.use_cache,
                    token_budget=request.token_budget,
                    cost_budget=request.cost_budget,
                )
                result = ask_mod.ask(
                    request.task,
                    options,
                    on_decision=lambda index, decision: notify("decision", (index, decision)),
                    on_turn=lambda turn: notify("turn", turn),
                    context=request.context,
                    store=_AnnouncingStore(lambda run_id: notify("started", run_id)),
                    built=(self.pool, coordinator),
                    extra={"via": "serve", "served_model": request.model},
                )
        except TrinityError as exc:
            if self.verbose:
                _say_failure(exc)
            raise
        if self.verbose:
            _say_run(result)
        return result

    def close(self, wait_s: float = 30.0) -> None:
        """Free the models, after the running episode (if any) ends; a model is never
        closed under an episode, so after `wait_s` seconds nothing is closed at all."""
        if not self._episode_lock.acquire(timeout=wait_s):
            log.warning("an episode is still running after %.0f s: models left open", wait_s)
            return
        try:
            self.pool.close()
            for coordinator in self._coordinators.values():
                coordinator.close()
            if self.pool.cache is not None:
                self.pool.cache.close()
        finally:
            self._episode_lock.release()


def _ignore(kind: str, payload: Any) -> None:
    """An `Emit` that drops every event (non-streaming requests)."""


def _read_token(var: str | None) -> str | None:
    if var is None:
        return None
    token = os.environ.get(var)
    if not token:
        raise ConfigError(
            f"--api-key-env {var}: the environment variable is not set",
            f"export {var}=<a secret token> before starting, or leave out --api-key-env",
        )
    return token


# -- responses --------------------------------------------------------------------------


def _usage(result: ask_mod.AskResult) -> dict[str, int]:
    prompt, completion = result.transcript.prompt_tokens, result.transcript.completion_tokens
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _finish_reason(result: ask_mod.AskResult) -> str:
    transcript = result.transcript
    over = transcript.stop_reason in ("token_budget", "cost_budget")
    return "length" if over and transcript.answer is None else "stop"


def _trinity_field(result: ask_mod.AskResult) -> dict[str, Any]:
    transcript = result.transcript
    return {
        "run": result.run_id,
        "head": result.head_name,
        "turns": [{"model": t.model, "role": t.role.value, "verdict": t.verdict} for t in transcript.turns],
        "accepted": transcript.accepted,
        "stop_reason": transcript.stop_reason,
        "cost_usd": transcript.cost_usd,
    }


def completion_body(result: ask_mod.AskResult, model: str) -> dict[str, Any]:
    """The `chat.completion` object for a finished episode."""
    return {
        "id": f"chatcmpl-{result.run_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": result.transcript.answer or ""},
                "logprobs": None,
                "finish_reason": _finish_reason(result),
            }
        ],
        "usage": _usage(result),
        "trinity": _trinity_field(result),
    }


def _sse(data: Any) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _comment(text: str) -> bytes:
    return (": " + " ".join(text.split()) + "\n\n").encode()


def _turn_comment(turn: Turn) -> bytes:
    text = (
        f"turn {turn.index + 1} {turn.model} {turn.role.value} "
        f"{turn.prompt_tokens}->{turn.completion_tokens} tok {turn.latency_s:.1f}s"
    )
    if turn.cached:
        text += " cached"
    if turn.verdict:
        text += f" {turn.verdict}"
    return _comment(text)


def _answer_pieces(answer: str) -> list[str]:
    return answer.splitlines(keepends=True) or [""]


class EpisodeStream(Response):
    """The ASGI response to a `stream: true` request (format in the module docstring).

    Its status is decided by the episode's first event: an error before the run is
    allocated is answered as a plain JSON error; once the run exists, headers go out
    with its id and chunks follow as the episode runs."""

    def __init__(self, served: ServedPool, request: ChatRequest) -> None:
        super().__init__(status_code=200)
        self.served = served
        self.request = request

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        served, request = self.served, self.request
        sender, events = anyio.create_memory_object_stream[tuple[str, Any]](math.inf)

        def emit(kind: str, payload: Any) -> None:  # called from the worker thread
            try:
                anyio.from_thread.run_sync(sender.send_nowait, (kind, payload))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

        async def work() -> None:
            async with sender:
                try:
                    served.admit()
                except ApiError as exc:
                    await sender.send(("error", exc))
                    return
                try:
                    result = await anyio.to_thread.run_sync(served.answer, request, emit)
                except Exception as exc:  # every failure becomes an error event
                    await sender.send(("error", exc))
                else:
                    await sender.send(("done", result))
                finally:
                    served.pending -= 1

        client = _Client(send)
        async with anyio.create_task_group() as group, events:
            group.start_soon(work)
            chunk_id, created = "chatcmpl-pending", int(time.time())
            async for kind, payload in events:
                if not client.started and kind == "error":
                    error = api_error(payload)
                    await JSONResponse(error.body(), error.status, error.headers)(scope, receive, client.send)
                    continue
                if not client.started:
                    run_id = payload if kind == "started" else payload.run_id
                    chunk_id = f"chatcmpl-{run_id}"
                    await client.start(run_id)
                    role = {"role": "assistant", "content": ""}
                    await client.body(_sse(_chunk(chunk_id, created, request.model, role)))
                if kind == "decision":
                    index, decision = payload
                    await client.body(_comment(f"turn {index + 1} {decision.model} as {decision.role.value}…"))
                elif kind == "turn":
                    await client.body(_turn_comment(payload))
                elif kind == "error":
                    await client.body(_sse(api_error(payload).body()))
                elif kind == "done":
                    await client.body(b"".join(_final_chunks(payload, chunk_id, created, request)))
            await client.end()


def _chunk(chunk_id: str, created: int, model: str, delta: dict[str, Any], finish: str | None = None,
           **extra: Any) -> dict[str, Any]:
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        **extra,
    }


def _final_chunks(result: ask_mod.AskResult, chunk_id: str, created: int, request: ChatRequest) -> list[bytes]:
    out = [_sse(_chunk(chunk_id, created, request.model, {"content": piece}))
           for piece in _answer_pieces(result.transcript.answer or "")]
    out.append(_sse(_chunk(chunk_id, created, request.model, {}, _finish_reason(result),
                           trinity=_trinity_field(result))))
    if request.include_usage:
        out.append(_sse({"id": chunk_id, "object": "chat.completion.chunk", "created": created,
                         "model": request.model, "choices": [], "usage": _usage(result)}))
    out.append(b"data: [DONE]\n\n")
    return out


class _Client:
    """The ASGI `send` of one streamed response; stops writing once the client is gone."""

    def __init__(self, send: Any) -> None:
        self._send = send
        self.started = False
        self.finished = False
        self.gone = False

    async def send(self, message: MutableMapping[str, Any]) -> None:
        await self._deliver(message)

    async def _deliver(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.finished = True
        if self.gone:
            return
        try:
            await self._send(message)
        except OSError:  # the episode still runs to its end and is saved
            self.gone = True

    async def start(self, run_id: str) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
            (b"x-trinity-run", run_id.encode()),
        ]
        await self._deliver({"type": "http.response.start", "status": 200, "headers": headers})

    async def body(self, data: bytes) -> None:
        await self._deliver({"type": "http.response.body", "body": data, "more_body": True})

    async def end(self) -> None:
        if self.started and not self.finished:
            await self._deliver({"type": "http.response.body", "body": b"", "more_body": False})


# -- the app ----------------------------------------------------------------------------


def create_app(options: ServeOptions, verbose: bool = False) -> FastAPI:
    """The FastAPI app serving `options.pool` (see the module docstring for the contract).

    The pool and the default head are loaded here, so configuration errors raise
    `TrinityError` now; the pool is closed when the app shuts down (its lifespan)."""
    served = ServedPool(options, verbose=verbose)
    expected = served.token.encode() if served.token else None

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> Any:
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(served.close)  # waits for a running episode

    app = FastAPI(title="trinity", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.served = served

    def check_auth(request: Request) -> None:
        if expected is None:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        given = token.strip().encode("latin-1")  # the raw header bytes, as Starlette decoded them
        if scheme.lower() != "bearer" or not hmac.compare_digest(given, expected):
            raise ApiError(
                401,
                "missing or invalid API key: send 'Authorization: Bearer <token>'",
                param=None,
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )

    async def read_body(request: Request) -> bytes:
        limit = options.max_body_bytes
        too_large = ApiError(413, f"the request body is larger than {limit} bytes", code="request_too_large")
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise too_large
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)

    @app.exception_handler(ApiError)
    async def on_api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), exc.status, exc.headers)

    @app.exception_handler(HTTPException)
    async def on_http_error(_: Request, exc: HTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        body = ApiError(exc.status_code, str(exc.detail), kind).body()
        return JSONResponse(body, exc.status_code, dict(exc.headers or {}))

    @app.get("/v1/models")
    async def list_models(request: Request) -> JSONResponse:
        check_auth(request)
        created = int(time.time())
        data = [{"id": m, "object": "model", "created": created, "owned_by": "trinity"}
                for m in served.served_models()]
        return JSONResponse({"object": "list", "data": data})

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        check_auth(request)
        body = await read_body(request)
        chat = parse_request(body, served.config.names, served.served_models(), options.max_turns)
        if chat.stream:
            return EpisodeStream(served, chat)
        served.admit()
        try:
            result = await anyio.to_thread.run_sync(served.answer, chat, None)
        except Exception as exc:  # every failure becomes an OpenAI-style error
            raise api_error(exc) from None
        finally:
            served.pending -= 1
        return JSONResponse(completion_body(result, chat.model), headers={"X-Trinity-Run": result.run_id})

    return app


# -- running it -------------------------------------------------------------------------


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free one); a clear error when taken."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host}: cannot resolve it ({exc.strerror})", "use an IP such as 127.0.0.1") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        hint = ("another server is using it: pick another --port" if exc.errno == errno.EADDRINUSE
                else "use an address of this machine, such as 127.0.0.1")
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror})", hint) from None
    sock.set_inheritable(True)
    return sock


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/v1"


def _say_start(served: ServedPool, url: str, options: ServeOptions) -> None:
    from rich.text import Text

    from trinity_cli import render

    line = Text("trinity serve ", style="bold")
    line.append(url, style="bold cyan")
    line.append(f"  models: {', '.join(served.served_models())}")
    line.append(f"  pool {served.config.name} ({', '.join(served.config.names)}), head {served.default_head}",
                style="dim")
    line.append("  bearer auth" if served.token else "  no auth", style="dim")
    render.err.print(line, soft_wrap=True)
    if not served.token and not _is_loopback(options.host):
        render.note(f"warning: listening on {options.host} without --api-key-env: anyone who can reach it can use it")


def _say_run(result: ask_mod.AskResult) -> None:
    from trinity_cli import render

    transcript = result.transcript
    route = " ".join(f"{t.model}:{t.role.value}" for t in transcript.turns)
    render.note(
        f"{result.run_id}: {len(transcript.turns)} turns ({route}), {transcript.stop_reason}, "
        f"{transcript.prompt_tokens + transcript.completion_tokens} tokens, {result.wall_s:.1f}s"
    )


def _say_failure(exc: TrinityError) -> None:
    from trinity_cli import render

    render.error(f"request failed: {exc.message}", exc.hint)


def run(options: ServeOptions) -> None:
    """Serve until Ctrl-C: load the pool, bind, print one line (URL and model ids) on
    stderr, run uvicorn. Configuration and bind errors raise `ConfigError` before it starts."""
    import uvicorn

    if options.max_turns < 1 or options.max_turns > MAX_TURNS_LIMIT:
        raise ConfigError(f"--max-turns must be from 1 to {MAX_TURNS_LIMIT}, got {options.max_turns}")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", options.api_key_env or "X"):
        raise ConfigError(f"--api-key-env {options.api_key_env!r} is not an environment variable name")
    sock = _bind(options.host, options.port)
    try:
        app = create_app(options, verbose=True)
        port = sock.getsockname()[1]
        _say_start(app.state.served, _url(options.host, port), options)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                timeout_graceful_shutdown=10)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
