"""The free-form default's pace against one plain draft of the same member, in one warm process.

Usage: python scripts/perf/freeform_pace.py [--mode drafts] [--own 8] [--ifeval 10]

For each request, with no cache on either side:
  trinity      the library's `ask` (ask/answer.py) on the default pool, built once (a warm process:
               models loaded), answering with `--mode` (default: what `ask` plays for the request);
               its wall seconds, and the seconds to its first streamed piece of reply text
               (events.TextWritten);
  plain        the same weights asked once by llama-cpp-python directly: system "You are a helpful
               assistant.", the request, greedy, at most 1024 tokens, streamed; its wall seconds and
               seconds to the first token.
Requests: `--own` of this script's own open-ended requests that state no constraint (what most
people ask), then the first `--ifeval` IFEval validation prompts (tasks/ifeval.py), which do.
Printed: per group, the medians and trinity / plain of the medians (issue 80's targets: <= 1.25 on
requests without a constraint, <= 2.5 on IFEval validation prompts, first token <= 2 s).

Runs real models: never beside another model workload (llama.cpp threads spin-wait).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path

from trinity_cli import paths, tasks
from trinity_cli.ask import AskOptions
from trinity_cli.ask.answer import ask, build
from trinity_cli.events import TextWritten

OWN = (
    "Prove that the square root of 2 is irrational.",
    "Explain why the sky is blue.",
    "Give me some advice on sleeping better.",
    "Write a short poem about autumn.",
    "Summarize the causes of the First World War.",
    "Describe how a refrigerator keeps food cold.",
    "What are the pros and cons of working from home?",
    "Write an email to my landlord about a broken heater.",
)


def _plain(llm: object, request: str) -> tuple[float, float]:
    start = time.perf_counter()
    first = None
    messages = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": request}]
    for chunk in llm.create_chat_completion(messages, max_tokens=1024, temperature=0.0, stream=True):  # type: ignore[attr-defined]
        if first is None and chunk["choices"][0]["delta"].get("content"):
            first = time.perf_counter() - start
    return time.perf_counter() - start, first or 0.0


def _trinity(built: tuple, options: AskOptions, request: str) -> tuple[float, float]:
    start = time.perf_counter()
    seen: list[float] = []

    def progress(event: object) -> None:
        if isinstance(event, TextWritten) and not seen:
            seen.append(time.perf_counter() - start)

    ask(request, options, progress=progress, built=built)
    return time.perf_counter() - start, seen[0] if seen else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default=None)
    parser.add_argument("--own", type=int, default=len(OWN))
    parser.add_argument("--ifeval", type=int, default=10)
    args = parser.parse_args()
    from llama_cpp import Llama

    options = AskOptions(mode=args.mode, use_cache=False)
    built = build(options)
    ask("Say hello.", replace(options, use_cache=True), built=built)  # loads the model and the backbone
    weights = next(Path(paths.home(), "cache", "models").glob("*qwen2.5-coder-1.5b*.gguf"))
    llm = Llama(model_path=str(weights), n_ctx=4096, n_threads=2, verbose=False)
    groups = {"no stated constraint": list(OWN[: args.own]),
              "IFEval val": [i.prompt for i in tasks.load_split("ifeval", "val")[: args.ifeval]]}
    print("| requests | n | trinity s (median) | plain s (median) | trinity / plain | first text s: trinity / plain |")
    print("|---|---|---|---|---|---|")
    for name, requests in groups.items():
        ours = [_trinity(built, options, r) for r in requests]
        plain = [_plain(llm, r) for r in requests]
        mine, theirs = statistics.median(w for w, _ in ours), statistics.median(w for w, _ in plain)
        print(f"| {name} | {len(requests)} | {mine:.1f} | {theirs:.1f} | {mine / theirs:.2f} | "
              f"{statistics.median(f for _, f in ours):.2f} / {statistics.median(f for _, f in plain):.2f} |")
    built[0].close()
    if built[1] is not None:
        built[1].close()


if __name__ == "__main__":
    main()
