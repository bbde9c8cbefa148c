"""Speed-up of one evolve generation on 1, 2, 4, 8 Ray actors, and the driver's overhead
per episode.

Usage:
    python scripts/perf/ray_speedup.py                          # a local Ray instance, slow-HTTP pool
    python scripts/perf/ray_speedup.py --actors 1,2,4,8 --delay 0.2 --popsize 8 --minibatch 8
    python scripts/perf/ray_speedup.py --address auto           # the cluster this machine joined

The pool is scripts/perf/parallel_speedup.py's slow-HTTP pool: an OpenAI-compatible server on
127.0.0.1, in this process, whose every reply takes `--delay` seconds (3 models), so the
time is all waiting and the scaling shows on a 2-core machine; no model is loaded, and the
coordinator backbone is `hash:64`. (On a multi-node cluster, give `--host` an address the
other nodes can reach.) The generation is what `trinity evolve` plays: `--popsize`
candidate heads (drawn once, fixed seed) on the same `--minibatch` items, `--max-turns`
turns each, episode seeds as evolve's.

For each number of actors, a fresh RayEvaluator (actors warmed up on other items first)
plays the generation against an empty rollout cache; a serial evaluator here is the
reference. Printed per actor count: wall seconds, episodes per second, speed-up over 1 actor,
the model calls the server saw and the most at once, the driver's CPU time per episode, and
whether every transcript and reward equals the serial run's. "Overhead vs serial" is (wall
with 1 actor - serial wall) / episodes.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from helpers import SlowServer  # a sibling module

from trinity_cli import tasks  # noqa: E402
from trinity_cli.coordinator import head as head_mod  # noqa: E402
from trinity_cli.coordinator.backbone_refs import describe  # noqa: E402
from trinity_cli.evaluators.local import EpisodeOutcome, EpisodeSpec, Runtime, SerialEvaluator  # noqa: E402
from trinity_cli.evaluators.ray_actors import RayEvaluator  # noqa: E402
from trinity_cli.evaluators.ray_cluster import RayOptions, import_ray  # noqa: E402
from trinity_cli.pool.pool import Pool  # noqa: E402
from trinity_cli.pool.rollout_cache import RolloutCache  # noqa: E402
from trinity_cli.pool_config import load_pool  # noqa: E402

BACKBONE = "hash:64"


def generation(pool_names: list[str], items: list[tasks.TaskItem], popsize: int, max_turns: int,
               seed: int = 11) -> list[EpisodeSpec]:
    """One generation's specs, as evolve lists them: every candidate on every item."""
    fingerprint, _ = describe(BACKBONE)
    base = head_mod.untrained("slow-http", pool_names, {"ref": BACKBONE, "fingerprint": fingerprint,
                                                       "hidden_size": 64}, 64)
    rng = np.random.default_rng(seed)
    candidates = [rng.normal(size=base.n_params) for _ in range(popsize)]
    return [EpisodeSpec(item=item, seed=int(np.random.SeedSequence([seed, 0, j]).generate_state(1)[0]),
                        router=base.with_flat(x), max_turns=max_turns, backbone=BACKBONE)
            for x in candidates for j, item in enumerate(items)]


def comparable(outcomes: list[EpisodeOutcome]) -> list[Any]:
    """Transcripts (timings aside) and rewards."""
    out = []
    for o in outcomes:
        assert o.transcript is not None
        data = o.transcript.to_dict()
        for turn in data["turns"]:
            turn.pop("latency_s")
            turn.pop("coordinator_s")
        out.append((data, o.reward))
    return out


