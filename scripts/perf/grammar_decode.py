"""Seconds of a conductor call written under its workflow schema: llama-cpp-python's own
sampler chain (the grammar checks every token of the vocabulary at every step) against
backends/llamacpp.GreedyGrammarSampler (the best token checked alone, the vocabulary only
when the grammar rejects it), on the same requests, with the replies compared.

For each of N validation items (gsm8k, arc-challenge and mbpp in turn), the conductor's
messages and schema are built as conductor mode builds them (conductor/run.py); the prompt
is evaluated once by a one-token call, then the request runs with each sampler in turn, so
both reuse the same prompt chunks and differ only in decoding. Prints each call and the
medians. Needs the pool's GGUF file; run nothing else on the machine meanwhile.

    python scripts/perf/grammar_decode.py [--pool local] [--items 6]
"""

from __future__ import annotations

import argparse
import json
import statistics

from trinity_cli.conductor.run import SCHEMA_REPLY_TOKENS, conduct_messages
from trinity_cli.conductor.workflow import workflow_schema
from trinity_cli.messages import GenParams
from trinity_cli.pool.pool import open_pool
from trinity_cli.pool_config import load_pool
from trinity_cli.tasks.mix import sample_items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="local")
    parser.add_argument("--items", type=int, default=6)
    args = parser.parse_args()

    pool = open_pool(load_pool(args.pool), use_cache=False)
    conductor = pool.config.conductor_name
    backend = pool.backend(conductor)
    members = [m.name for m in pool.config.models]
    schema = json.dumps(workflow_schema(members), separators=(",", ":"), ensure_ascii=False)
    per_task = -(-args.items // 3)
    by_task = [sample_items(f"{task}:val:{per_task}", seed=0) for task in ("gsm8k", "arc-challenge", "mbpp")]
    items = [item for row in zip(*by_task, strict=True) for item in row][: args.items]
    llm = backend.load()
    times: dict[bool, list[float]] = {True: [], False: []}
    print(f"conductor {conductor} ({backend.fingerprint.split('|')[0][:17]}...), {len(items)} items")
    print("item | prompt tokens | reply tokens | library s | fast s | same reply")
    for item in items:
        messages = conduct_messages(pool, item.prompt, members)
        backend.chat(messages, GenParams(max_tokens=1))  # the prompt, evaluated once for both
        replies = {}
        for fast in (False, True):
            type(llm).fast_grammar = fast
            out = backend.chat(messages, GenParams(max_tokens=SCHEMA_REPLY_TOKENS, json_schema=schema))
            replies[fast] = out
            times[fast].append(out.latency_s)
        type(llm).fast_grammar = True
        print(f"{item.key} | {replies[True].prompt_tokens} | {replies[True].completion_tokens} | "
              f"{replies[False].latency_s:.2f} | {replies[True].latency_s:.2f} | "
              f"{'yes' if replies[True].text == replies[False].text else 'NO'}")
    lib, fast = statistics.median(times[False]), statistics.median(times[True])
    print(f"median: library {lib:.2f} s, fast {fast:.2f} s, ratio {lib / fast:.2f}x")
    pool.close()


if __name__ == "__main__":
    main()
