"""Where the seconds of a `trinity ask` go: new process against warm process, and each head.

Usage: python scripts/perf/ask_breakdown.py [--pool local] [--head default --head local-reader]
                                            [--repeats 3] [--cold] [--nonce N]

For each head (`--head`, repeatable; "agree" means `--mode agree`), asks `--repeats` questions
(arithmetic with numbers drawn afresh for each run of the script, `--nonce`, so that neither a
reply nor a coordinator's hidden state comes from a cache: `--no-cache` skips the rollout cache
alone, and the hidden states of questions asked before are kept):
  new process    `trinity ask --no-warm --no-cache` in a subprocess: the models load every time
                 (the disk is warm: model files assembled, backbone converted);
  warm process   a `trinity serve --no-cache` of the same pool and head started once and waited
                 for (serve/warm.start, as `ask --keep-warm` starts one), then `trinity ask
                 --no-cache` in a subprocess, which answers through it (serve/warm.py).
Each ask's saved run gives its pool calls' seconds (`latency_s`) and its decisions'
(`coordinator_s`; the first, which loads the backbone, in its own column); the rest of the wall
time is setup. Printed per head and mode: medians of wall, pool and coordinator seconds, wall / pool.
`--cold` first asks once in a fresh TRINITY_HOME (model files assembled, backbone converted).

Runs real models: never beside another model workload (llama.cpp threads spin-wait).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trinity_cli import paths
from trinity_cli.ask import AskOptions
from trinity_cli.serve import warm

TRINITY = [sys.executable, "-m", "trinity_cli"]


def _latest_run(home: Path) -> dict:
    runs = sorted((home / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    return json.loads((runs[-1] / "run.json").read_text())


def _question(i: int, nonce: int) -> str:
    a, b = 17 + 7 * i + nonce, 23 + 11 * i + nonce
    return f"A farmer has {a} cows and buys {b} more. How many cows does he have? Answer with a number."


def _head_args(head: str) -> list[str]:
    return ["--mode", "agree"] if head == "agree" else ["--head", head]


def ask_once(pool: str, head: str, question: str, warm: bool, env: dict[str, str]) -> dict[str, float]:
    home = Path(env["TRINITY_HOME"])
    args = [*TRINITY, "ask", "--pool", pool, *_head_args(head), "--no-cache", "--quiet"]
    if not warm:
        args.append("--no-warm")
    start = time.perf_counter()
    subprocess.run([*args, question], env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    record = _latest_run(home)
    turns = record["transcript"]["turns"]
    return {"wall": wall, "pool": sum(t["latency_s"] for t in turns),
            "coordinator": sum(t.get("coordinator_s") or 0.0 for t in turns), "turns": len(turns),
            "first": (turns[0].get("coordinator_s") or 0.0) if turns else 0.0}


def start_server(pool: str, head: str) -> dict:
    """A warm server for the asks to come (serve/warm.start: the options they are asked with,
    so `find` matches it), or exit."""
    options = AskOptions(pool=pool, head=None if head == "agree" else head, use_cache=False)
    record = warm.start(options, idle_s=3600)
    if record is None:
        raise SystemExit("trinity serve did not start: see TRINITY_HOME/warm/serve-start-*.log")
    return record


def summary(label: str, rows: list[dict[str, float]]) -> str:
    med = {k: statistics.median(r[k] for r in rows) for k in ("wall", "pool", "coordinator", "first")}
    ratios = [r["wall"] / r["pool"] for r in rows if r["pool"] > 0]
    ratio = f"{statistics.median(ratios):.2f}" if ratios else "—"  # scripted members take no time
    return (f"| {label} | {len(rows)} | {med['wall']:.1f} | {med['pool']:.1f} | {med['coordinator']:.2f} | "
            f"{med['first']:.2f} | "
            f"{med['wall'] - med['pool'] - med['coordinator']:.1f} | {ratio} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", default="local")
    parser.add_argument("--head", action="append", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--nonce", type=int, default=None,
                        help="offset of the questions' numbers (default: drawn from the clock, printed)")
    args = parser.parse_args()
    heads = args.head or ["default"]
    nonce = args.nonce if args.nonce is not None else int(time.time()) % 100_000
    print(f"questions drawn with --nonce {nonce}")
    env = {**os.environ, "TRINITY_HOME": str(paths.home())}
    lines = ["| head · mode | asks | wall s | pool s | coordinator s | first decision s | setup s | wall / pool |",
             "|---|---|---|---|---|---|---|---|"]
    if args.cold:
        fresh = tempfile.mkdtemp(prefix="trinity-cold-")
        try:
            cold = ask_once(args.pool, heads[0], _question(99, nonce), False, {**env, "TRINITY_HOME": fresh})
            lines.append(summary(f"{heads[0]} · cold (fresh home)", [cold]))
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
    for head in heads:
        rows = [ask_once(args.pool, head, _question(i, nonce), False, env) for i in range(args.repeats)]
        lines.append(summary(f"{head} · new process", rows))
        server = start_server(args.pool, head)
        try:
            # The server's first question loads its pool's model.
            ask_once(args.pool, head, _question(50, nonce), True, env)
            rows = [ask_once(args.pool, head, _question(100 + i, nonce), True, env) for i in range(args.repeats)]
            lines.append(summary(f"{head} · warm process", rows))
        finally:
            os.killpg(server["pid"], signal.SIGTERM)  # its own session (warm.start)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
