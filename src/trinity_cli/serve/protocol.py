"""The serving protocol as plain functions: validate an OpenAI chat completion request,
map errors to OpenAI-style error bodies, build the `chat.completion` object and the SSE
chunks of a streamed one (formats: serve/__init__.py). No FastAPI here."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from trinity_cli import conversation
from trinity_cli.answer_kinds import KINDS
from trinity_cli.ask import AskResult
from trinity_cli.errors import (
    BackendError,
    BackendUnavailable,
    ConfigError,
    ContextOverflow,
    HeadMismatch,
    MemberFailed,
    NotFound,
    TrinityError,
    did_you_mean,
)
from trinity_cli.messages import ChatMessage, Turn

log = logging.getLogger("trinity_cli.serve")

MODEL = "trinity"
MAX_TURNS_LIMIT = 50
MAX_MESSAGES = 256
MAX_MESSAGE_CHARS = conversation.MAX_CHARS  # all messages together; the 1 MiB body limit comes first for most
CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


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
    if isinstance(exc, (BackendUnavailable, MemberFailed)):  # no member could answer
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
    """A validated chat completion request. `head` None: the server's default head;
    `mode`: the request names `trinity/NAME` for a served policy NAME (policies/registry.py:
    `conductor`, `agree`, a package's), answered by that policy instead of a head."""

    model: str
    head: str | None
    task: str
    context: list[ChatMessage]
    stream: bool = False
    include_usage: bool = False
    max_turns: int | None = None  # None: the server's --max-turns, else the head's (head.turn_budget)
    exclude: list[str] = field(default_factory=list)
    token_budget: int | None = None
    cost_budget: float | None = None
    seed: int = 0
    show_work: bool = False
    greedy: bool | None = None  # None: the default decision mode
    mode: str | None = None
    kind: str | None = None  # the answer kind (answer_kinds/); None: what the question asks for


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
    """(task, context) from an OpenAI `messages` list (conversation.split, as `trinity chat`
    and `ask -c` make them); raises `ApiError` 400."""
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
    try:
        return conversation.split(messages)  # the same as chat's and ask -c's: conversation.py
    except ValueError as exc:
        raise _bad(str(exc), "messages") from None


def parse_request(
    body: bytes, pool_models: list[str], served: list[str], default_max_turns: int | None = None,
    modes: Collection[str] = (),
) -> ChatRequest:
    """Validate a chat completion request body against the pool's models and the served
    model ids; raises `ApiError` (400, or 404 for an unknown model). A request without
    `max_turns` gets `default_max_turns` (None: its head's, resolved when it is played).
    `modes`: the served policy names: `trinity/NAME` for one of them is that policy, any
    other `trinity/NAME` the head NAME."""
    try:
        data = json.loads(body)
    except ValueError:
        raise _bad("the request body is not valid JSON", code="invalid_json") from None
    if not isinstance(data, dict):
        raise _bad("the request body must be a JSON object", code="invalid_json")
    model = _model(data, served)
    named = model.partition("/")[2]
    mode = named if named in modes else None
    task, context = parse_messages(data.get("messages"))
    _refuse_unsupported(data)
    stream_options = _stream_options(data)
    max_turns = _max_turns(data, default_max_turns)
    exclude = _exclude(data, pool_models)
    budgets = _budgets(data)
    seed = _seed(data)
    _refuse_non_boolean_flags(data)
    return ChatRequest(
        model=model,
        head=None if mode is not None else named or None,
        task=task,
        context=context,
        stream=data.get("stream") or False,
        include_usage=bool(stream_options.get("include_usage")),
        max_turns=max_turns,
        exclude=exclude,
        token_budget=budgets[0],
        cost_budget=budgets[1],
        seed=seed,
        show_work=bool(data.get("show_work")),
        greedy=data.get("greedy"),
        mode=mode,
        kind=_kind(data),
    )


def _kind(data: dict[str, Any]) -> str | None:
    """The `kind` extension: an answer kind's name (answer_kinds/registry.py), or None."""
    kind = data.get("kind")
    if kind is None:
        return None
    if not isinstance(kind, str) or kind not in KINDS:
        raise _bad(f"'kind' must name an answer kind ({did_you_mean(str(kind), KINDS.names())})", "kind")
    return kind


def _model(data: dict[str, Any], served: list[str]) -> str:
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise _bad(f"'model' is required: use {MODEL!r} or one of GET /v1/models", "model")
    if model not in served:
        raise ApiError(404, f"model {model!r} is not served here ({did_you_mean(model, served)})",
                       "not_found_error", "model", "model_not_found")
    return model


def _refuse_unsupported(data: dict[str, Any]) -> None:
    """n > 1, tools, functions."""
    if data.get("n") not in (None, 1):
        raise _bad("only n=1 is supported: the episode gives one answer", "n")
    for name in ("tools", "functions"):
        if data.get(name):
            raise _bad(f"'{name}' is not supported by trinity serve", name)


def _refuse_non_boolean_flags(data: dict[str, Any]) -> None:
    for flag in ("show_work", "greedy"):
        if data.get(flag) is not None and not isinstance(data.get(flag), bool):
            raise _bad(f"'{flag}' must be true or false", flag)


def _stream_options(data: dict[str, Any]) -> dict[str, Any]:
    """`stream_options`, once `stream` is checked."""
    stream = data.get("stream") or False
    if not isinstance(stream, bool):
        raise _bad("'stream' must be true or false", "stream")
    stream_options = data.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise _bad("'stream_options' must be an object", "stream_options")
    return stream_options


def _max_turns(data: dict[str, Any], default: int | None) -> int | None:
    max_turns = data.get("max_turns", default)
    if max_turns is not None and (not _is_int(max_turns) or not 1 <= max_turns <= MAX_TURNS_LIMIT):
        raise _bad(f"'max_turns' must be an integer from 1 to {MAX_TURNS_LIMIT}", "max_turns")
    return max_turns


def _exclude(data: dict[str, Any], pool_models: list[str]) -> list[str]:
    """The excluded members, each named once; never all of them."""
    exclude = data.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(x, str) for x in exclude):
        raise _bad("'exclude' must be a list of model names", "exclude")
    for name in exclude:
        if name not in pool_models:
            raise _bad(f"exclude: the pool has no model {name!r} ({did_you_mean(name, pool_models)})", "exclude")
    if set(exclude) >= set(pool_models):
        raise _bad("every model of the pool is excluded: exclude fewer models", "exclude")
    return list(dict.fromkeys(exclude))