def runtime(pool_file: Path, cache_dir: Path) -> Runtime:
    return Runtime(Pool(load_pool(str(pool_file)), cache=RolloutCache(cache_dir)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--actors", default="1,2,4,8", help="comma-separated numbers of actors")
    ap.add_argument("--delay", type=float, default=0.2, help="seconds per reply")
    ap.add_argument("--popsize", type=int, default=8)
    ap.add_argument("--minibatch", type=int, default=8)
    ap.add_argument("--max-turns", type=int, default=2)
    ap.add_argument("--address", default="local", help="Ray address (default: a local instance)")
    ap.add_argument("--host", default="127.0.0.1", help="address the slow server is reached at")
    args = ap.parse_args()
    levels = [int(x) for x in args.actors.split(",")]
    ray = import_ray()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        os.environ["TRINITY_HOME"] = str(tmp / "home")  # actors started below inherit it
        server = SlowServer(args.delay)
        base_url = server.base_url.replace("127.0.0.1", args.host)
        pool_file = tmp / "slow-http.yaml"
        pool_file.write_text(yaml.safe_dump({"name": "slow-http", "models": [
            {"name": f"api{i}", "kind": "openai", "base_url": base_url, "model": f"m{i}", "max_concurrency": 16,
             "max_tokens": 64} for i in range(3)]}))
        task_file = tmp / "tasks.jsonl"
        task_file.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Question {i}: what is 6 * 7?",
                                                 "answer": 42, "scorer": "numeric"}) + "\n" for i in range(400)))
        items = tasks.sample_items(tasks.parse_mix(f"file:{task_file}:train:{args.minibatch + max(levels)}"), seed=0)
        measured, warm_items = items[:args.minibatch], items[args.minibatch:]
        names = load_pool(str(pool_file)).names
        specs = generation(names, measured, args.popsize, args.max_turns)
        n = len(specs)

        server.requests = server.most = 0
        start = time.perf_counter()
        reference = comparable(SerialEvaluator(runtime(pool_file, tmp / "cache-serial")).evaluate(specs))
        serial_wall = time.perf_counter() - start
        serial_calls = server.requests
        print(f"one generation: popsize {args.popsize} x minibatch {args.minibatch} = {n} episodes, max turns "
              f"{args.max_turns}, {args.delay:g} s per reply (3 models), backbone {BACKBONE}")
        print(f"serial in this process: {serial_wall:.1f} s, {n / serial_wall:.2f} episodes/s, "
              f"{serial_calls} model calls")

        if args.address == "local":
            ray.init(num_cpus=max(levels), include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        else:
            ray.init(address=args.address, log_to_driver=False, logging_level="ERROR")
        print(f"{'actors':>6}  {'wall s':>6}  {'ep/s':>6}  {'speed-up':>8}  {'of linear':>9}  {'calls':>5}  "
              f"{'most':>4}  {'driver CPU ms/ep':>16}  same as serial")
        first = None
        one_actor_wall = None
        try:
            for actors in levels:
                evaluator = RayEvaluator(runtime(pool_file, tmp / f"cache-{actors}"), RayOptions(workers=actors))
                try:
                    warm = generation(names, warm_items[:actors], 1, 1, seed=99)
                    evaluator.evaluate(warm)  # every actor started, its pool and backbone ready
                    server.requests = server.most = 0
                    cpu, start = time.process_time(), time.perf_counter()
                    outcomes = evaluator.evaluate(specs)
                    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
                finally:
                    evaluator.close()
                rate = n / wall
                first = first or rate
                if actors == 1:
                    one_actor_wall = wall
                speedup = rate / first
                same = "yes" if comparable(outcomes) == reference else "NO"
                print(f"{actors:>6}  {wall:>6.1f}  {rate:>6.2f}  {speedup:>7.2f}x  {speedup / actors:>9.0%}  "
                      f"{server.requests:>5}  {server.most:>4}  {cpu / n * 1000:>16.1f}  {same}")
        finally:
            ray.shutdown()
        if one_actor_wall is not None:
            print(f"overhead vs serial, per episode: {(one_actor_wall - serial_wall) / n * 1000:.1f} ms "
                  f"(1 actor {one_actor_wall:.1f} s, serial {serial_wall:.1f} s)")


if __name__ == "__main__":
    main()
