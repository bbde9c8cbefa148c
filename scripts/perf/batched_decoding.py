"""Aggregate decoding speed of `runtime: server` (llama.cpp's server via xllamacpp, continuous
batching) at 1, 2, 4 and 8 concurrent sequences, against in-process llama-cpp-python, and how
often batched replies differ from one-at-a-time ones.

Usage: python scripts/perf/batched_decoding.py [--pool local] [--models NAME,...] [--levels 1,2,4,8]
                                        [--requests 16] [--max-tokens 128] [--threads N]

For each GGUF model of the pool (or those named):
1. in-process llama-cpp-python, the prompts one after another: tokens/s (the baseline);
2. one server with `slots` = the largest level; for each level k, the same prompts sent by
   k threads at once: aggregate completion tokens/s over the whole batch, and the speed-up
   over level 1 of the same server;
3. replies compared with the server's level-1 replies (same prompt, temperature 0, seed 0):
   how many differ at each level, and how many level-1 server replies differ from the
   in-process ones (a different chat-template engine and batch shapes).
Every request is distinct and the rollout cache is not involved. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from trinity_cli.backends.llamacpp import LlamaCppBackend
from trinity_cli.backends.llamaserver import LlamaServerBackend
from trinity_cli.messages import ChatMessage, GenParams
from trinity_cli.pool_config import load_pool

PROMPTS = [
    "What is {a} * {b}? Think step by step, then give the answer on a line 'Answer: N'.",
    "A shop sells pens at {a} dollars each. How much do {b} pens cost? Explain briefly.",
    "Write a Python function that returns the sum of the first {a} multiples of {b}.",
    "Is {a}{b} a prime number? Reason about it, then answer yes or no.",
]


def prompts(n: int) -> list[list[ChatMessage]]:
    return [[ChatMessage("user", PROMPTS[i % len(PROMPTS)].format(a=7 + i, b=3 + 2 * i))] for i in range(n)]


def run_level(backend: LlamaServerBackend | LlamaCppBackend, questions: list[list[ChatMessage]], k: int,
              params: GenParams) -> tuple[float, int, list[str]]:
    """(seconds, completion tokens, replies) for `questions` sent by `k` threads."""
    lock = threading.Lock()
    tokens = [0]

    def one(q: list[ChatMessage]) -> str:
        c = backend.chat(q, params)
        with lock:
            tokens[0] += c.completion_tokens
        return c.text

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=k) as pool:
        replies = list(pool.map(one, questions))
    return time.perf_counter() - start, tokens[0], replies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pool", default="local")
    ap.add_argument("--models", default=None, help="comma-separated members (default: every gguf member)")
    ap.add_argument("--levels", default="1,2,4,8")
    ap.add_argument("--requests", type=int, default=16, help="prompts per level")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the pool's)")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    config = load_pool(args.pool)
    names = args.models.split(",") if args.models else [m.name for m in config.models if m.kind == "gguf"]
    params = GenParams(max_tokens=args.max_tokens, temperature=0.0, seed=0)
    questions = prompts(args.requests)
    print(f"pool {config.name}, {args.requests} prompts per level, max_tokens {args.max_tokens}, "
          f"{os.cpu_count()} CPUs")
    for name in names:
        model = config.model(name)
        if model.kind != "gguf":
            continue
        update: dict[str, object] = {"runtime": "server", "slots": max(levels)}
        if args.threads:
            update["n_threads"] = args.threads
        served = model.model_copy(update=update)
        inproc_cfg = model.model_copy(update={k: v for k, v in update.items() if k == "n_threads"} |
                                      {"runtime": "inprocess"})
        print(f"\n{name}")
        inproc = LlamaCppBackend(inproc_cfg)
        inproc.load()
        seconds, tokens, inproc_replies = run_level(inproc, questions, 1, params)
        inproc.close()
        print(f"  {'in-process':>12}  {tokens / seconds:7.1f} tok/s  ({tokens} tokens in {seconds:.1f} s)")
        server = LlamaServerBackend(served)
        start = time.perf_counter()
        server.load()
        print(f"  server with {max(levels)} slots started in {time.perf_counter() - start:.1f} s")
        base_rate = None
        reference: list[str] | None = None
        for k in levels:
            seconds, tokens, replies = run_level(server, questions, k, params)
            rate = tokens / seconds
            base_rate = base_rate or rate
            if reference is None:
                reference = replies
                differs = sum(a != b for a, b in zip(replies, inproc_replies, strict=True))
                note = f"{differs}/{len(replies)} replies differ from in-process"
            else:
                differs = sum(a != b for a, b in zip(replies, reference, strict=True))
                note = f"{differs}/{len(replies)} replies differ from 1 sequence"
            print(f"  {k:>2} at once     {rate:7.1f} tok/s  ({tokens} tokens in {seconds:.1f} s, "
                  f"{rate / base_rate:.2f}x)  {note}")
        server.close()


if __name__ == "__main__":
    main()
