"""Start-up cost of the code sandbox: bubblewrap isolation vs the limits-only fallback.

Usage: python scripts/perf/sandbox_overhead.py [--runs 30] [--episode-s 21.4]

Times `run_python("pass")` (a trivial program) and the scoring of a right answer to a
HumanEval-style item (`score_code`, what a code task pays per episode), each `--runs` times in
both modes, after one warm-up run (the one-off bwrap probe). The limits-only mode is forced by
hiding bwrap from PATH. The extra cost of isolation is then set against one episode of
`--episode-s` seconds (default: the 3-turn `ask` episode on the default pool, as
docs/measurements.md measured it). Target (issue 10): under 5 %.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time

from trinity_cli.sandbox import sandbox
from trinity_cli.tasks.code import score_code

ITEM = {
    "prelude": (
        "from typing import List\n\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        '    """ Check if any two numbers are closer to each other than threshold. """\n'
    ),
    "tests": (
        "def check(candidate):\n"
        "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True\n"
        "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False\n\n"
        "check(has_close_elements)"
    ),
    "entry_point": "has_close_elements",
    "timeout_s": 10,
}
RIGHT = (
    "```python\ndef has_close_elements(numbers, threshold):\n"
    "    ordered = sorted(numbers)\n"
    "    return any(b - a < threshold for a, b in zip(ordered, ordered[1:]))\n```"
)


def run_trivial() -> None:
    result = sandbox.run_python("pass")
    assert result.passed, result.stderr


def run_scoring() -> None:
    assert score_code(RIGHT, ITEM) == 1.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--episode-s", type=float, default=21.4)
    args = ap.parse_args()
    logging.getLogger("trinity_cli").setLevel(logging.ERROR)  # the fallback's notice, expected here

    iso = sandbox.isolation()
    modes = ["bwrap", "fallback"] if iso.bwrap is not None else ["fallback"]
    if iso.bwrap is None:
        print(f"bwrap unusable here ({iso.reason}): only the fallback is measured")
    path = os.environ.get("PATH", "")
    times: dict[tuple[str, str], list[float]] = {(m, k): [] for m in modes for k in ("trivial", "score")}
    with tempfile.TemporaryDirectory() as empty:
        # Modes alternate run by run, so that a change in the machine's load hits both alike.
        for i in range(args.runs + 1):  # run 0 warms up (the bwrap probe, the page cache)
            for mode in modes:
                os.environ["PATH"] = path if mode == "bwrap" else empty
                try:
                    for kind, fn in (("trivial", run_trivial), ("score", run_scoring)):
                        start = time.perf_counter()
                        fn()
                        if i:
                            times[(mode, kind)].append((time.perf_counter() - start) * 1000)
                finally:
                    os.environ["PATH"] = path
    med = {key: statistics.median(values) for key, values in times.items()}

    print(f"median of {args.runs} runs, ms    trivial run_python   score_code (HumanEval-style, right answer)")
    for mode in modes:
        print(f"  {mode:<28}{med[(mode, 'trivial')]:>12.1f}{med[(mode, 'score')]:>16.1f}")
    if iso.bwrap is not None:
        extra = med[("bwrap", "score")] - med[("fallback", "score")]
        share = med[("bwrap", "score")] / (args.episode_s * 1000) * 100
        print(f"isolation adds {med[('bwrap', 'trivial')] - med[('fallback', 'trivial')]:.1f} ms per trivial run, "
              f"{extra:.1f} ms per scored code item")
        print(f"scoring under bwrap = {share:.2f} % of a {args.episode_s:g} s episode "
              f"(isolation's extra: {extra / (args.episode_s * 1000) * 100:.2f} %; target < 5 %)")
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
