"""Warm models between questions: `trinity ask` answers through a running `trinity serve` of
the same pool and head, so the pool's model and the coordinator's backbone stay loaded from
one question to the next (as Ollama keeps a model loaded), and in its own process otherwise.

The record of a warm server (`TRINITY_HOME/warm/serve-<pid>.json`, written atomically by
`trinity serve` once it listens, removed when it stops; serve/run.py):
    {"format": "trinity-warm/4", "pid", "url": "http://HOST:PORT", "pool_source": the pool
     file's path, "pool_sha": sha256 of its bytes, "head": --head or null, "backbone": --backbone
     or null, "device", "use_cache", "api_key_env": the variable holding its token, or null}
A question goes to a warm server when its pool file (by path and bytes), head, backbone,
device and cache use are those the server was started with; everything else (the question,
--mode, --max-turns, --seed, --greedy, --exclude, --system) travels with the request. The server answers
it with `ask.answer.ask` on its loaded pool and coordinator, so the run it saves, its answer and
`trinity inspect` are those an in-process `ask` gives; its events stream back as JSON lines and
are shown as they come (ask's live view).

A question that continues a conversation (`ask -c`, `--conversation RUN`) carries
"conversation": "latest" or the run's id; the server answers it as the conversation's next
message (ask/conversation.py) and saves it in that run.

`trinity ask --keep-warm SECONDS` starts such a server when none is running (`start`): it stops
by itself SECONDS after its last question (`trinity serve --idle-exit`), as Ollama's keep-alive.

A record whose process is gone, or whose server does not answer `GET /health` within
`PROBE_TIMEOUT_S`, is stale: it is removed, one warning line says so, and the question is
answered in process. The request itself (POST /trinity/ask, JSON lines back: each event as
{"event": NAME, "data": ...}, then {"done": RUN_ID} or {"error": {"message", "hint"}}) has no
time limit: an episode takes as long as its model calls.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.ask import AskOptions, AskResult, read_question
from trinity_cli.errors import TrinityError
from trinity_cli.events import (
    AskStarted,
    ContextShortened,
    DecisionMade,
    Event,
    ProgressFn,
    RunAllocated,
    TextWritten,
    TurnPlayed,
    quiet,
)
from trinity_cli.messages import Decision, Role, Turn
from trinity_cli.pool_config import PoolConfig, load_pool
from trinity_cli.runs.store import RunStore

log = logging.getLogger(__name__)

# /2: the streamed AskStarted says `uniform` where /1 said `trained`; /3: it says the answering
# policy's `summary`; /4: a question carries `system` (an older server would refuse it),
# AskStarted the answer kind (read from the question or not), who `played` and whether it is the
# default head. A server of another format is not asked (its events would not read), the question
# is answered in process.
FORMAT = "trinity-warm/4"
PROBE_TIMEOUT_S = 1.0
START_TIMEOUT_S = 600.0  # a first start may assemble the pool's model files and convert the backbone
# What a question carries to the warm server (the rest must match the server's own options).
REQUEST_FIELDS = ("max_turns", "seed", "exclude", "greedy", "token_budget", "cost_budget", "mode", "conductor",
                  "conductor_depth", "kind", "system")


def warm_dir() -> Path:
    return paths.home() / "warm"


def pool_sha(config: PoolConfig) -> str:
    source = Path(config.source) if config.source else None
    data = source.read_bytes() if source is not None and source.is_file() else b""
    return hashlib.sha256(data).hexdigest()


def write_record(url: str, config: PoolConfig, head: str | None, backbone: str | None, device: str,
                 use_cache: bool, api_key_env: str | None) -> Path:
    """Announce a listening server (module docstring); returns the record's path."""
    path = warm_dir() / f"serve-{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"format": FORMAT, "pid": os.getpid(), "url": url, "pool_source": config.source,
              "pool_sha": pool_sha(config), "head": head, "backbone": backbone, "device": device,
              "use_cache": use_cache, "api_key_env": api_key_env}
    paths.atomic_write_bytes(path, json.dumps(record).encode())
    return path


def _records() -> Iterator[tuple[Path, dict[str, Any]]]:
    directory = warm_dir()
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("serve-*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("format") == FORMAT:
            yield path, record


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, ValueError, TypeError):
        return False
    return True


def find(options: AskOptions) -> dict[str, Any] | None:
    """The record of a live warm server that can answer `options`, or None (module
    docstring); stale records met on the way are removed, each with one warning line."""
    config = load_pool(options.pool)
    wanted = {"pool_source": config.source, "pool_sha": pool_sha(config), "head": options.head,
              "backbone": options.backbone, "device": options.device, "use_cache": options.use_cache}
    for path, record in _records():
        if any(record.get(key) != value for key, value in wanted.items()):
            continue
        if _alive(record.get("pid")) and _healthy(record):
            return record
        log.warning("the warm trinity at %s (process %s) does not answer: answering in this process",
                    record.get("url"), record.get("pid"))
        path.unlink(missing_ok=True)
    return None


