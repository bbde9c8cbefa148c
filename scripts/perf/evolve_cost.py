"""What evolution costs, and what the caches and resume save.

Usage: python scripts/perf/evolve_cost.py [--pool smollm2] [--tasks gsm8k:train] [--budget 12]
                                   [--minibatch 3] [--popsize 2] [--max-turns 2]

In a temporary TRINITY_HOME (the converted backbone and assembled model files of your
own home are linked in, so they are not rebuilt):
1. A cold run: episodes per minute, pool calls, and how many the rollout cache answered.
2. The same configuration again as a fresh run: finished generations make no real pool call.
3. A run killed with SIGKILL in the middle of its second generation, then resumed: the
   seconds and real pool calls the resume costs.
4. Coordinator seconds per episode with the hidden-state cache cold and warm.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from helpers import link_home  # a sibling module


def _real_calls(home: Path) -> int:
    import diskcache

    with diskcache.Cache(str(home / "cache" / "rollouts")) as cache:
        return len(cache)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", default="smollm2")
    ap.add_argument("--tasks", default="gsm8k:train")
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--minibatch", type=int, default=3)
    ap.add_argument("--popsize", type=int, default=2)
    ap.add_argument("--max-turns", type=int, default=2)
    args = ap.parse_args()
    cli_args = ["evolve", "--pool", args.pool, "--tasks", args.tasks, "--budget", str(args.budget),
                "--minibatch", str(args.minibatch), "--popsize", str(args.popsize), "--max-turns",
                str(args.max_turns), "--val-size", "2", "--val-every", "1", "--seed", "11"]
    per_gen = args.minibatch * args.popsize
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        homes = {name: tmp / name for name in ("cold", "killed")}
        for home in homes.values():
            link_home(home)

        def run(home: Path, extra: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
            env = {**os.environ, "TRINITY_HOME": str(home)}
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "trinity_cli", *cli_args, *extra], env=env,
                                  capture_output=True, text=True)
            if proc.returncode:
                sys.exit(proc.stderr[-3000:])
            return time.perf_counter() - start, proc

        import json

        seconds, _ = run(homes["cold"], [])
        record = json.loads(next((homes["cold"] / "runs").glob("run-*/run.json")).read_text())
        last = record["curves"][-1]
        episodes = record["spent"]  # training episodes
        print(f"cold run: {episodes} training episodes (+ validation) in {seconds:.1f}s "
              f"= {episodes / seconds * 60:.1f} training episodes/min; {last['pool_calls_total']} pool calls, "
              f"{last['cache_hits_total']} answered by the rollout cache")

        before = _real_calls(homes["cold"])
        seconds, _ = run(homes["cold"], ["--name", "again"])
        print(f"same configuration again (a fresh run): {seconds:.1f}s, "
              f"{_real_calls(homes['cold']) - before} real pool calls (target: 0)")

        env = {**os.environ, "TRINITY_HOME": str(homes["killed"])}
        proc = subprocess.Popen([sys.executable, "-m", "trinity_cli", *cli_args], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        runs = homes["killed"] / "runs"
        gen0 = None
        while proc.poll() is None:
            done = list(runs.glob("run-*/episodes/gen-0000.json")) if runs.is_dir() else []
            if done and gen0 is None:
                gen0 = _real_calls(homes["killed"])
            if gen0 is not None and _real_calls(homes["killed"]) >= gen0 + max(1, per_gen // 2):
                break
            time.sleep(0.05)
        if proc.poll() is not None:
            sys.exit("the run finished before it could be killed; raise --budget")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        at_kill = _real_calls(homes["killed"])
        seconds, _ = run(homes["killed"], [])
        print(f"killed mid-generation 1 after {at_kill - gen0} of its rollouts; resume took {seconds:.1f}s "
              f"and {_real_calls(homes['killed']) - at_kill} real pool calls (none of them a finished rollout)")

        record = json.loads(next(runs.glob("run-*/run.json")).read_text())
        episodes = []
        for file in sorted(next(runs.glob("run-*")).glob("episodes/gen-*.json")):
            episodes += json.loads(file.read_text())["episodes"]
        coord = [sum(t["coordinator_s"] for t in e["transcript"]["turns"]) for e in episodes]
        print(f"coordinator seconds per episode over {len(coord)} episodes of the resumed run "
              f"(hidden states partly cached): mean {sum(coord) / len(coord):.3f}s")
        _hidden_cache(homes["killed"], episodes)


def _hidden_cache(home: Path, episodes: list[dict]) -> None:
    """Decision time for the same transcripts with the hidden-state cache cold, then warm."""
    link_home(home / "hidden-bench")  # links the converted backbone of the current home
    os.environ["TRINITY_HOME"] = str(home / "hidden-bench")
    import numpy as np

    from trinity_cli.coordinator.head import Head
    from trinity_cli.coordinator.policy import Coordinator
    from trinity_cli.messages import Turn

    head_dir = next((home / "heads").glob("*"))

    coord = Coordinator(Head.load(head_dir))
    samples = []
    for e in episodes[:10]:
        tr = e["transcript"]
        turns = [Turn.from_dict(t) for t in tr["turns"]]
        samples.append((tr["task"], turns))
    rng = np.random.default_rng(0)
    _ = coord.backbone  # load before timing
    for label in ("cold cache", "warm cache"):
        start = time.perf_counter()
        for task, turns in samples:
            for k in range(len(turns)):
                coord.decide(task, turns[:k], rng)
        n = sum(len(t) for _, t in samples)
        print(f"hidden-state cache {label}: {(time.perf_counter() - start) / n * 1000:.1f} ms per decision "
              f"({n} decisions)")


if __name__ == "__main__":
    main()
