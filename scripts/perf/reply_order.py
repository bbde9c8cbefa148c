"""Does a GGUF member's reply depend on the call before it? Replays real episode prompts.

Usage: python scripts/perf/reply_order.py RUN_DIR [--pool local] [--calls 12] [--tokens 64]

Takes the first `--calls` model calls (turns not served by the cache) of an evolve or bench
run's episodes (`RUN_DIR/episodes/*.json`) and asks the pool's first GGUF member each
prompt greedily, four ways:
  empty      every call from an empty KV cache (the reference);
  chunked    trinity's backend (backends/llamacpp.py: prompts in n_batch chunks at fixed
             positions, only whole chunks of the previous prompt kept), in run order;
  reversed   the same backend, the calls in reverse order;
  plain      llama-cpp-python's own reuse (any shared prefix kept), same n_batch, in run order.
It prints each way's seconds and how many replies equal the empty-cache reply.
"""

from __future__ import annotations

import argparse
import glob
import json
import time
from pathlib import Path

from trinity_cli.backends.llamacpp import LlamaCppBackend
from trinity_cli.messages import ChatMessage, GenParams
from trinity_cli.pool_config import GGUFModel, load_pool


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--pool", default="local")
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()

    member = next(m for m in load_pool(args.pool).models if isinstance(m, GGUFModel))
    prompts = [[ChatMessage(m["role"], m["content"]) for m in turn["messages"]]
               for file in sorted(glob.glob(str(Path(args.run_dir) / "episodes" / "*.json")))
               for episode in json.loads(Path(file).read_text())["episodes"]
               for turn in episode["transcript"]["turns"] if not turn["cached"]][: args.calls]
    params = GenParams(max_tokens=args.tokens, temperature=0.0, seed=0)

    def ask(backend: LlamaCppBackend, order: list[int], empty: bool = False) -> tuple[dict[int, str], float]:
        replies, start = {}, time.perf_counter()
        for i in order:
            if empty:
                llm = backend.load()
                llm.reset()
                llm._ctx.kv_cache_clear()
            replies[i] = backend.chat(prompts[i], params).text
        return replies, time.perf_counter() - start

    def plain_backend() -> LlamaCppBackend:
        import llama_cpp

        backend = LlamaCppBackend(member)
        backend._llm = llama_cpp.Llama(model_path=str(backend.path), n_ctx=member.n_ctx, n_threads=backend.threads,
                                       n_batch=member.n_batch, verbose=False)
        return backend

    forward = list(range(len(prompts)))
    results = {}
    for way, make, order, empty in (("empty", lambda: LlamaCppBackend(member), forward, True),
                                    ("chunked", lambda: LlamaCppBackend(member), forward, False),
                                    ("reversed", lambda: LlamaCppBackend(member), forward[::-1], False),
                                    ("plain", plain_backend, forward, False)):
        backend = make()
        backend.load()
        results[way] = ask(backend, order, empty)
        backend.close()
    reference = results["empty"][0]
    print(f"{len(prompts)} calls of {args.run_dir}, {member.name}, greedy, {args.tokens} tokens each")
    for way, (replies, seconds) in results.items():
        same = sum(replies[i] == reference[i] for i in forward)
        print(f"{way:9s} {seconds:6.1f} s   replies equal to the empty-cache reply: {same}/{len(prompts)}")


if __name__ == "__main__":
    main()
