"""How much prompt work KV-cache prefix reuse could save on the default pool's episodes.

Usage: python scripts/perf/prefix_reuse.py RUN_DIR [--pool local] [--prompt-tok-s 50] [--gen-tok-s 20]
                                          [--chunks 32,64,128]

llama-cpp-python keeps the KV cache of the last sequence it evaluated and re-evaluates only
what follows the longest common prefix of the next prompt. The default pool's members share
one model file, so consecutive calls of an episode (serial evolve or bench) could reuse each
other's prefix. For every episode of an evolve run (`RUN_DIR/episodes/gen-*.json`) this
tokenises each turn's prompt with the pool's first GGUF member's vocabulary (ChatML, the
Qwen2.5 template) and counts the prompt tokens evaluated after reuse, for:
  now        the current layout: a system message with the role's instructions, then the
             task, the turns so far and the request (the prefix shared by two calls of
             different roles is the chat header only);
  reordered  one system message for every role, and the role's instructions after the
             transcript (two consecutive calls share the task and the earlier turns): what
             prompts `p4` do, so on a run made under `p4` both rows are the recorded prompts.
Seconds are estimated from the prompt and generation rates given (measure them on your
machine: llama.cpp prints both; the defaults are this project's 2-core machine).

Then, over the run's model calls in sequence (turns the rollout cache did not answer, one
episode after another as a serial run makes them), the prompt tokens evaluated when the
episodes run in listed order or item by item (evaluators/local.py, `play_order`), with
llama-cpp-python's own reuse (any prefix shared with the previous call) and with reuse in
whole chunks of C tokens of the previous prompt (backends/llamacpp.py).
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository

from trinity_cli.pool_config import GGUFModel, load_pool  # noqa: E402
from trinity_cli.turns import prompts  # noqa: E402

GENERIC_SYSTEM = "You are one member of a team that solves tasks together."


def chatml(messages: list[dict]) -> str:
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return body + "<|im_start|>assistant\n"


def reordered(messages: list[dict]) -> list[dict]:
    """The same content with the role's instructions moved after the transcript."""
    system, user = messages[0]["content"], messages[1]["content"]
    head, _, request = user.rpartition("\n\n")
    return [{"role": "system", "content": GENERIC_SYSTEM},
            {"role": "user", "content": f"{head}\n\n{system}\n\n{request}"}]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--pool", default="local")
    ap.add_argument("--prompt-tok-s", type=float, default=50.0)
    ap.add_argument("--gen-tok-s", type=float, default=20.0)
    ap.add_argument("--chunks", default="32,64,128", help="chunk sizes to count whole-chunk reuse at")
    args = ap.parse_args()

    import llama_cpp

    from trinity_cli.assets import resolve

    member = next(m for m in load_pool(args.pool).models if isinstance(m, GGUFModel))
    vocab = llama_cpp.Llama(str(resolve(member.weights)), vocab_only=True, verbose=False)

    def tokens(text: str) -> list[int]:
        return list(vocab.tokenize(text.encode(), add_bos=False, special=True))

    totals = {"now": [0, 0], "reordered": [0, 0]}
    generated = episodes = 0
    for file in sorted(glob.glob(str(Path(args.run_dir) / "episodes" / "gen-*.json"))):
        for episode in json.loads(Path(file).read_text())["episodes"]:
            turns = episode["transcript"]["turns"]
            episodes += 1
            generated += sum(t["completion_tokens"] for t in turns)
            for layout, total in totals.items():
                previous: list[int] = []
                for turn in turns:
                    p4 = turn["messages"][0]["content"] == prompts.SYSTEM  # already laid out so
                    messages = turn["messages"] if layout == "now" or p4 else reordered(turn["messages"])
                    prompt = tokens(chatml(messages))
                    total[0] += len(prompt)
                    total[1] += len(prompt) - common_prefix(previous, prompt)
                    previous = prompt + tokens(turn["reply"])
    if not episodes:
        sys.exit(f"no episodes under {args.run_dir}/episodes")
    gen_s = generated / episodes / args.gen_tok_s
    print(f"{episodes} episodes of {args.run_dir}; {generated / episodes:.0f} generated tokens per episode "
          f"(~{gen_s:.1f} s at {args.gen_tok_s:g} tok/s)")
    across_calls(args.run_dir, tokens, [int(c) for c in args.chunks.split(",")])
    base = None
    for layout, (prompt, evaluated) in totals.items():
        seconds = evaluated / episodes / args.prompt_tok_s + gen_s
        base = base or seconds
        print(f"{layout:10s} {prompt / episodes:6.0f} prompt tokens per episode, {evaluated / episodes:6.0f} evaluated "
              f"after prefix reuse ({100 * (1 - evaluated / prompt):.0f}% reused); ~{seconds:.1f} s per episode "
              f"({100 * (1 - seconds / base):.0f}% less than now)")


def across_calls(run_dir: str, tokens: Callable[[str], list[int]], chunks: list[int]) -> None:
    """Print the prompt tokens evaluated over the run's model calls in sequence (module docstring)."""
    episodes = [e for file in sorted(glob.glob(str(Path(run_dir) / "episodes" / "*.json")))
                for e in json.loads(Path(file).read_text())["episodes"]]
    first: dict[str, int] = {}
    for i, episode in enumerate(episodes):
        first.setdefault(episode["transcript"]["task"], i)
    orders = {"listed order": list(range(len(episodes))),
              "item order": sorted(range(len(episodes)), key=lambda i: (first[episodes[i]["transcript"]["task"]], i))}
    for name, order in orders.items():
        calls = []  # (prompt, prompt + reply) of every model call, in this order
        for i in order:
            for turn in episodes[i]["transcript"]["turns"]:
                if not turn["cached"]:
                    prompt = tokens(chatml(turn["messages"]))
                    calls.append((prompt, prompt + tokens(turn["reply"])))
        total = sum(len(p) for p, _ in calls)
        counts = {"any shared prefix": 0, **{f"whole {c}-token chunks": 0 for c in chunks}}
        before: list[int] = []  # the previous call's prompt and reply
        reusable = 0  # the previous call's prompt length: generated tokens are never kept in chunks
        for prompt, full in calls:
            shared = min(common_prefix(before, prompt), len(prompt) - 1)
            counts["any shared prefix"] += len(prompt) - shared
            for c in chunks:
                counts[f"whole {c}-token chunks"] += len(prompt) - min(shared, reusable) // c * c
            before, reusable = full, len(prompt)
        print(f"{name}: {len(calls)} model calls, {total} prompt tokens; evaluated with reuse of "
              + ", ".join(f"{k}: {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
