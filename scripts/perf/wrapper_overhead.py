"""Tokens per second through trinity's llama.cpp backend against raw llama-cpp-python.

Usage: python scripts/perf/wrapper_overhead.py [--model smollm2-135m] [--pool smollm2] [--repeats 3]

Both sides load the same GGUF with the same settings and generate from the same chat
prompt at temperature 0 (the rollout cache is off). Target (issue #2): within 5%.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from trinity_cli.backends.llamacpp import LlamaCppBackend
from trinity_cli.messages import ChatMessage, GenParams
from trinity_cli.pool_config import load_pool

PROMPT = [ChatMessage("system", "You are a helpful assistant."),
          ChatMessage("user", "Explain in detail how to compute 17 times 23 by hand, step by step.")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", default="smollm2")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--max-tokens", type=int, default=192)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    config = load_pool(args.pool).model(args.model)
    ours = LlamaCppBackend(config)
    params = GenParams(max_tokens=args.max_tokens, temperature=0.0, seed=0)

    from llama_cpp import Llama

    raw = Llama(model_path=str(ours.path), n_ctx=config.n_ctx, n_threads=config.n_threads or os.cpu_count(),
                n_batch=config.n_batch, seed=0, verbose=False)

    def run_raw() -> tuple[int, float]:
        start = time.perf_counter()
        out = raw.create_chat_completion(messages=[{"role": m.role, "content": m.content} for m in PROMPT],
                                         max_tokens=args.max_tokens, temperature=0.0, seed=0)
        return out["usage"]["completion_tokens"], time.perf_counter() - start

    def run_ours() -> tuple[int, float]:
        start = time.perf_counter()
        c = ours.chat(PROMPT, params)
        return c.completion_tokens, time.perf_counter() - start

    run_raw(), run_ours()  # warm up both
    rates = {"raw llama-cpp-python": [], "trinity backend": []}
    for _ in range(args.repeats):
        for name, fn in (("raw llama-cpp-python", run_raw), ("trinity backend", run_ours)):
            n, s = fn()
            rates[name].append(n / s)
    for name, values in rates.items():
        print(f"{name:>22}: {statistics.median(values):7.1f} tok/s (median of {args.repeats})")
    a, b = statistics.median(rates["raw llama-cpp-python"]), statistics.median(rates["trinity backend"])
    print(f"overhead: {(a - b) / a:+.1%} (target: within 5%)")


if __name__ == "__main__":
    main()
