"""Peak memory (max RSS) of one `trinity ask` on the default pool, in a child process.

Usage: python scripts/perf/ask_memory.py ["QUESTION"] [--head untrained] [--pool local]

Runs `python -m trinity_cli ask ... --no-cache` so every model that routing picks is
loaded and called, then reads the child's peak RSS from getrusage.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("question", nargs="?", default="What is 12*7? Answer with a number.")
    ap.add_argument("--pool", default="local")
    ap.add_argument("--head", default=None)
    ap.add_argument("--seed", default="0")
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "trinity_cli", "ask", args.question, "--pool", args.pool, "--no-cache", "-q",
           "--seed", args.seed]
    if args.head:
        cmd += ["--head", args.head]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"exit {proc.returncode}, wall {wall:.1f}s, answer: {proc.stdout.strip()[:80]!r}")
    if proc.returncode:
        print(proc.stderr[-2000:])
    print(f"peak RSS of `trinity ask` on pool {args.pool}: {peak_kib / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
