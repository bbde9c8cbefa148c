"""After code that failed the question's shown examples, how often does the next code pass them,
by how it was asked? The count behind docs/heads.md, "Where mbpp is lost".

    trinity recordings import recordings/local      # the runs below, into TRINITY_HOME
    python scripts/analysis/code_revisions.py RUN... [--systems head,agree,evolve]

RUN: a bench or evolve run of TRINITY_HOME ("run-11"); a bench run's episodes.jsonl rows carry
their `system`, an evolve run's generations (episodes/gen-NNNN.json) count as system "evolve".
Only code episodes count (turns that ran the examples). For every answering turn
(`turns.rules.proposes_answer`) whose previous answering turn's code failed its examples, one
row per (system prefix, shown or alone, member, same member as the failing code or another):
how many such turns, and how many of them passed their examples. No model is loaded; the
numbers are read from the recorded turns. An episode identical to one already counted for its
system (same task, same replies: evolve's candidates often play the same greedy episode) is
counted once.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterator
from typing import Any

from trinity_cli.messages import Transcript
from trinity_cli.runs.run_files import BenchRun
from trinity_cli.runs.store import RunStore
from trinity_cli.turns import rules


def episodes(store: RunStore, run_id: str) -> Iterator[tuple[str, Transcript]]:
    """(system, transcript) for every episode of run `run_id` (module docstring)."""
    path = store.path(run_id)
    if (path / BenchRun.EPISODES).is_file():
        for episode in BenchRun(path).read_episodes():
            yield str(episode["system"]), Transcript.from_dict(episode["transcript"])
        return
    for record in store.evolve_run(run_id).generations():
        for episode in record["episodes"]:
            yield "evolve", Transcript.from_dict(episode["transcript"])


def count(run_ids: list[str], systems: list[str]) -> Counter[tuple[str, ...]]:
    """Counts keyed (system, shown|alone, member, same|other, "n"|"passed")."""
    counts: Counter[tuple[str, ...]] = Counter()
    seen: set[tuple[Any, ...]] = set()
    store = RunStore()
    for run_id in run_ids:
        for system, transcript in episodes(store, run_id):
            group = next((s for s in systems if system.startswith(s)), None)
            identity = (group, transcript.task, *(t.reply for t in transcript.turns))
            if group is None or identity in seen:
                continue
            seen.add(identity)
            failed_by: str | None = None  # the member whose code the previous answer was, if it failed
            for turn in transcript.turns:
                if not rules.proposes_answer(turn) or turn.examples_passed is None:
                    continue
                if failed_by is not None:
                    key = (group, "alone" if turn.alone else "shown", turn.model,
                           "same" if turn.model == failed_by else "other")
                    counts[key + ("n",)] += 1
                    counts[key + ("passed",)] += turn.examples_passed
                failed_by = None if turn.examples_passed else turn.model
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run ids of TRINITY_HOME (run-N)")
    parser.add_argument("--systems", default="head,agree,evolve",
                        help="comma-separated system-name prefixes to count (default: head,agree,evolve)")
    args = parser.parse_args()
    counts = count(args.runs, [s for s in args.systems.split(",") if s])
    print("| system | asked | member | failing code by | turns | passed examples |")
    print("|---|---|---|---|---|---|")
    for key in sorted({k[:-1] for k in counts}):
        n, passed = counts[key + ("n",)], counts[key + ("passed",)]
        print(f"| {' | '.join(key)} | {n} | {passed} ({passed / n:.1%}) |")


if __name__ == "__main__":
    main()
