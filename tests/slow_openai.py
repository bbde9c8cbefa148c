"""A deliberately slow OpenAI-compatible server on 127.0.0.1, for tests of concurrent calls.

Every POST to /v1/chat/completions sleeps `delay_s`, then answers a chat completion whose
text is `reply`; the server counts requests and the most it held at once. `fail_every`
answers every k-th request with 429 and `Retry-After: 0` instead (clients retry it). With
`gather` set to n, a request is held until n requests are in (or `gather_timeout_s` passed), so
whether a client overlaps its calls shows in `most` however slowly the machine runs its threads.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


class SlowOpenAI:
    def __init__(self, delay_s: float = 0.1, reply: str = "Six times seven is 42.\nAnswer: 42",
                 fail_every: int = 0) -> None:
        self.delay_s = delay_s
        self.reply = reply
        self.fail_every = fail_every
        self.lock = threading.Condition()
        self.gather = 0
        self.gather_timeout_s = 5.0
        self.now = self.most = self.requests = self.refused = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                return None

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server.lock:
                    server.requests += 1
                    refuse = bool(server.fail_every) and server.requests % server.fail_every == 0
                    server.refused += refuse
                    server.now += 1
                    server.most = max(server.most, server.now)
                    server.lock.notify_all()
                    if server.gather:
                        server.lock.wait_for(lambda: server.now >= server.gather, timeout=server.gather_timeout_s)
                try:
                    time.sleep(server.delay_s)
                finally:
                    with server.lock:
                        server.now -= 1
                if refuse:
                    self._send(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})
                    return
                words = sum(len(m.get("content", "").split()) for m in body.get("messages", []))
                self._send(200, {
                    "id": "x", "object": "chat.completion", "model": body.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": server.reply}}],
                    "usage": {"prompt_tokens": words, "completion_tokens": len(server.reply.split())},
                })

            def _send(self, status: int, data: dict, headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> SlowOpenAI:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self) -> None:
        with self.lock:
            self.most = self.requests = self.refused = self.gather = 0

    def models(self, n: int, **extra: object) -> list[dict]:
        """Pool entries for `n` models served here."""
        return [{"name": f"api{i}", "kind": "openai", "base_url": self.base_url, "model": f"m{i}",
                 "max_retries": 3, **extra} for i in range(n)]