def _budgets(data: dict[str, Any]) -> tuple[int | None, float | None]:
    """(`max_tokens_total`, `max_cost_usd`), each None when not given."""
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
    return token_budget, float(cost_budget) if cost_budget is not None else None


def _seed(data: dict[str, Any]) -> int:
    seed = data.get("seed")
    if seed is not None and (not _is_int(seed) or seed < 0):
        raise _bad("'seed' must be a non-negative integer", "seed")
    return seed or 0


# -- responses --------------------------------------------------------------------------


def _usage(result: AskResult) -> dict[str, int]:
    prompt, completion = result.transcript.prompt_tokens, result.transcript.completion_tokens
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _finish_reason(result: AskResult) -> str:
    transcript = result.transcript
    over = transcript.stop_reason in ("token_budget", "cost_budget")
    return "length" if over and transcript.answer is None else "stop"


def _trinity_field(result: AskResult) -> dict[str, Any]:
    transcript = result.transcript
    return {
        "run": result.run_id,
        "head": result.head_name,
        "turns": [{"model": t.model, "role": t.role.value, "verdict": t.verdict} for t in transcript.turns],
        "accepted": transcript.accepted,
        "stop_reason": transcript.stop_reason,
        "cost_usd": transcript.cost_usd,
        **({"workflow": {"topology": transcript.workflow["topology"], "fallback": transcript.workflow["fallback"],
                         **transcript.workflow["workflow"]}} if transcript.workflow is not None else {}),
    }


def content(result: AskResult, show_work: bool = False) -> str:
    """The assistant message: the answer alone (turns/answer_text.py), or with `show_work` the
    whole answering reply."""
    return (result.transcript.answer or "") if show_work else result.answer


def completion_body(result: AskResult, model: str, show_work: bool = False) -> dict[str, Any]:
    """The `chat.completion` object for a finished episode."""
    return {
        "id": f"chatcmpl-{result.run_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content(result, show_work)},
                "logprobs": None,
                "finish_reason": _finish_reason(result),
            }
        ],
        "usage": _usage(result),
        "trinity": _trinity_field(result),
    }


def sse(data: Any) -> bytes:
    """One SSE `data:` event."""
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


# A turn's reply shown in a streamed `reasoning_content` delta keeps this many characters.
EXCERPT_CHARS = 400


def decision_reasoning(index: int, model: str, role: str) -> str:
    """The `reasoning_content` sent when the coordinator picks turn `index`'s model and role."""
    return f"Turn {index + 1}: {model} as {role}…\n"


def turn_reasoning(turn: Turn, quote: bool = True) -> str:
    """The `reasoning_content` sent when a turn ends: who acted (and why, if a rule changed
    the role), the verdict, the reply's first EXCERPT_CHARS characters (unless `quote` is
    False: the reply was streamed as it was written), the turn's cost."""
    head = f"{turn.model} {turn.role.value}"
    if turn.override:
        head += f" ({turn.override})"
    if turn.verdict:
        head += f": {turn.verdict}"
    reply = turn.reply.strip()
    excerpt = reply if len(reply) <= EXCERPT_CHARS else reply[:EXCERPT_CHARS].rstrip() + " …"
    quoted = "\n".join(f"> {line}" for line in excerpt.splitlines() if line.strip())
    cost = f"{turn.prompt_tokens}→{turn.completion_tokens} tokens, {turn.latency_s:.1f} s" + (
        ", cached" if turn.cached else "")
    return f"{head}\n{quoted}\n({cost})\n\n" if quote else f"{head} ({cost})\n\n"


def reasoning_chunk(chunk_id: str, created: int, model: str, text: str) -> bytes:
    """One SSE chunk carrying `text` as a `reasoning_content` delta."""
    return sse(chunk(chunk_id, created, model, {"reasoning_content": text}))


def answer_pieces(answer: str) -> list[str]:
    return answer.splitlines(keepends=True) or [""]


def chunk(chunk_id: str, created: int, model: str, delta: dict[str, Any], finish: str | None = None,
           **extra: Any) -> dict[str, Any]:
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        **extra,
    }


def final_chunks(result: AskResult, chunk_id: str, created: int, request: ChatRequest) -> list[bytes]:
    out = [sse(chunk(chunk_id, created, request.model, {"content": piece}))
           for piece in answer_pieces(content(result, request.show_work))]
    out.append(sse(chunk(chunk_id, created, request.model, {}, _finish_reason(result),
                           trinity=_trinity_field(result))))
    if request.include_usage:
        out.append(sse({"id": chunk_id, "object": "chat.completion.chunk", "created": created,
                         "model": request.model, "choices": [], "usage": _usage(result)}))
    out.append(b"data: [DONE]\n\n")
    return out


def first_chunk(chunk_id: str, created: int, model: str) -> bytes:
    """The stream's first event: the assistant role with empty content."""
    return sse(chunk(chunk_id, created, model, {"role": "assistant", "content": ""}))