def start(options: AskOptions, idle_s: float) -> dict[str, Any] | None:
    """Start a warm server for `options` in the background (`trinity serve --port 0
    --idle-exit IDLE_S`, its output in `warm/serve-<pid>.log`) and wait for it to listen (its
    pool and backbone load first, up to `START_TIMEOUT_S`); its record, or None with one
    warning line when it could not start (the question is then answered in process)."""
    args = [sys.executable, "-m", "trinity_cli", "serve", "--port", "0", "--idle-exit", str(idle_s),
            "--device", options.device]
    for flag, value in (("--pool", options.pool), ("--head", options.head), ("--backbone", options.backbone)):
        if value is not None:
            args += [flag, value]
    if not options.use_cache:  # a server `find` will match: the same cache use
        args.append("--no-cache")
    warm_dir().mkdir(parents=True, exist_ok=True)
    log_file = warm_dir() / f"serve-start-{os.getpid()}.log"
    log.info("starting a warm trinity that stays up %.0f s after its last question", idle_s)
    with open(log_file, "wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    record_path = warm_dir() / f"serve-{process.pid}.json"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if record_path.is_file():
            record = next((r for p, r in _records() if p == record_path), None)
            if record is not None and _healthy(record):
                log_file.rename(warm_dir() / f"serve-{process.pid}.log")
                return record
        if process.poll() is not None:
            break
        time.sleep(0.2)
    else:
        process.kill()
    log.warning("the warm trinity did not start (see %s): answering in this process", log_file)
    return None


def _headers(record: dict[str, Any]) -> dict[str, str]:
    var = record.get("api_key_env")
    token = os.environ.get(var) if var else None
    return {"Authorization": f"Bearer {token}"} if token else {}


def _open(record: dict[str, Any], path: str, body: dict[str, Any] | None = None,
          timeout: float | None = None) -> Any:
    """A request to the warm server, straight (never through a proxy: it is this machine's);
    the stdlib's client, as the warm path should cost a question no import it can avoid."""
    from urllib import request

    data = None if body is None else json.dumps(body).encode()
    headers = {**_headers(record), **({"Content-Type": "application/json"} if data else {})}
    opener = request.build_opener(request.ProxyHandler({}))
    return opener.open(request.Request(f"{record['url']}{path}", data=data, headers=headers), timeout=timeout)


def _healthy(record: dict[str, Any]) -> bool:
    try:
        with _open(record, "/health", timeout=PROBE_TIMEOUT_S) as reply:
            return bool(reply.status == 200)
    except (OSError, ValueError):  # refused, timed out, an HTTP error status, a bad URL
        return False


def request_body(question: str, options: AskOptions, conversation: str | None = None) -> dict[str, Any]:
    """The warm request for `question`; `conversation`: the conversation run it continues
    ("latest" or a run id: `ask -c`), or None."""
    fields = asdict(options)
    body = {"question": question, "options": {k: (list(fields[k]) if k == "exclude" else fields[k])
                                              for k in REQUEST_FIELDS}}
    return body if conversation is None else {**body, "conversation": conversation}


def event_line(event: Event) -> dict[str, Any] | None:
    """An ask event as a JSON line (None for events a client does not show)."""
    if isinstance(event, DecisionMade):
        return {"event": "DecisionMade", "data": {"index": event.index, "decision": asdict(event.decision)}}
    if isinstance(event, TurnPlayed):
        return {"event": "TurnPlayed", "data": event.turn.to_dict()}
    if isinstance(event, TextWritten):
        return {"event": "TextWritten", "data": asdict(event)}
    if isinstance(event, RunAllocated):
        return {"event": "RunAllocated", "data": {"run": event.run}}
    if isinstance(event, AskStarted):
        return {"event": "AskStarted", "data": asdict(event)}
    if isinstance(event, ContextShortened):
        return {"event": "ContextShortened", "data": asdict(event)}
    return None


def read_event(line: dict[str, Any]) -> Event | None:
    name, data = line.get("event"), line.get("data") or {}
    if name == "DecisionMade":
        decision = dict(data["decision"])
        decision["role"] = Role(decision["role"])
        return DecisionMade(data["index"], Decision(**decision))
    if name == "TurnPlayed":
        return TurnPlayed(Turn.from_dict(data))
    if name == "TextWritten":
        return TextWritten(**data)
    if name == "RunAllocated":
        return RunAllocated(data["run"])
    if name == "ContextShortened":
        return ContextShortened(**data)
    if name == "AskStarted":
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return AskStarted(**values)
    return None


def ask_warm(question: str | None, options: AskOptions, record: dict[str, Any],
             progress: ProgressFn | None = None, conversation: str | None = None) -> AskResult:
    """Answer through the warm server of `record` (module docstring): its events go to
    `progress` as they come, and the result is read from the run it saved; `conversation`
    ("latest" or a run id): the question is that conversation's next message
    (ask/conversation.py), saved in its run."""
    emit = progress or quiet
    text = read_question(question)
    try:
        with _open(record, "/trinity/ask", request_body(text, options, conversation)) as reply:
            for raw in reply:
                if not raw.strip():
                    continue
                line = json.loads(raw)
                if "error" in line:
                    raise TrinityError(line["error"]["message"], line["error"].get("hint"))
                if "done" in line:
                    return result_of(line["done"])
                event = read_event(line)
                if event is not None:
                    emit(event)
    except OSError as e:  # refused or cut off, or an HTTP error status (401: the token)
        raise TrinityError(f"the warm trinity at {record['url']} failed: {e}",
                           "ask again with --no-warm to answer in this process") from e
    raise TrinityError(f"the warm trinity at {record['url']} stopped before it answered",
                       "ask again: the question is then answered in this process")


def result_of(run_id: str) -> AskResult:
    """The AskResult of a saved ask run (what `ask.answer.ask` returns), or of a conversation
    run's latest exchange."""
    record = RunStore().load(run_id)
    return AskResult.of_record(run_id, record["exchanges"][-1] if record.get("kind") == "chat" else record)
