"""What the extra turns of a bench run did, from its episodes.jsonl: for each self-loop, how
many first answers its Verifier accepted and how many items the self-loop got right that its
member alone did not (fixed) or the reverse (broke); and how many of moa's replies on code
items hold no function definition (an aggregator that reviewed code instead of writing it).

    TRINITY_HOME=... python scripts/analysis/revisions.py RUN     # RUN: a bench run id or directory
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trinity_cli.runs.run_files import BenchRun
from trinity_cli.runs.store import RunStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="bench run id (run-N) or its directory")
    args = parser.parse_args()
    path = Path(args.run).expanduser()
    path = path if (path / BenchRun.EPISODES).is_file() else RunStore().path(args.run)
    episodes = BenchRun(path).read_episodes()
    reward = {(e["system"], e["task"], str(e["item"])): e["reward"] for e in episodes}
    loops = sorted({e["system"] for e in episodes if e["system"].startswith("selfloop:")})
    for system in loops:
        member = "single:" + system.removeprefix("selfloop:")
        played = [e for e in episodes if e["system"] == system]
        diff = [e["reward"] - reward[member, e["task"], str(e["item"])] for e in played]
        accepted = sum(t.get("verdict") == "ACCEPT" for e in played for t in e["transcript"]["turns"])
        print(f"{system}: {len(played)} items, Verifier accepted {accepted}, "
              f"fixed {diff.count(1)}, broke {diff.count(-1)} (vs {member})")
    for task in sorted({e["task"] for e in episodes if e["system"] == "moa"}):
        moa = [e for e in episodes if e["system"] == "moa" and e["task"] == task]
        bare = sum("def " not in e["transcript"]["turns"][-1]["reply"] for e in moa)
        print(f"moa on {task}: {bare} of {len(moa)} final replies define no function")


if __name__ == "__main__":
    main()
