"""How `trinity ask` reads the kind of a request (answer_kinds/registry.detect), measured on the
labelled set of tests/data/kind_set.jsonl (scripts/build_kind_set.py): the confusion matrix of
the kind a person means against the path detection sends the request down, and what detection
costs per request.

    python scripts/analysis/kind_detection.py                  # the train part (rules are chosen on it)
    python scripts/analysis/kind_detection.py --split heldout  # the first held-out part (read; chosen on since)
    python scripts/analysis/kind_detection.py --split fresh    # the fresh held-out part (measured once)
    python scripts/analysis/kind_detection.py --misses         # and every request read wrong
    python scripts/analysis/kind_detection.py --cost           # and detection's seconds per request

Paths: "freeform" (a whole answer), "short" (the short-answer path: detect's None and the
numeric, choice, math and exact kinds), "code". The rates printed are those of issue 86's
targets: free-form requests sent to the short path, short questions sent to free-form, IFBench
prompts not answered in full. Everything but `--cost` is deterministic (tests/test_kind_detection.py
compares it with docs/kind_detection.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from trinity_cli.answer_kinds import KINDS, detect
from trinity_cli.answer_kinds.registry import detect_among

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "tests" / "data" / "kind_set.jsonl"
PATHS = ("freeform", "short", "code")


def path_of(kind: str | None) -> str:
    """The path a detected kind sends a request down (module docstring)."""
    return kind if kind in ("freeform", "code") else "short" if kind in (None, "numeric", "choice", "math", "exact") \
        else str(kind)


def load(split: str) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines()]
    return [row for row in rows if row["split"] == split]


def report(rows: list[dict[str, str]], split: str) -> str:
    """The confusion matrix and the target rates, in Markdown."""
    read = [path_of(detect(row["text"])) for row in rows]
    counts = Counter(zip((row["kind"] for row in rows), read, strict=True))
    columns = sorted({*PATHS, *read}, key=lambda p: (PATHS.index(p) if p in PATHS else len(PATHS), p))
    lines = [f"{split}: {len(rows)} requests", "",
             "| meant \\ read as | " + " | ".join(columns) + " | total |",
             "|---|" + "---:|" * (len(columns) + 1)]
    for meant in PATHS:
        row_total = sum(counts[meant, c] for c in columns)
        lines.append(f"| {meant} | " + " | ".join(str(counts[meant, c]) for c in columns) + f" | {row_total} |")
    free = [r for r, row in zip(read, rows, strict=True) if row["kind"] == "freeform"]
    short = [r for r, row in zip(read, rows, strict=True) if row["kind"] == "short"]
    ifbench = [r for r, row in zip(read, rows, strict=True) if row["source"] == "ifbench"]
    lines += ["", f"free-form requests sent to the short path: {_rate(free.count('short'), len(free))}",
              f"short questions sent to free-form: {_rate(short.count('freeform'), len(short))}"]
    if ifbench:
        missed = len(ifbench) - ifbench.count("freeform")
        lines.append(f"IFBench prompts not read as free-form: {_rate(missed, len(ifbench))}")
    return "\n".join(lines)


def _rate(n: int, total: int) -> str:
    return f"{n} of {total} ({100 * n / total:.1f}%)" if total else "0 of 0"


def misses(rows: list[dict[str, str]]) -> str:
    out = []
    for row in rows:
        read = path_of(detect(row["text"]))
        if read != row["kind"]:
            out.append(f"{row['id']}: meant {row['kind']}, read {read}: {row['text'][:160]!r}")
    return "\n".join(out)


def cost(rows: list[dict[str, str]], repeats: int = 5) -> str:
    """CPU seconds per request (`time.process_time`, so other work on a shared machine counts
    less), the median over `repeats` passes of the mean: of `detect` as `ask` calls it, and of
    the kinds' rules alone (`detect_among` with the usable kinds listed once: the rest is the
    registry's own work, which listed the installed entry points on every call before it kept
    them once per process)."""
    kinds = KINDS.usable()
    timed = {"detect": detect, "the rules alone": lambda text: detect_among(kinds, text)}
    out = []
    for name, call in timed.items():
        call("warm up")
        means = []
        for _ in range(repeats):
            start = time.process_time()
            for row in rows:
                call(row["text"])
            means.append((time.process_time() - start) / len(rows))
        out.append(f"{name}: {statistics.median(means) * 1e6:.0f} µs of CPU a request")
    return f"cost ({len(rows)} requests, median of {repeats} passes): " + "; ".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("train", "heldout", "fresh", "fresh2"), default="train")
    parser.add_argument("--misses", action="store_true", help="list every request read wrong")
    parser.add_argument("--cost", action="store_true", help="time detect on every request of the split")
    args = parser.parse_args()
    rows = load(args.split)
    print(report(rows, args.split))
    if args.misses:
        print("\n" + misses(rows))
    if args.cost:
        print("\n" + cost(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
