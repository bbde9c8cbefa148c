"""The FastAPI app: auth, body limit, the two routes, and streamed answers."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.responses import Response, StreamingResponse

from trinity_cli.ask import AskResult
from trinity_cli.errors import TrinityError
from trinity_cli.events import (
    DecisionMade,
    Event,
    ProgressFn,
    RequestAnswered,
    RequestFailed,
    RunAllocated,
    TextWritten,
    TurnPlayed,
)
from trinity_cli.serve import warm
from trinity_cli.serve.protocol import (
    ApiError,
    ChatRequest,
    api_error,
    completion_body,
    decision_reasoning,
    final_chunks,
    first_chunk,
    parse_request,
    reasoning_chunk,
    sse,
    turn_reasoning,
)
from trinity_cli.serve.service import ServedPool, ServeOptions


async def stream_episode(served: ServedPool, request: ChatRequest) -> Response:
    """The answer to a `stream: true` request (format: serve/__init__.py).

    The episode runs in a worker thread and reports to a queue. Its status is decided by
    its first event, so this waits for that before answering: an error before the run is
    allocated (busy, no model can hold the task, ...) is a plain JSON error; otherwise a
    StreamingResponse goes out with the run id in its headers and the rest of the events
    as chunks. A client that disconnects cancels only the stream: the episode keeps
    running in its thread to its end and is saved."""
    served.admit()  # a 503 here is a plain JSON error
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[Event] = asyncio.Queue()

    def emit(event: Event) -> None:  # called from the worker thread
        if isinstance(event, RunAllocated | DecisionMade | TextWritten | TurnPlayed):
            loop.call_soon_threadsafe(events.put_nowait, event)

    def finished(future: asyncio.Future[AskResult]) -> None:  # on the event loop
        served.finish()
        exc = None if future.cancelled() else future.exception()
        events.put_nowait(RequestFailed(exc) if exc is not None else RequestAnswered(future.result()))

    # Not awaited, and so not cancelled with the response: the episode always runs to its end.
    loop.run_in_executor(None, served.answer, request, emit).add_done_callback(finished)
    first = await events.get()
    if isinstance(first, RequestFailed):
        error = api_error(first.error)
        return JSONResponse(error.body(), error.status, error.headers)
    run_id = first.run if isinstance(first, RunAllocated) else first.result.run_id  # type: ignore[union-attr]
    chunk_id, created = f"chatcmpl-{run_id}", int(time.time())

    async def chunks(event: Event) -> AsyncIterator[bytes]:
        yield first_chunk(chunk_id, created, request.model)
        written = False
        while True:
            match event:
                case DecisionMade(index=index, decision=decision):
                    text = decision_reasoning(index, decision.model, decision.role.value)
                    yield reasoning_chunk(chunk_id, created, request.model, text)
                case TextWritten(text=text):  # the reply as it is written; TurnPlayed then omits it
                    yield reasoning_chunk(chunk_id, created, request.model, text)
                    written = True
                case TurnPlayed(turn=turn):
                    text = turn_reasoning(turn, quote=not written)
                    yield reasoning_chunk(chunk_id, created, request.model, ("\n" if written else "") + text)
                    written = False
                case RequestFailed(error=error):
                    yield sse(api_error(error).body())  # and no [DONE]
                    return
                case RequestAnswered(result=result):
                    yield b"".join(final_chunks(result, chunk_id, created, request))
                    return
            event = await events.get()

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "X-Trinity-Run": run_id}
    return StreamingResponse(chunks(first), media_type="text/event-stream", headers=headers)


async def stream_warm_ask(served: ServedPool, question: str, fields: dict[str, Any],
                          conversation: str | None = None) -> Response:
    """A `trinity ask` from a warm client (serve/warm.py): its events as JSON lines, then
    {"done": RUN_ID} or {"error": {"message", "hint"}}. The episode runs to its end in a
    worker thread even if the client goes away (its run is saved)."""
    served.admit()
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    def emit(event: Event) -> None:  # called from the worker thread
        line = warm.event_line(event)
        if line is not None:
            loop.call_soon_threadsafe(lines.put_nowait, line)

    def finished(future: asyncio.Future[AskResult]) -> None:  # on the event loop
        served.finish()
        exc = None if future.cancelled() else future.exception()
        if exc is None:
            lines.put_nowait({"done": future.result().run_id})
        elif isinstance(exc, TrinityError):
            # With their option marks: the client names the flags that set them (errors.py).
            lines.put_nowait({"error": {"message": exc.raw_message, "hint": exc.raw_hint}})
        else:
            lines.put_nowait({"error": {"message": f"the warm trinity failed: {exc}", "hint": None}})
        lines.put_nowait(None)

    loop.run_in_executor(None, served.ask_warm, question, fields, emit, conversation).add_done_callback(finished)

    async def body() -> AsyncIterator[bytes]:
        while (line := await lines.get()) is not None:
            yield (json.dumps(line) + "\n").encode()

    return StreamingResponse(body(), media_type="application/x-ndjson", headers={"Cache-Control": "no-cache"})


def create_app(options: ServeOptions, progress: ProgressFn | None = None) -> FastAPI:
    """The FastAPI app serving `options.pool` (see serve/__init__.py for the contract);
    `progress` is ServedPool's console log (events.py).

    The pool and the default head are loaded here, so configuration errors raise
    `TrinityError` now; the pool is closed when the app shuts down (its lifespan)."""
    served = ServedPool(options, progress)

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> Any:
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(served.close)  # waits for a running episode

    app = FastAPI(title="trinity", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.served = served
    app.add_exception_handler(ApiError, on_api_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, on_http_error)  # type: ignore[arg-type]
    Routes(served, options).add_to(app)
    return app


async def on_api_error(_: Request, exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), exc.status, exc.headers)


async def on_http_error(_: Request, exc: HTTPException) -> JSONResponse:
    """Starlette's own errors (an unknown path, a wrong method) in the OpenAI shape."""
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    body = ApiError(exc.status_code, str(exc.detail), kind).body()
    return JSONResponse(body, exc.status_code, dict(exc.headers or {}))


