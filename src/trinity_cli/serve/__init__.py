"""`trinity serve`: the coordinated pool as one OpenAI-compatible model.

Modules, each with one job:
    protocol.py  plain request validation, response and stream-chunk builders, error
                 mapping: functions of bytes and dicts, testable without FastAPI
    service.py   ServedPool: the pool loaded once, a coordinator per head, one episode
                 at a time, the queue bound
    app.py       create_app(options): the FastAPI app (auth, body limit, routes,
                 streaming); pool loaded and default head resolved up front, so a bad
                 pool, head or key variable fails at start, not on the first request
    run.py       run(options): bind the socket, serve with uvicorn until Ctrl-C
FastAPI, Starlette and uvicorn are imported under this package alone, which `cli/`
imports only inside the `serve` command, so `trinity --help` stays instant. Nothing here
prints: what the server reports goes to callbacks (render/terminal.py draws them).

Endpoints
    GET  /v1/models
        {"object": "list", "data": [{"id", "object": "model", "created", "owned_by": "trinity",
        "description"}]}
        ids: "trinity" (the head given with --head, else the default head) and
        "trinity/HEAD" for "untrained" and every available head made for this pool, then
        "trinity/NAME" for each policy that answers without a head. `description` says what
        answers under the id (ServedPool.describe_models): for "trinity", the head or reader
        that plays (its name and how it was made) and each answer kind's own procedure.
    POST /v1/chat/completions
        An OpenAI chat completion request. The last message must be the user's: it is the
        task; earlier messages are context. Content is a string or a list of text parts;
        roles are system, developer (read as system), user and assistant.
        Extensions: `max_turns` (int 1..50; default --max-turns, else the max_turns the
        head was evolved with, from its manifest, else 5), `exclude` (model names
        to route around), `max_tokens_total` and `max_cost_usd` (ceilings for the whole
        episode), `seed` (int >= 0; with the conversation it seeds the coordinator's
        draws: ask.question_seed; default 0), `greedy` (bool: the head's argmax instead of
        sampling; default: the default decision mode), `show_work` (bool: the message is
        the whole answering reply, not the answer alone), `kind` (an answer kind's name:
        answer_kinds/; default: what the question's wording asks for).
        The pool's own generation settings apply: temperature, top_p, max_tokens, stop
        and the like are accepted and ignored; `n` other than 1 and `tools` are refused.

Response (non-streaming): `chat.completion` with one choice whose content is the
episode's answer alone (turns/answer_text.py; the whole answering reply with `show_work`),
`usage` summed over every pool call of the episode, finish_reason "stop" ("length" when
a ceiling ended the episode before any answer), and a `trinity` field {"run", "head",
"turns": [{"model", "role", "verdict"}], "accepted", "stop_reason", "cost_usd"}. Header
`X-Trinity-Run: run-N` names the saved run (`trinity inspect run-N` replays it; the
record has "via": "serve"). The completion id is "chatcmpl-run-N".

Streaming (`"stream": true`): `text/event-stream`, sent once the run is allocated (its
id in `X-Trinity-Run`). First a chunk with delta {"role": "assistant", "content": ""};
then, as the episode goes, the work as `reasoning_content` deltas (the field reasoning-model
servers use; chat UIs show it as "thinking", plain clients ignore it): "Turn 1: m0 as
worker…" when the coordinator decides, each reply as it is written (events.TextWritten), and
when the turn ends who acted, its verdict, and its tokens and seconds (with the reply's first
400 characters quoted when it was not streamed); then the answer as
`content` deltas (one per line; the answer alone, or the whole reply with `show_work`), a
chunk with delta {} and the finish_reason (with the `trinity` field), a chunk with
`"choices": []` and `usage` when `stream_options.include_usage` is true, and `data:
[DONE]`. An error after the stream started is one `data: {"error": {...}}` event, and the
stream ends without [DONE]; the run is then not saved.

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

from importlib import import_module
from typing import Any

# What the package offers, each from the module that owns it, imported on first use: so
# protocol and service import without FastAPI, and the warm client (warm.py) imports neither.
_EXPORTS = {"ApiError": "protocol", "ChatRequest": "protocol", "api_error": "protocol",
            "completion_body": "protocol", "parse_messages": "protocol", "parse_request": "protocol",
            "ServedPool": "service", "ServeOptions": "service", "create_app": "app"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """A name of `_EXPORTS` from its module. (The server's entry point is
    `trinity_cli.serve.run.run`; the package does not re-export it, since the name `run` is its
    submodule's.)"""
    if name in _EXPORTS:
        return getattr(import_module(f"trinity_cli.serve.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
