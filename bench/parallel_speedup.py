"""Training episodes per hour of `trinity evolve` serial vs --parallel N, and whether the
heads agree.

Usage:
    python bench/parallel_speedup.py                           # the slow-HTTP pool (no model)
    python bench/parallel_speedup.py --delay 0.3 --parallel 1,4,8,16
    python bench/parallel_speedup.py --pool local --tasks gsm8k:train --budget 48 \\
        --minibatch 4 --popsize 4 --backbone smollm2-135m --parallel 1,4,8   # real models

`--pool slow-http` (the default) starts an OpenAI-compatible server on 127.0.0.1 in this
process whose every reply takes `--delay` seconds (3 models, `max_concurrency` 16 each), and
trains on a generated task file with the hash backbone: it measures what concurrency buys
when the pool's latency is all waiting. Any other `--pool` runs that pool's real models.

Each N runs the same command (same seeds) as a fresh process in its own temporary
TRINITY_HOME, so no run is served by another's rollout cache (converted backbones and
assembled model files of your home are linked in, so they are not rebuilt). Episodes per
hour count training episodes over the command's whole wall time (start-up and validation
included). The heads are compared array by array: they must be identical.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evolve_cost import _link_home  # noqa: E402 - a sibling script


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


def _weights(head_dir: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(head_dir / "weights.npz") as archive:
        return {name: archive.read(name) for name in sorted(archive.namelist())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pool", default="slow-http")
    ap.add_argument("--parallel", default="1,4,8,16", help="comma-separated values of --parallel")
    ap.add_argument("--delay", type=float, default=0.3, help="slow-http: seconds per reply")
    ap.add_argument("--tasks", default=None, help="default: a generated task file (slow-http), gsm8k:train")
    ap.add_argument("--budget", type=int, default=384)
    ap.add_argument("--minibatch", type=int, default=16)
    ap.add_argument("--popsize", type=int, default=8)
    ap.add_argument("--max-turns", type=int, default=2)
    ap.add_argument("--backbone", default=None, help="default: hash:64 (slow-http), smollm2-135m")
    args = ap.parse_args()
    levels = [int(x) for x in args.parallel.split(",")]
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        server = None
        pool = args.pool
        tasks = args.tasks or "gsm8k:train"
        backbone = args.backbone or "smollm2-135m"
        if args.pool == "slow-http":
            server = SlowServer(args.delay)
            pool_file = tmp / "slow-http.yaml"
            pool_file.write_text(yaml.safe_dump({"name": "slow-http", "models": [
                {"name": f"api{i}", "kind": "openai", "base_url": server.base_url, "model": f"m{i}",
                 "max_concurrency": 16, "max_tokens": 64} for i in range(3)]}))
            pool = str(pool_file)
            task_file = tmp / "tasks.jsonl"
            task_file.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Question {i}: what is 6 * 7?",
                                                     "answer": 42, "scorer": "numeric"}) + "\n" for i in range(400)))
            tasks = args.tasks or f"file:{task_file}:train"
            backbone = args.backbone or "hash:64"
        cmd = ["evolve", "--pool", pool, "--tasks", tasks, "--budget", str(args.budget), "--minibatch",
               str(args.minibatch), "--popsize", str(args.popsize), "--max-turns", str(args.max_turns),
               "--val-size", "4", "--val-every", "2", "--seed", "11", "--backbone", backbone]
        if args.pool == "slow-http":
            cmd += ["--val-tasks", f"file:{task_file}:val:4"]
        print(f"pool {args.pool}" + (f" ({args.delay:g} s per reply)" if server else "")
              + f", tasks {tasks.split('/')[-1]}, budget {args.budget}, popsize {args.popsize}, minibatch "
              f"{args.minibatch}, max turns {args.max_turns}, backbone {backbone}")
        print(f"{'parallel':>8}  {'wall s':>7}  {'train ep/h':>10}  {'speed-up':>8}  {'model calls':>11}  "
              f"{'most at once':>12}  head")
        first: tuple[float, dict[str, bytes]] | None = None
        for n in levels:
            home = tmp / f"home-{n}"
            _link_home(home)
            if server is not None:
                with server.lock:
                    server.most = server.requests = 0
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "trinity_cli", *cmd, "--parallel", str(n), "--out",
                                   str(tmp / f"head-{n}")], env={**os.environ, "TRINITY_HOME": str(home)},
                                  capture_output=True, text=True)
            wall = time.perf_counter() - start
            if proc.returncode:
                sys.exit(proc.stderr[-3000:])
            record = json.loads(next((home / "runs").glob("run-*/run.json")).read_text())
            weights = _weights(tmp / f"head-{n}")
            rate = record["spent"] / wall * 3600
            if first is None:
                first = (rate, weights)
            same = "identical" if weights == first[1] else "DIFFERENT"
            calls = server.requests if server is not None else "-"
            most = server.most if server is not None else "-"
            print(f"{n:>8}  {wall:>7.1f}  {rate:>10.0f}  {rate / first[0]:>7.1f}x  {calls!s:>11}  {most!s:>12}  "
                  f"{same}")


if __name__ == "__main__":
    main()
