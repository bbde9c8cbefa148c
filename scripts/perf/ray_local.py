"""`--ray --ray-workers N` against serial on one machine, with real local models.

    python scripts/perf/ray_local.py [--pool smollm2] [--workers 2] [--tasks gsm8k:test:6,arc-challenge:test:6]

Runs the same `trinity bench --systems single,selfloop,random` twice from an empty home
each (cold rollout cache, every call made by a model): in this process's order (serial),
then on N Ray actors of a local Ray instance. Prints the wall seconds of each command, the
model calls it made, its accuracy per row, and how many episodes got the same reward.
Actors compute with the CPUs Ray gave them (evaluators/ray_cluster.actor_cpus); on one machine
a pool with GGUF members gets actors of at least two cores, and none when that leaves one
(evaluators/choose.py: the command then plays in its own process, with the same results).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run(args: list[str], home: str) -> tuple[float, dict]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "trinity_cli", "bench", *args, "--json", "-q"],
                          env={**os.environ, "TRINITY_HOME": home}, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"trinity bench {' '.join(args)} failed:\n{done.stderr}")
    return wall, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="smollm2")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", default="gsm8k:test:6,arc-challenge:test:6")
    parser.add_argument("--systems", default="single,selfloop,random")
    args = parser.parse_args()
    common = ["--pool", args.pool, "--tasks", args.tasks, "--systems", args.systems]
    rows = {}
    for label, extra in (("serial", []), (f"ray x{args.workers}", ["--ray", "local", "--ray-workers",
                                                                   str(args.workers)])):
        with tempfile.TemporaryDirectory() as home:
            rows[label] = run([*common, *extra], home)
    (serial_wall, serial), = [rows.pop("serial")]
    (ray_label, (ray_wall, ray)), = rows.items()
    rewards = {(e["system"], e["task"], e["item"], e["seed"]): e["reward"] for e in serial["episodes"]}
    same = sum(rewards.get((e["system"], e["task"], e["item"], e["seed"])) == e["reward"] for e in ray["episodes"])
    print(f"pool {args.pool}, tasks {args.tasks}, systems {args.systems}, {os.cpu_count()} CPUs")
    print(f"{'run':<10} {'wall s':>7} {'model calls':>11}  accuracy per row")
    for label, wall, data in (("serial", serial_wall, serial), (ray_label, ray_wall, ray)):
        accuracy = "  ".join(f"{name} {r['overall']['accuracy']:.2f}" for name, r in data["results"].items())
        print(f"{label:<10} {wall:>7.1f} {data['stats']['backend_calls']:>11}  {accuracy}")
    print(f"{ray_label} vs serial: {serial_wall / ray_wall:.2f}x speed; {same} of {len(ray['episodes'])} "
          "episodes with the serial run's reward")


if __name__ == "__main__":
    main()
