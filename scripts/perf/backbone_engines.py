"""The coordinator backbone's two engines on the CPU: numpy (coordinator/numpy_backbone.py)
against transformers (coordinator/backbone.py's `Backbone`).

- agreement: `--states N` hidden states drawn at random (`--seed`) from this TRINITY_HOME's
  hidden-state cache for the backbone (no SVF, the default token limit), as transformers
  computed them, against numpy's features of the same texts: relative L2 difference (median,
  max), the largest change of a head's logits (`--head`, default `heads/rotation`), the closest
  pair of its member logits, and how many of its member or role choices change;
- speed: one text of about 240 tokens encoded whole (nothing kept) three times by each engine,
  each pass's seconds;
- `--convert`: the one-time conversion of the GGUF to safetensors in a fresh TRINITY_HOME.

Loads SmolLM2 (small): run it with no other model workload beside it.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from trinity_cli import paths
from trinity_cli.coordinator import backbone as backbone_mod
from trinity_cli.coordinator.backbone_refs import DEFAULT_BACKBONE, describe
from trinity_cli.coordinator.head import Head
from trinity_cli.keyed_cache import KeyedCache

ROOT = Path(__file__).resolve().parents[2]
TEXT = ("You coordinate a pool of models.\n"
        + "Task: A farmer has 23 cows and buys 19 more. How many cows does he have? Answer with a number. " * 8
        + "\nNext:")


def recorded_states(fingerprint: str, n: int, seed: int) -> list[tuple[str, np.ndarray]]:
    cache = KeyedCache(paths.cache_dir("hidden"), "hidden-state cache", size_limit=2 << 30)  # as policy.py opens it
    rows = []
    for key in cache.keys():
        value = cache.get(key)
        if not isinstance(value, dict):
            continue
        request = value["request"]
        if request["backbone"] == fingerprint and not request["svf_targets"] and request["max_tokens"] == 1024:
            rows.append((request["text"], np.frombuffer(value["vector"], dtype=np.float32)))
    cache.close()
    print(f"{len(rows):,} recorded states for {DEFAULT_BACKBONE}")
    random.Random(seed).shuffle(rows)
    return sorted(rows[:n], key=lambda row: row[0])  # neighbours share prefixes


def agreement(n: int, seed: int, head_dir: Path) -> None:
    fingerprint, _ = describe(DEFAULT_BACKBONE)
    rows = recorded_states(fingerprint, n, seed)
    engine = backbone_mod.load(DEFAULT_BACKBONE, device="cpu")
    assert type(engine).__name__ == "NumpyBackbone"
    head = Head.load(head_dir)
    relative, moved, margins, flips = [], [], [], 0
    for text, recorded in rows:
        mine = engine.encode(text)
        relative.append(float(np.linalg.norm(mine - recorded) / np.linalg.norm(recorded)))
        (m1, r1), (m2, r2) = (head.logits(v / (np.linalg.norm(v) + 1e-8)) for v in (recorded, mine))
        flips += int(m1.argmax() != m2.argmax() or r1.argmax() != r2.argmax())
        moved.append(float(max(np.abs(m1 - m2).max(), np.abs(r1 - r2).max())))
        top = np.sort(m1)[-2:]
        margins.append(float(top[1] - top[0]))
    print(f"{len(rows)} states: relative L2 difference median {statistics.median(relative):.2e}, "
          f"max {max(relative):.2e}; {head_dir.name}'s logits moved at most {max(moved):.2e}, its closest "
          f"member logits {min(margins):.2e} apart; {flips} of {len(rows)} choices changed")


def speed() -> None:
    engines = {"numpy": backbone_mod.load(DEFAULT_BACKBONE, device="cpu"),
               "transformers": backbone_mod.Backbone(DEFAULT_BACKBONE, device="cpu")}
    for name, engine in engines.items():
        engine.incremental = False
        seconds = []
        for _ in range(3):
            start = time.perf_counter()
            engine.encode(TEXT)
            seconds.append(time.perf_counter() - start)
        print(f"{name}: {engine.count_tokens(TEXT)} tokens, " + ", ".join(f"{s:.2f}" for s in seconds) + " s")


def convert() -> None:
    with tempfile.TemporaryDirectory(prefix="trinity-convert-") as home:
        code = ("import time; from trinity_cli.coordinator import backbone as b; "
                "from trinity_cli.coordinator.backbone_refs import describe; "
                f"f, g = describe({DEFAULT_BACKBONE!r}); t = time.perf_counter(); b.converted(f, g); "
                "print(f'converted once in {time.perf_counter() - t:.1f} s')")
        subprocess.run([sys.executable, "-c", code], env={**os.environ, "TRINITY_HOME": home}, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--states", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--head", type=Path, default=ROOT / "heads" / "rotation")
    parser.add_argument("--convert", action="store_true")
    args = parser.parse_args()
    agreement(args.states, args.seed, args.head)
    speed()
    if args.convert:
        convert()


if __name__ == "__main__":
    main()