@dataclass
class Routes:
    """The routes of one served pool, each behind the bearer token (when the server has one)
    and the body limit."""

    served: ServedPool
    options: ServeOptions

    def add_to(self, app: FastAPI) -> None:
        app.add_api_route("/health", self.health, methods=["GET"])
        app.add_api_route("/trinity/ask", self.warm_ask, methods=["POST"])
        app.add_api_route("/v1/models", self.list_models, methods=["GET"])
        app.add_api_route("/v1/chat/completions", self.chat_completions, methods=["POST"])

    def check_auth(self, request: Request) -> None:
        if not self.served.token:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        given = token.strip().encode("latin-1")  # the raw header bytes, as Starlette decoded them
        if scheme.lower() != "bearer" or not hmac.compare_digest(given, self.served.token.encode()):
            raise ApiError(401, "missing or invalid API key: send 'Authorization: Bearer <token>'", param=None,
                           code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})

    async def read_body(self, request: Request) -> bytes:
        limit = self.options.max_body_bytes
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

    async def health(self) -> JSONResponse:
        return JSONResponse({"ok": True, "pool": self.served.config.name})

    async def warm_ask(self, request: Request) -> Response:
        self.check_auth(request)
        try:
            body = json.loads(await self.read_body(request))
            question, fields = str(body["question"]), dict(body["options"])
            conversation = body.get("conversation")
            if conversation is not None and not isinstance(conversation, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise ApiError(400, "a warm ask request is {\"question\": ..., \"options\": {...}, \"conversation\": "
                                "null or a run}") from None
        return await stream_warm_ask(self.served, question, fields, conversation)

    async def list_models(self, request: Request) -> JSONResponse:
        self.check_auth(request)
        created = int(time.time())
        described = self.served.describe_models()
        data = [{"id": m, "object": "model", "created": created, "owned_by": "trinity",
                 "description": described.get(m, "")} for m in self.served.served_models()]
        return JSONResponse({"object": "list", "data": data})

    async def chat_completions(self, request: Request) -> Any:
        self.check_auth(request)
        body = await self.read_body(request)
        chat = parse_request(body, self.served.config.names, self.served.served_models(), self.options.max_turns,
                             self.served.modes)
        if chat.stream:
            return await stream_episode(self.served, chat)
        self.served.admit()
        try:
            result = await anyio.to_thread.run_sync(self.served.answer, chat, None)
        except Exception as exc:  # every failure becomes an OpenAI-style error
            raise api_error(exc) from None
        finally:
            self.served.finish()
        return JSONResponse(completion_body(result, chat.model, chat.show_work),
                            headers={"X-Trinity-Run": result.run_id})
