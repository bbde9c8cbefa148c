"""How far each candidate Verifier can be trusted: on (task, Worker answer) pairs whose
correctness is known, the share of right answers it ACCEPTs and of wrong ones it REVISEs.

    python scripts/analysis/verifier_quality.py
    python scripts/analysis/verifier_quality.py --workers qwen1.5b-direct,qwen1.5b-program \
        --verifiers qwen1.5b-direct,qwen1.5b-program,qwen1.5b-reason --pairs 100

Members come from `pools/candidates.yaml` (or --pool). The Worker answers are the single runs of
`scripts/analysis/member_table.py` (same items: --n test items of each task with --seed), replayed
from the rollout cache under TRINITY_HOME when that script ran first. Pairs are drawn
deterministically (sha256 of seed and pair), half right and half wrong where the runs
allow it. Each Verifier then plays the second turn of the episode Worker -> Verifier,
exactly as `trinity ask` would run it (same prompts, same verdict rules, program
Verifiers' code run in the sandbox), and its verdict is compared with the scorer's.

Printed per Verifier: ACCEPT rate on right answers, REVISE rate on wrong ones, their mean
(balanced accuracy), how verdicts were reached (compared / stated / executed), tokens and
seconds per verification.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # the repository

from trinity_cli import tasks  # noqa: E402
from trinity_cli.episode.loop import run_episode  # noqa: E402
from trinity_cli.messages import ROLES, ChatMessage, Decision, Role, Turn  # noqa: E402
from trinity_cli.pool.pool import open_pool  # noqa: E402
from trinity_cli.pool_config import load_pool  # noqa: E402


class Plan:
    """Decision source: `worker` as Worker on turn 0, then `verifier` as Verifier."""

    def __init__(self, models: list[str], worker: str, verifier: str | None) -> None:
        self.models, self.worker, self.verifier = models, worker, verifier

    def decide(self, task: str, turns: Sequence[Turn], rng: np.random.Generator,
               excluded: Collection[str] = (), context: Sequence[ChatMessage] = (),
               greedy: bool = False) -> Decision:
        model, role = (self.worker, Role.WORKER) if not turns else (self.verifier or self.worker, Role.VERIFIER)
        return Decision(model, role, [float(m == model) for m in self.models], [float(r is role) for r in ROLES])


def rank(seed: int, text: str) -> bytes:
    return hashlib.sha256(f"{seed}:{text}".encode()).digest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="qwen1.5b-direct,qwen1.5b-program")
    parser.add_argument("--verifiers", default="qwen1.5b-direct,qwen1.5b-program")
    parser.add_argument("--tasks", default="gsm8k,arc-challenge,mbpp")
    parser.add_argument("--n", type=int, default=50, help="test items per task (as in member_table.py)")
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", dest="json_out", default=None)
    parser.add_argument("--pool", default=str(ROOT / "pools" / "candidates.yaml"), help="pool holding the members")
    args = parser.parse_args()

    config = load_pool(args.pool)
    workers = [w.strip() for w in args.workers.split(",")]
    verifiers = [v.strip() for v in args.verifiers.split(",")]
    for name in [*workers, *verifiers]:
        config.model(name)  # raises with the close matches
    pool = open_pool(config)
    mix = ",".join(f"{t.strip()}:test:{args.n}" for t in args.tasks.split(","))
    items = tasks.sample_items(mix, seed=args.seed)
    try:
        # 1. Worker answers and their correctness (cached single runs).
        pairs = []
        for worker in workers:
            for item in items:
                transcript = run_episode(item.prompt, pool, Plan(pool.names, worker, None), max_turns=1,
                                         seed=0, kind=item.scorer)
                right = tasks.score_item(item, transcript.answer or "") >= 1.0
                pairs.append((item, worker, right))
        right = sorted([p for p in pairs if p[2]], key=lambda p: rank(args.seed, f"{p[0].key}|{p[1]}"))
        wrong = sorted([p for p in pairs if not p[2]], key=lambda p: rank(args.seed, f"{p[0].key}|{p[1]}"))
        half = args.pairs // 2
        take_right = min(len(right), max(half, args.pairs - len(wrong)))
        chosen = right[:take_right] + wrong[: args.pairs - take_right]
        print(f"{len(pairs)} Worker answers ({len(right)} right); verifying {len(chosen)} pairs: "
              f"{take_right} right, {len(chosen) - take_right} wrong", file=sys.stderr)

        # 2. Each Verifier on every chosen pair.
        report = {}
        for verifier in verifiers:
            outcome: Counter[str] = Counter()
            how: Counter[str] = Counter()
            tokens = seconds = 0.0
            started = time.perf_counter()
            per_task: dict[str, Counter[str]] = {}
            for item, worker, is_right in chosen:
                transcript = run_episode(item.prompt, pool, Plan(pool.names, worker, verifier), max_turns=2,
                                         seed=0, kind=item.scorer)
                turn = transcript.turns[-1]
                key = ("right" if is_right else "wrong") + "/" + (turn.verdict or "REVISE")
                outcome[key] += 1
                per_task.setdefault(item.task, Counter())[key] += 1
                how[turn.verdict_source or "none"] += 1
                tokens += turn.prompt_tokens + turn.completion_tokens
                seconds += turn.latency_s
            n_right = outcome["right/ACCEPT"] + outcome["right/REVISE"]
            n_wrong = outcome["wrong/ACCEPT"] + outcome["wrong/REVISE"]
            accept_right = outcome["right/ACCEPT"] / n_right if n_right else None
            revise_wrong = outcome["wrong/REVISE"] / n_wrong if n_wrong else None
            scored = [x for x in (accept_right, revise_wrong) if x is not None]
            report[verifier] = {
                "accept_right": accept_right, "revise_wrong": revise_wrong,
                "balanced": sum(scored) / len(scored) if scored else None,
                "n_right": n_right, "n_wrong": n_wrong, "how": dict(how),
                "tokens": tokens / len(chosen), "seconds": seconds / len(chosen),
                "wall_s": time.perf_counter() - started,
                "per_task": {t: dict(c) for t, c in per_task.items()},
            }
            print(f"  {verifier}: done in {report[verifier]['wall_s']:.0f} s", file=sys.stderr, flush=True)
    finally:
        pool.close()
        if pool.cache is not None:
            pool.cache.close()

    def pct(x: float | None) -> str:
        return "—" if x is None else f"{100 * x:.0f}%"

    print(f"\n{len(chosen)} pairs from Workers {', '.join(workers)} on {mix} (seed {args.seed})\n")
    print("| Verifier | ACCEPTs right answers | REVISEs wrong answers | balanced | verdicts by | tokens | s |")
    print("|---|---|---|---|---|---|---|")
    for verifier, r in report.items():
        by = ", ".join(f"{k} {v}" for k, v in sorted(r["how"].items()))
        print(f"| {verifier} | {pct(r['accept_right'])} ({r['n_right']}) | {pct(r['revise_wrong'])} "
              f"({r['n_wrong']}) | {pct(r['balanced'])} | {by} | {r['tokens']:.0f} | {r['seconds']:.1f} |")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"mix": mix, "workers": workers, "pairs": len(chosen),
                                                   "verifiers": report}, indent=1))


if __name__ == "__main__":
    main()
