"""After code that failed the question's shown examples, how often does the next code pass them,
by how it was asked? The count behind docs/heads.md, "Where mbpp is lost".

    python scripts/analysis/code_revisions.py FILE... [--systems head,agree]

FILE: a bench's `episodes.jsonl` (or `.jsonl.gz`: one episode a line, with its `system`) or an
evolve generation's `episodes/gen-NNNN.json(.gz)` (an object whose `episodes` hold them; counted
as system "evolve"). Only code episodes count (turns that ran the examples). For every answering
turn (a Worker, or a Verifier asked alone: turns/rules.py) whose previous answering turn's code
failed its examples, one row per (system prefix, shown or alone, member, same member as the
failing code or another): how many such turns, and how many of them passed their examples. No
model is loaded; the numbers are read from the recorded turns. An episode identical to one
already counted for its system (same task, same replies: evolve's candidates often play the
same greedy episode) is counted once.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def episodes(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(system, transcript dict) for every episode in `path` (module docstring: formats)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
        text = handle.read()
    if path.name.startswith("gen-"):
        for episode in json.loads(text)["episodes"]:
            yield "evolve", episode["transcript"]
        return
    for line in text.splitlines():
        if line.strip():
            episode = json.loads(line)
            yield str(episode["system"]), episode["transcript"]


def answering(turn: dict[str, Any]) -> bool:
    """Whether a recorded turn proposed an answer (turns/rules.py: proposes_answer)."""
    return turn["role"] == "worker" or (turn["role"] == "verifier" and bool(turn["alone"]))


def count(paths: list[Path], systems: list[str]) -> Counter[tuple[str, ...]]:
    """Counts keyed (system, shown|alone, member, same|other, "n"|"passed")."""
    counts: Counter[tuple[str, ...]] = Counter()
    seen: set[tuple[str, ...]] = set()
    for path in paths:
        for system, transcript in episodes(path):
            group = next((s for s in systems if system.startswith(s)), None)
            identity = (group or "", transcript["task"], *(str(t["reply"]) for t in transcript["turns"]))
            if group is None or identity in seen:
                continue
            seen.add(identity)
            failed_by: str | None = None  # the member whose code the previous answer was, if it failed
            for turn in transcript["turns"]:
                examples = turn.get("examples")
                if not answering(turn) or examples is None:
                    continue
                if failed_by is not None:
                    key = (group, "alone" if turn["alone"] else "shown", turn["model"],
                           "same" if turn["model"] == failed_by else "other")
                    counts[key + ("n",)] += 1
                    counts[key + ("passed",)] += bool(examples["passed"])
                failed_by = None if examples["passed"] else turn["model"]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--systems", default="head,agree,evolve",
                        help="comma-separated system-name prefixes to count (default: head,agree,evolve)")
    args = parser.parse_args()
    counts = count(args.files, [s for s in args.systems.split(",") if s])
    print("| system | asked | member | failing code by | turns | passed examples |")
    print("|---|---|---|---|---|---|")
    for key in sorted({k[:-1] for k in counts}):
        n, passed = counts[key + ("n",)], counts[key + ("passed",)]
        print(f"| {' | '.join(key)} | {n} | {passed} ({passed / n:.1%}) |")


if __name__ == "__main__":
    main()
