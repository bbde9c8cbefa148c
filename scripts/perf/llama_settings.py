"""llama.cpp's own settings on this CPU, against today's: threads, batch size, flash
attention and the KV cache type, on real Worker prompts of the default pool.

    python scripts/perf/llama_settings.py [--pool local] [--model qwen1.5b-reason] [--prompts 6] [--tokens 128]
    python scripts/perf/llama_settings.py --prompt-batches 32,64,128,512

For each setting the member's GGUF file is loaded with llama-cpp-python in process and
answers the same Worker prompts (trinity's own messages for test items of gsm8k, arc-challenge
and mbpp, in the member's style), greedy, one after another. Printed per setting: load
seconds, prompt tokens per second, generated tokens per second (median over the prompts),
wall seconds for all prompts, and how many replies are identical to today's setting
(a setting that changes replies also changes what turns are read as and their cache keys).

`--prompt-batches`: instead, prompt evaluation alone at each n_batch: the Worker prompts'
text joined into one prompt of about 700 tokens, evaluated twice from an empty KV cache
(`Llama.eval`), the faster of the two (n_batch is the chunk in which in-process members
evaluate and reuse prompts: backends/llamacpp.py).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from trinity_cli import assets, tasks
from trinity_cli.messages import Role
from trinity_cli.pool_config import load_pool
from trinity_cli.turns import prompts as turn_prompts

SETTINGS: list[tuple[str, dict[str, Any]]] = [
    ("today (threads = cores, n_batch 512)", {}),
    ("n_threads 1", {"n_threads": 1}),
    ("n_batch 256", {"n_batch": 256}),
    ("n_batch 1024", {"n_batch": 1024, "n_ubatch": 1024}),
    ("flash attention", {"flash_attn": True}),
    ("flash attention + KV q8_0", {"flash_attn": True, "type_k": 8, "type_v": 8}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default=None)
    parser.add_argument("--model", default=None, help="pool member (default: the first)")
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--prompt-batches", default=None, help="e.g. 32,64,128,512: prompt speed per n_batch")
    args = parser.parse_args()
    import os

    from llama_cpp import Llama

    config = load_pool(args.pool)
    member = config.model(args.model) if args.model else config.models[0]
    path = str(assets.resolve(member.weights))  # type: ignore[union-attr]
    items = tasks.sample_items("gsm8k:test:2,arc-challenge:test:2,mbpp:test:2", seed=1)[: args.prompts]
    prompts = [[{"role": m.role, "content": m.content}
                for m in turn_prompts.build_messages(Role.WORKER, item.prompt, [], style=member.style,
                                                     kind=item.scorer)]
               for item in items]
    base = {"n_ctx": member.n_ctx, "n_threads": os.cpu_count() or 1, "n_batch": 512, "seed": 0,  # type: ignore[union-attr]
            "verbose": False}
    if args.prompt_batches:
        prompt_speed(path, base, " ".join(m["content"] for ms in prompts for m in ms),
                     [int(b) for b in args.prompt_batches.split(",")])
        return
    reference: list[str] | None = None
    print(f"{member.name} ({path.rsplit('/', 1)[-1]}), {len(prompts)} Worker prompts, greedy, at most "
          f"{args.tokens} tokens, {os.cpu_count()} CPUs")
    print(f"{'setting':<36} {'load s':>6} {'prompt tok/s':>12} {'gen tok/s':>9} {'wall s':>7} {'same replies':>12}")
    for label, change in SETTINGS:
        start = time.perf_counter()
        llm = Llama(model_path=path, **{**base, **change})
        load_s = time.perf_counter() - start
        texts, prompt_rates, gen_rates = [], [], []
        began = time.perf_counter()
        for messages in prompts:
            llm.reset()  # no prefix reuse between prompts: each is timed from scratch
            t0 = time.perf_counter()
            first: list[float] = []
            text = []
            for chunk in llm.create_chat_completion(messages=messages, max_tokens=args.tokens, temperature=0.0,
                                                    seed=0, stream=True):
                delta = chunk["choices"][0]["delta"].get("content")
                if delta:
                    if not first:
                        first.append(time.perf_counter())
                    text.append(delta)
            end = time.perf_counter()
            reply = "".join(text)
            n_gen = max(len(text), 1)  # one streamed chunk per generated token
            n_prompt = max(llm.n_tokens - n_gen, 1)
            if first:
                prompt_rates.append(n_prompt / (first[0] - t0))
                gen_rates.append(n_gen / max(end - first[0], 1e-6))
            texts.append(reply)
        wall = time.perf_counter() - began
        reference = reference or texts
        same = sum(a == b for a, b in zip(texts, reference, strict=True))
        print(f"{label:<36} {load_s:>6.1f} {statistics.median(prompt_rates):>12.1f} "
              f"{statistics.median(gen_rates):>9.1f} {wall:>7.1f} {same:>7}/{len(texts)}")
        del llm


def prompt_speed(path: str, base: dict[str, Any], text: str, batches: list[int]) -> None:
    """Print prompt tokens per second at each n_batch (module docstring)."""
    from llama_cpp import Llama

    for n_batch in batches:
        llm = Llama(model_path=path, **{**base, "n_batch": n_batch})
        tokens = llm.tokenize(text.encode())[:700]
        seconds = []
        for _ in range(2):
            llm.reset()
            llm._ctx.kv_cache_clear()
            start = time.perf_counter()
            llm.eval(tokens)
            seconds.append(time.perf_counter() - start)
        print(f"n_batch {n_batch:>4}: {len(tokens)} prompt tokens in {min(seconds):.2f} s, "
              f"{len(tokens) / min(seconds):.1f} tokens/s")
        llm.close()


if __name__ == "__main__":
    main()
