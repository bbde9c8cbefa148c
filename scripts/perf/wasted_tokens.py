"""Generated tokens that nothing reads, from a bench run's episodes.jsonl: for each turn, the
tokens its member generated after the part the turn is read for, by role and style.

What a turn is read for, and so where the waste starts:
    Worker / Verifier, reason and direct style   the end of the line holding the reply's last
                                                  answer marker ("Answer: ...", \\boxed{}, or a
                                                  Verifier's "Verdict:" line, whichever is last)
    Worker / Verifier, program style             the end of the first fenced code block (the
                                                  program that is run; prose after it is not)
    Thinker                                      the end of its fifth non-empty line (its
                                                  prompt asks for at most five) and its
                                                  `Next:` line, which is read
A reply with no such point wastes nothing by this count. Tokens are counted with the
member's own tokenizer (llama.cpp, vocabulary only: no weights are loaded).

    TRINITY_HOME=... python scripts/perf/wasted_tokens.py RUN [--pool local]
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import defaultdict
from pathlib import Path

from trinity_cli.pool_config import load_pool
from trinity_cli.runs.run_files import BenchRun
from trinity_cli.runs.store import RunStore
from trinity_cli.turns.program import split_reply

_MARK = re.compile(r"\banswer\b\s*(?:is\b\s*:?|[:=])|\\boxed\{|\bverdict\b\s*:", re.IGNORECASE)
_FENCE = re.compile(r"```[^\n]*\n.*?```", re.DOTALL)


def read_until(text: str, role: str, style: str) -> int | None:
    """The character offset after which `text` (the model's own reply) is not read, or None."""
    if role == "thinker":
        lines = [m for m in re.finditer(r"[^\n]*\S[^\n]*", text)]
        if len(lines) <= 5:
            return None
        keep = lines[4].end()
        nxt = [m for m in lines if re.match(r"\s*next\s*:", m.group(0), re.IGNORECASE)]
        return max(keep, nxt[-1].end()) if nxt else keep
    if style == "program":
        block = _FENCE.search(text)
        return block.end() if block else None
    marks = list(_MARK.finditer(text))
    if not marks:
        return None
    end = text.find("\n", marks[-1].end())
    return None if end < 0 else end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="bench run id (run-N) or its directory")
    parser.add_argument("--pool", default=None, help="the pool the run used (default: local)")
    args = parser.parse_args()
    path = Path(args.run).expanduser()
    path = path if (path / BenchRun.EPISODES).is_file() else RunStore().path(args.run)
    config = load_pool(args.pool)
    styles = {m.name: m.style for m in config.models}
    from llama_cpp import Llama

    from trinity_cli import assets

    files = {m.name: str(assets.resolve(m.weights)) for m in config.models if getattr(m, "weights", None)}
    vocab = {path: Llama(model_path=path, vocab_only=True, verbose=False) for path in set(files.values())}

    def tokens(model: str, text: str) -> int:
        return len(vocab[files[model]].tokenize(text.encode(), add_bos=False, special=False)) if text else 0

    generated: dict[tuple[str, str], list[int]] = defaultdict(list)
    wasted: dict[tuple[str, str], list[int]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    for episode in BenchRun(path).read_episodes():
        for turn in (episode["transcript"] or {}).get("turns", []):
            text = split_reply(turn["reply"])[0]
            key = (turn["model"], text)
            if key in seen:  # the same reply in several rows (a cached call): count it once
                continue
            seen.add(key)
            group = (turn["role"], styles.get(turn["model"], "?"))
            generated[group].append(turn["completion_tokens"])
            cut = read_until(text, turn["role"], group[1])
            wasted[group].append(tokens(turn["model"], text[cut:].strip()) if cut is not None else 0)
    print(f"{'role':<9} {'style':<8} {'replies':>7} {'tokens':>7} {'after the read part':>20} {'share':>6} "
          f"{'median':>6} {'replies with any':>16}")
    total_gen = total_waste = 0
    for group in sorted(generated):
        gen, waste = sum(generated[group]), sum(wasted[group])
        total_gen, total_waste = total_gen + gen, total_waste + waste
        some = sum(w > 0 for w in wasted[group])
        print(f"{group[0]:<9} {group[1]:<8} {len(generated[group]):>7} {gen:>7} {waste:>20} "
              f"{waste / gen if gen else 0:>6.1%} {statistics.median(wasted[group]):>6.0f} {some:>16}")
    print(f"all: {total_waste} of {total_gen} generated tokens come after the part a turn is read for "
          f"({total_waste / total_gen if total_gen else 0:.1%})")


if __name__ == "__main__":
    main()
