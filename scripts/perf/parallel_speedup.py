"""Training episodes per hour of `trinity evolve` serial vs --parallel N, and whether the
heads agree.

Usage:
    python scripts/perf/parallel_speedup.py                           # the slow-HTTP pool (no model)
    python scripts/perf/parallel_speedup.py --delay 0.3 --parallel 1,4,8,16
    python scripts/perf/parallel_speedup.py --pool local --tasks gsm8k:train --budget 48 \\
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
import time
import zipfile
from pathlib import Path

import yaml
from helpers import SlowServer, link_home  # a sibling module


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
            link_home(home)
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
