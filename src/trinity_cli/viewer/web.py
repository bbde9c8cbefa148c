"""`trinity inspect --serve`: the viewer's pages served over HTTP by FastAPI and uvicorn, on
loopback unless told otherwise.

    GET /                  index.html (assets/)          GET /viewer.js, /viewer.css
    GET /api/KEY           the page at KEY (viewer/pages.py), scrubbed (shape.scrub); an
                           unknown key or run: 404 {"error", "hint"}
    GET /files/RUN/NAME    a bench run's chart (NAME one of opened.CHARTS)

HEAD is answered wherever GET is, with the same status and headers (uvicorn sends no body
to a HEAD request): link checkers and `curl -I` ask that way.

Pages are computed when asked, from the run's files as they are then, so the runs list shows
runs as they finish (the page asks for it again every few seconds). A few opened runs are
kept, each reopened when its files change (OpenedRun.signature). Every answer carries a
Content-Security-Policy that lets the page load nothing from anywhere else, and requests
whose Host is not the address served are refused (no other site can read the runs through
a DNS name of its own).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from trinity_cli.errors import TrinityError
from trinity_cli.events import ProgressFn, ViewerStarted, quiet
from trinity_cli.listening import bind, is_loopback
from trinity_cli.runs.store import RunStore
from trinity_cli.viewer import pages, shape
from trinity_cli.viewer.export import asset, index_html
from trinity_cli.viewer.opened import CHARTS, OpenedRun

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
READ = ["GET", "HEAD"]  # the methods every route answers
KEPT_RUNS = 3  # opened runs kept between requests (a 300-item bench's index is a few MB)


class OpenRuns:
    """The last few runs opened, each reopened when its files changed; thread-safe (FastAPI
    answers plain routes on worker threads)."""

    def __init__(self, store: RunStore, size: int = KEPT_RUNS) -> None:
        self.store = store
        self.size = size
        self._runs: OrderedDict[str, tuple[Any, OpenedRun]] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, run_id: str) -> OpenedRun:
        fresh = OpenedRun(self.store, run_id)
        signature = fresh.signature()
        with self._lock:
            kept = self._runs.get(fresh.id)
            if kept is not None and kept[0] == signature:
                self._runs.move_to_end(fresh.id)
                return kept[1]
            self._runs[fresh.id] = (signature, fresh)
            while len(self._runs) > self.size:
                self._runs.popitem(last=False)
            return fresh


def create_app(store: RunStore, allowed_hosts: list[str]) -> Any:
    """The FastAPI app over `store` (module docstring); `allowed_hosts`: the Host headers
    answered ("*" for any)."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, Response
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.requests import Request
    from starlette.responses import FileResponse

    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)
    runs = OpenRuns(store)
    pairs = shape.scrub_pairs()

    @app.middleware("http")
    async def headers(request: Request, call_next: Callable[[Request], Any]) -> Any:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response

    @app.api_route("/", methods=READ)
    def index() -> Response:
        return Response(index_html("served"), media_type="text/html; charset=utf-8")

    @app.api_route("/viewer.js", methods=READ)
    def script() -> Response:
        return Response(asset("viewer.js"), media_type="text/javascript; charset=utf-8")

    @app.api_route("/viewer.css", methods=READ)
    def style() -> Response:
        return Response(asset("viewer.css"), media_type="text/css; charset=utf-8")

    @app.api_route("/api/{key:path}", methods=READ)
    def api(key: str) -> Response:
        try:
            return JSONResponse(shape.scrub(pages.page(key, store, runs.open), pairs))
        except TrinityError as exc:
            return JSONResponse(shape.scrub({"error": exc.message, "hint": exc.hint}, pairs), status_code=404)

    @app.api_route("/files/{run_id}/{name}", methods=READ)
    def chart(run_id: str, name: str) -> Response:
        if name not in CHARTS or not pages.RUN_ID.match(run_id):
            return JSONResponse({"error": "no such file"}, status_code=404)
        try:
            path = store.path(run_id) / name
        except TrinityError:
            path = None
        if path is None or not path.is_file():
            return JSONResponse({"error": "no such file"}, status_code=404)
        return FileResponse(path, media_type="image/png")

    return app


def serve(host: str = "127.0.0.1", port: int = 0, run: str | None = None, store: RunStore | None = None,
          progress: ProgressFn | None = None, open_browser: bool = False, compare: str | None = None) -> None:
    """Serve the viewer until Ctrl-C: bind (port 0: any free port), report ViewerStarted
    (its URL, at `run`'s page when given, or at its comparison with run `compare`), open a
    browser there when asked, run uvicorn."""
    import uvicorn

    store = store or RunStore()
    start = ""  # NotFound, with the close matches, or runs that cannot be compared: before anything listens
    if run is not None and compare is not None:
        a, b = OpenedRun(store, run), OpenedRun(store, compare)
        pages.check_comparable(a, b)
        start = f"#/compare/{a.id}/{b.id}"
    elif run is not None:
        start = f"#/run/{store.path(run).name}"
    sock = bind(host, port)
    try:
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{bound}/{start}"
        loopback = is_loopback(host)
        allowed = ["127.0.0.1", "localhost", "::1", "[::1]", host] if loopback else ["*"]
        app = create_app(store, allowed)
        (progress or quiet)(ViewerStarted(url=url, host=host, exposed=not loopback, runs=str(store.root)))
        if open_browser:
            import webbrowser

            webbrowser.open(url)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        try:
            uvicorn.Server(config).run(sockets=[sock])
        except KeyboardInterrupt:  # uvicorn raises the Ctrl-C (or kill) it caught once stopped: the way out
            pass
    finally:
        sock.close()
