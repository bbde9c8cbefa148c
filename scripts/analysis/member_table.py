"""Every candidate member alone on held-out items, and which members make the best pool.

    python scripts/analysis/member_table.py                       # 50 test items each of gsm8k, arc-challenge, mbpp
    python scripts/analysis/member_table.py --n 15 --members qwen1.5b-reason,qwen1.5b-direct
    python scripts/analysis/member_table.py --n 50 --tasks gsm8k,arc-challenge,mbpp,math500

Runs `trinity bench --systems single,vote,best-per-task,oracle --max-turns 1` on a pool made
of the chosen members of `pools/candidates.yaml` (each packaged model in each style), so
every reply lands in the rollout cache under TRINITY_HOME: a later bench of a pool holding
the same members (same weights, style and max_tokens) replays them for free, and so does a
re-run of this script. Then it prints, from the bench's per-item rewards:

- the member table: accuracy per task, overall, tokens and seconds per item;
- for every subset of the candidates (up to --max-size members): the best single member,
  best-per-task (perfect task-aware routing to one member), the oracle, and the margin
  best-per-task minus best single, most useful subsets first.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]  # the repository

from trinity_cli.bench.options import BenchOptions  # noqa: E402
from trinity_cli.bench.runner import bench  # noqa: E402
from trinity_cli.events import Event, SystemStarted  # noqa: E402


def subset_pool(members: list[str] | None, folder: Path) -> Path:
    data = yaml.safe_load((ROOT / "pools" / "candidates.yaml").read_text())
    if members:
        known = [m["name"] for m in data["models"]]
        unknown = [m for m in members if m not in known]
        if unknown:
            raise SystemExit(f"unknown members {unknown}; candidates: {', '.join(known)}")
        data["models"] = [m for m in data["models"] if m["name"] in members]
    path = folder / "candidates.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50, help="test items per task")
    parser.add_argument("--tasks", default="gsm8k,arc-challenge,mbpp")
    parser.add_argument("--members", default=None, help="comma-separated candidate names (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="item sampling seed (trinity bench's default: 0)")
    parser.add_argument("--max-size", type=int, default=4, help="largest pool to rank")
    parser.add_argument("--json", dest="json_out", default=None, help="also write the table as JSON here")
    args = parser.parse_args()

    task_list = [t.strip() for t in args.tasks.split(",") if t.strip()]
    mix = ",".join(f"{t}:test:{args.n}" for t in task_list)
    members = [m.strip() for m in args.members.split(",")] if args.members else None
    with tempfile.TemporaryDirectory() as tmp:
        pool = subset_pool(members, Path(tmp))
        options = BenchOptions(pool=str(pool), tasks=mix, max_turns=1, random_seeds=0, seed=args.seed,
                               systems=["single", "vote", "best-per-task", "oracle"])

        def progress(event: Event) -> None:
            if isinstance(event, SystemStarted):
                print(f"  {event.name}: {event.episodes} episodes", file=sys.stderr, flush=True)

        result = bench(options, progress=progress)
    summary = result.data
    names = summary["pool"]["models"]
    tasks = summary["tasks"]
    results = summary["results"]
    per_item = summary["per_item"]
    print(f"\nbench run {summary['run']} · {mix} · seed {args.seed} · "
          f"{summary['stats']['backend_calls']} model calls, {summary['stats']['wall_s']:.0f} s\n")
    header = ["member", *tasks, "overall", "tokens/item", "s/item"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    table = {}
    for name in [*(f"single:{m}" for m in names), "vote", "best-per-task", "oracle"]:
        block = results[name]
        cells = [f"{block['per_task'][t]['correct']}/{block['per_task'][t]['n']}" for t in tasks]
        o = block["overall"]
        print(f"| {name} | " + " | ".join(cells) + f" | {100 * o['accuracy']:.1f}% | {o['mean_tokens']:.0f} | "
              f"{o['mean_wall_s']:.1f} |")
        table[name] = {"per_task": {t: block["per_task"][t]["accuracy"] for t in tasks},
                       "overall": o["accuracy"], "tokens": o["mean_tokens"], "seconds": o["mean_wall_s"]}
    print(f"\nbest-per-task picks: {summary['best_per_task']}")

    # Subsets: best single vs best-per-task vs oracle, from per-item rewards.
    items = [f"{i['task']}/{i['id']}" for i in summary["items"]]
    task_of = {f"{i['task']}/{i['id']}": i["task"] for i in summary["items"]}
    reward = {m: per_item[f"single:{m}"] for m in names}
    tokens = {m: table[f"single:{m}"]["tokens"] for m in names}
    ranked = []
    for size in range(2, min(args.max_size, len(names)) + 1):
        for subset in itertools.combinations(names, size):
            single = max(sum(reward[m][k] for k in items) / len(items) for m in subset)
            per_task_best = 0.0
            for t in tasks:
                keys = [k for k in items if task_of[k] == t]
                per_task_best += max(sum(reward[m][k] for k in keys) for m in subset)
            per_task_best /= len(items)
            oracle = sum(max(reward[m][k] for m in subset) for k in items) / len(items)
            cost = sum(tokens[m] for m in subset)
            ranked.append((per_task_best - single, per_task_best, single, oracle, cost, subset))
    ranked.sort(key=lambda r: (-r[0], -r[1], r[4]))
    print("\n| members | best single | best-per-task | margin | oracle | tokens/item, all members |")
    print("|---|---|---|---|---|---|")
    for margin, bpt, single, oracle, cost, subset in ranked[:15]:
        print(f"| {', '.join(subset)} | {100 * single:.1f}% | {100 * bpt:.1f}% | {100 * margin:+.1f} | "
              f"{100 * oracle:.1f}% | {cost:.0f} |")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"run": summary["run"], "mix": mix, "table": table,
                                                   "per_item": {m: reward[m] for m in names}}, indent=1))


if __name__ == "__main__":
    main()
