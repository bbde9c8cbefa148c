"""Bind the socket and serve the app with uvicorn until Ctrl-C."""

from __future__ import annotations

import re
import threading
import time

from trinity_cli.errors import ConfigError, option
from trinity_cli.events import ProgressFn, ServeStarted, quiet
from trinity_cli.listening import bind, is_loopback
from trinity_cli.serve import warm
from trinity_cli.serve.app import create_app
from trinity_cli.serve.protocol import MAX_TURNS_LIMIT
from trinity_cli.serve.service import ServedPool, ServeOptions


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/v1"


def _exit_when_idle(server: object, served: ServedPool, idle_s: float) -> None:
    """Stop `server` (uvicorn's) once no request has come for `idle_s` seconds (a warm server
    `trinity ask --keep-warm` started: serve/warm.py)."""

    def watch() -> None:
        while not getattr(server, "should_exit", False):
            if served.idle_for() >= idle_s:
                server.should_exit = True  # type: ignore[attr-defined]  # uvicorn's own stop flag
                return
            time.sleep(min(1.0, idle_s / 4))

    threading.Thread(target=watch, name="trinity-idle-exit", daemon=True).start()


def run(options: ServeOptions, progress: ProgressFn | None = None) -> None:
    """Serve until Ctrl-C: load the pool, bind, report ServeStarted, run uvicorn; `progress`
    also receives start-up's ServeLoading steps and each request's RequestAnswered or
    RequestFailed (ServedPool). Configuration and bind errors raise `ConfigError` before it
    starts."""
    import uvicorn

    if options.max_turns is not None and not 1 <= options.max_turns <= MAX_TURNS_LIMIT:
        raise ConfigError(f"{option('max_turns')} must be from 1 to {MAX_TURNS_LIMIT}, got {options.max_turns}")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", options.api_key_env or "X"):
        raise ConfigError(f"{option('api_key_env')} {options.api_key_env!r} is not an environment variable name")
    sock = bind(options.host, options.port)
    record = None
    try:
        app = create_app(options, progress)
        port = sock.getsockname()[1]
        served: ServedPool = app.state.served
        (progress or quiet)(ServeStarted(
            url=_url(options.host, port), exposed=not served.token and not is_loopback(options.host),
            models=tuple(served.served_models()), pool=served.config.name, members=tuple(served.config.names),
            head=served.default_head, auth=bool(served.token), host=options.host))
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                timeout_graceful_shutdown=10)
        # `trinity ask` of the same pool and head answers through this server (serve/warm.py).
        local = "127.0.0.1" if options.host in ("0.0.0.0", "::", "") else options.host
        record = warm.write_record(_url(local, port).removesuffix("/v1"), served.config, options.head,
                                   options.backbone, options.device, options.use_cache, options.api_key_env)
        server = uvicorn.Server(config)
        if options.idle_exit_s is not None:
            _exit_when_idle(server, served, options.idle_exit_s)
        server.run(sockets=[sock])
    finally:
        if record is not None:
            record.unlink(missing_ok=True)
        sock.close()
