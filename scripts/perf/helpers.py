"""What several perf scripts share: a temporary TRINITY_HOME that reuses this machine's
converted backbones and model files, and a local chat server with a fixed delay per call.
Scripts in this folder import it as a sibling module (Python puts a script's folder first
on its path)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def link_home(tmp: Path) -> None:
    """Link the current TRINITY_HOME's converted backbones and model files into `tmp`, so a
    fresh home measured in `tmp` converts and downloads nothing."""
    from trinity_cli import paths

    mine = paths.home() / "cache"
    for sub in ("backbones", "models"):
        if (mine / sub).is_dir():
            (tmp / "cache").mkdir(parents=True, exist_ok=True)
            (tmp / "cache" / sub).symlink_to(mine / sub, target_is_directory=True)


class SlowServer:
    """Chat completions that take `delay` seconds each; counts the most requests held at once."""

    def __init__(self, delay: float) -> None:
        self.lock = threading.Lock()
        self.now = self.most = self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                return None

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with owner.lock:
                    owner.requests += 1
                    owner.now += 1
                    owner.most = max(owner.most, owner.now)
                time.sleep(delay)
                with owner.lock:
                    owner.now -= 1
                last = body["messages"][-1]["content"]
                # A deterministic reply that depends on the prompt, so routing matters a little.
                answer = 42 if len(last) % 3 else 41
                text = f"Working it out step by step.\nAnswer: {answer}"
                raw = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": text}}],
                                  "usage": {"prompt_tokens": len(last.split()), "completion_tokens": 8}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

