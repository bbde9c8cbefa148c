"""Coordinator decision time against transcript length, and its share of an episode.

Usage: python scripts/perf/coordinator_latency.py [--backbone smollm2-135m] [--device auto]
                                           [--episode] [--question "..."]

Part 1 times `Coordinator.decide` on synthetic transcripts of about 256..4096 backbone
tokens with a random (non-zero) head and the hidden-state cache off, so every decision
runs the backbone on the whole text (a first decision: nothing kept to reuse), line by line
as it does now, and in one pass as it did before.
Part 2 plays an episode's decisions: the transcript grows by a turn of about 250 tokens
at a time, up to about 4,100 tokens, and each decision is timed with the backbone's
incremental encoding (the previous decision's KV prefix reused: coordinator/backbone.py),
line by line with nothing kept, and in one pass over the whole text (how every decision
was encoded before), median of --repeats.
Target (issue #27): at most 300 ms per decision at any length up to 4K tokens.
Part 3 (--episode) runs one real `ask` on the default pool with that random head and
prints the coordinator's share of the episode's wall time (issue #2: under 10%).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np

from trinity_cli.coordinator import head as head_mod
from trinity_cli.coordinator.backbone import Backbone
from trinity_cli.coordinator.backbone_refs import describe
from trinity_cli.coordinator.policy import Coordinator
from trinity_cli.coordinator.text import TEXT_CHARS, TURN_CHARS, coordinator_text
from trinity_cli.messages import ChatMessage, Role, Turn
from trinity_cli.pool_config import load_pool


def random_head(models: list[str], backbone: str, hidden: int, seed: int = 0) -> head_mod.Head:
    fingerprint, _ = describe(backbone)
    info = {"ref": backbone, "fingerprint": fingerprint, "hidden_size": hidden}
    head = head_mod.untrained("local", models, info, hidden)
    head.weights[:] = np.random.default_rng(seed).normal(size=head.weights.shape)
    head.manifest["name"] = "random-bench"
    return head


def fake_turns(n_words: int) -> list[Turn]:
    words = ("the answer is computed step by step with care and " * (n_words // 10 + 1)).split()[:n_words]
    per = max(1, len(words) // 6)
    turns = []
    for i in range(6):
        reply = " ".join(words[i * per:(i + 1) * per])
        turns.append(Turn(index=i, model="m", role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[1.0],
                          role_probs=[1 / 3] * 3, messages=[ChatMessage("user", "x")], reply=reply,
                          prompt_tokens=0, completion_tokens=0, latency_s=0, coordinator_s=0))
    return turns


def single_pass(backbone: Backbone, text: str) -> np.ndarray:
    """The feature as the backbone computed it before incremental encoding: one forward pass
    over the whole text (what every decision cost then)."""
    torch = backbone._torch
    enc = backbone.tokenizer(text, return_tensors="pt", truncation=True, max_length=backbone.max_tokens)
    with torch.inference_mode():
        hidden = backbone.decoder(**enc).last_hidden_state[0]
    return hidden[-2].float().cpu().numpy()


def growing_episode(coord: Coordinator, repeats: int, turns: int = 16, words: int = 190) -> None:
    """Part 2: an episode's decisions as its transcript grows: incremental (the previous
    decision's prefix kept), blocks with nothing kept, and one pass over the whole text."""
    backbone = coord._shared.backbone
    task = "Compute the total."
    base = ("the answer is computed step by step with care and " * (words // 10 + 1)).split()[:words]
    grown = [Turn(index=i, model="m", role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[1.0],
                  role_probs=[1 / 3] * 3, messages=[ChatMessage("user", "x")], reply=f"turn {i}: " + " ".join(base),
                  prompt_tokens=0, completion_tokens=0, latency_s=0, coordinator_s=0) for i in range(turns)]
    texts = [coordinator_text(task, grown[:k]) for k in range(turns + 1)]
    sizes = [backbone.count_tokens(t) for t in texts]
    modes = ("incremental", "by lines, nothing kept", "one pass (before)")
    times: dict[str, list[list[float]]] = {m: [] for m in modes}
    for _ in range(repeats):
        for mode in modes:
            backbone.incremental = mode == "incremental"
            backbone._prefixes.clear()
            row = []
            rng = np.random.default_rng(0)
            for k in range(turns + 1):
                start = time.perf_counter()
                if mode == "one pass (before)":
                    coord.head.logits(single_pass(backbone, texts[k]))
                else:
                    coord.decide(task, grown[:k], rng)
                row.append((time.perf_counter() - start) * 1000)
            times[mode].append(row)
    backbone.incremental = True
    print(f"\nan episode's decisions, one turn of about {sizes[1] - sizes[0]} tokens added each time "
          f"(ms, median of {repeats}):")
    print(f"{'turns':>6} {'tokens':>7} " + " ".join(f"{m:>21}" for m in modes))
    for k in range(turns + 1):
        cells = " ".join(f"{statistics.median(r[k] for r in times[m]):>21.0f}" for m in modes)
        print(f"{k:>6} {sizes[k]:>7} {cells}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backbone", default="smollm2-135m")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--episode", action="store_true")
    ap.add_argument("--question", default="What is 12*7? Answer with a number.")
    args = ap.parse_args()

    t0 = time.perf_counter()
    backbone = Backbone(args.backbone, device=args.device, max_tokens=4096)
    print(f"backbone {args.backbone} on {backbone.device}: loaded in {time.perf_counter() - t0:.1f}s "
          f"(hidden size {backbone.hidden_size})")
    config = load_pool(None)
    head = random_head(config.names, args.backbone, backbone.hidden_size)
    coord = Coordinator(head, backbone_ref=args.backbone, device=args.device, use_cache=False, max_tokens=4096)
    coord._shared.backbone = backbone  # the one loaded above, timed once
    rng = np.random.default_rng(0)
    print(f"first decision on a transcript (nothing kept), ms, median of {args.repeats}:")
    print(f"{'tokens':>8} {'by lines (now)':>28} {'one pass (before)':>20}")
    import trinity_cli.coordinator.policy as policy

    # Let the bench reach 4K tokens: by default turns and the whole text are clipped.
    policy.TEXT_CHARS, policy.TURN_CHARS = 10**6, 10**6
    for target in (256, 512, 1024, 2048, 4096):
        n_words = target
        for _ in range(20):
            text = coordinator_text("Compute the total.", fake_turns(n_words))
            n = backbone.count_tokens(text)
            if n >= target * 0.95:
                break
            n_words = int(n_words * target / max(n, 1)) + 8
        times, before = [], []
        for _ in range(args.repeats):
            backbone._prefixes.clear()  # a first decision: nothing kept to reuse
            start = time.perf_counter()
            coord.decide("Compute the total.", fake_turns(n_words), rng)
            times.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            coord.head.logits(single_pass(backbone, text))
            before.append((time.perf_counter() - start) * 1000)
        print(f"{n:>8} {statistics.median(times):>28.0f} {statistics.median(before):>20.0f}")
    growing_episode(coord, args.repeats)
    policy.TEXT_CHARS, policy.TURN_CHARS = TEXT_CHARS, TURN_CHARS
    print(f"(transcripts are clipped to {TEXT_CHARS} characters, about "
          f"{backbone.count_tokens('word ' * (TEXT_CHARS // 5))} tokens, before the backbone reads them)")

    if args.episode:
        from trinity_cli.ask import AskOptions, ask
        from trinity_cli.pool.pool import open_pool

        with tempfile.TemporaryDirectory() as tmp:
            import os

            os.environ["TRINITY_HOME"] = tmp  # cold rollout cache: every pool call is real
            pool = open_pool(config)
            coord_ep = Coordinator(head, backbone_ref=args.backbone, device=args.device, use_cache=False)
            result = ask(args.question, AskOptions(max_turns=5), built=(pool, coord_ep))
            tr = result.transcript
            share = tr.coordinator_seconds / result.wall_s
            print(f"episode: {len(tr.turns)} turns, wall {result.wall_s:.1f}s, pool {tr.pool_seconds:.1f}s, "
                  f"coordinator {tr.coordinator_seconds:.2f}s = {share:.1%} of the episode (target < 10%)")
            pool.close()


if __name__ == "__main__":
    main()
