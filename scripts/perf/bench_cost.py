"""What a `trinity bench` run costs, with a cold rollout cache and then a warm one.

Usage: python scripts/perf/bench_cost.py [MIX] [--pool local] [--max-turns 3] [--random-seeds 1]
                                  [--head NAME_OR_DIR ...] [--keep]

Runs `python -m trinity_cli bench MIX ... --json -q` twice in a child process, in a fresh
temporary TRINITY_HOME, and prints each run's wall time, pool calls, calls answered by the
rollout cache and calls that reached a model. The first run starts from an empty rollout
cache (cold); the second repeats it (warm) and should reach no model at all. Model files
assembled from split packages (`cache/models`) and converted backbones are linked in from
your own home, so assembling them once does not count as the bench's cost. The default MIX
is a small slice on the default pool: 2 GSM8K test items.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trinity_cli import paths


def fresh_home() -> Path:
    """A temporary home sharing only the assembled model files (and user heads/pools) with yours."""
    mine = paths.home()
    home = Path(tempfile.mkdtemp(prefix="trinity-bench-cost-"))
    for rel in ("cache/models", "cache/backbones", "heads", "pools"):
        source = mine / rel
        if source.is_dir():
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            (home / rel).symlink_to(source, target_is_directory=True)
    return home


def run(cmd: list[str], home: Path) -> tuple[float, dict]:
    env = {**os.environ, "TRINITY_HOME": str(home)}
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    data: dict = json.loads(proc.stdout)
    return wall, data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mix", nargs="?", default="gsm8k:test:2", help="held-out task mix (default gsm8k:test:2)")
    ap.add_argument("--pool", default=None, help="pool name or file (default: local)")
    ap.add_argument("--max-turns", default="3")
    ap.add_argument("--random-seeds", default="1")
    ap.add_argument("--head", action="append", default=[], help="head to include (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary home and print its path")
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "trinity_cli", "bench", "--tasks", args.mix, "--max-turns", args.max_turns,
           "--random-seeds", args.random_seeds, "--json", "-q"]
    if args.pool:
        cmd += ["--pool", args.pool]
    for head in args.head:
        cmd += ["--head", head]
    home = fresh_home()
    try:
        rows = []
        for label in ("cold", "warm"):
            wall, data = run(cmd, home)
            st = data["stats"]
            rows.append((label, wall, st["pool_calls"], st["cache_hits"], st["backend_calls"],
                         st["backend_s"]))
        systems = ", ".join(s["name"] for s in data["systems"])
        print(f"trinity bench --tasks {args.mix} on pool {data['pool']['name']}: {len(data['items'])} items; "
              f"{systems}")
        print(f"{'':6}{'wall s':>9}{'pool calls':>12}{'cached':>8}{'to a model':>12}{'model s':>9}")
        for label, wall, calls, hits, backend, backend_s in rows:
            print(f"{label:6}{wall:9.1f}{calls:12d}{hits:8d}{backend:12d}{backend_s:9.1f}")
        accuracy = [(name, r["overall"]["accuracy"]) for name, r in data["results"].items()]
        print("accuracy: " + ", ".join(f"{name} {acc:.0%}" for name, acc in accuracy if acc is not None))
    finally:
        if args.keep:
            print(f"home kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
