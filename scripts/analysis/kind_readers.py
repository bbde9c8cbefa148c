"""Two readers of a request's kind that do not depend on its wording, measured where the rules
(answer_kinds/registry.detect) leave a request unclaimed, on the parts of the labelled set that
have been read (tests/data/kind_set.jsonl: train, heldout, fresh, fresh2). Neither ships
(docs/kind_detection.md, "Learned readers"); the third fresh part (tests/data/kind_requests_fresh3.tsv)
is left for the reader that does, and this script never reads it.

    python scripts/analysis/kind_readers.py --reader backbone   # SmolLM2's hidden states, a linear reader
    python scripts/analysis/kind_readers.py --reader asked      # the pool's model asked once

`backbone`: the coordinator backbone's (SmolLM2-135M, numpy engine) last-layer state at the
request's last token (`--feature last`), the mean over its tokens (`mean`) or the penultimate
token as the coordinator reads it (`pen`); a three-way logistic regression (classes weighted
equally) fitted on some read parts and applied to another (`FOLDS`). A rule's claim stands; an
unclaimed request goes short when the reader's P(short) >= `--tau`, code when P(code) >= 0.5,
else free-form. One line per (L2 weight, tau): each fold's free-form requests sent short, short
questions sent free-form, code read as code.

`asked`: the unclaimed requests put to the first member of `--pool` (llama.cpp, greedy, one
token, `PROMPT`); P(short) is the first token's probability mass on "short" among the top ten.
Printed: per tau, per part, (meant, read) counts. Seconds a request are printed too (with
llama.cpp's all-logits mode, which the top ten need; slower than a plain call).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from trinity_cli.answer_kinds.registry import claimed

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "tests" / "data" / "kind_set.jsonl"
READ = ("train", "heldout", "fresh", "fresh2")
KINDS = ("freeform", "short", "code")
FOLDS = ((("train", "heldout"), "fresh"), (("train", "heldout"), "fresh2"),
         (("train", "heldout", "fresh"), "fresh2"), (("train", "heldout", "fresh2"), "fresh"))
PROMPT = ("Request:\n<<<\n{request}\n>>>\n\nWhat kind of answer does this request ask for?\n"
          "- short: one value: a number, a date or time, a name or one word, the letter of an option, yes or no\n"
          "- code: a program, a function, a command, a query or a configuration file\n"
          "- long: anything written out: an explanation, advice, a list, a plan, a story, an email, a comparison, "
          "an opinion\nAnswer with one word: short, code or long.")
SYSTEM = "You sort requests by the kind of answer they ask for."


def rows() -> list[dict[str, str]]:
    found = [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines()]
    return [row for row in found if row["split"] in READ]


def path_of(kind: str | None) -> str:
    return kind if kind in ("freeform", "code") else "short"


def features(texts: list[str], feature: str) -> np.ndarray:
    from trinity_cli.coordinator import backbone

    engine = backbone.load("smollm2-135m")
    found = []
    for text in texts:
        ids, _ = engine._tokens(text)
        hidden, _ = engine._forward(ids[:256], engine._new_cache())
        found.append(hidden.mean(0) if feature == "mean" else hidden[-2 if feature == "pen" and len(ids) > 1 else -1])
    x = np.stack(found)
    return (x - x.mean(0)) / (x.std(0) + 1e-6) / np.sqrt(x.shape[1])


def fit(x: np.ndarray, y: np.ndarray, lam: float, steps: int = 300, lr: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression, each class weighted equally, by gradient descent."""
    weights = np.zeros(len(y), np.float32)
    for k in range(len(KINDS)):
        weights[y == k] = 1.0 / max(int((y == k).sum()), 1)
    w, b = np.zeros((x.shape[1], len(KINDS)), np.float32), np.zeros(len(KINDS), np.float32)
    target = np.eye(len(KINDS), dtype=np.float32)[y]
    for _ in range(steps):
        p = probabilities(x, w, b)
        grad = (p - target) * weights[:, None] / weights.sum()
        w -= lr * (x.T @ grad + lam * w)
        b -= lr * grad.sum(0)
    return w, b


def probabilities(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    z = x @ w + b
    z -= z.max(1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(1, keepdims=True)


def read_as(claim: tuple[str | None, bool], p_short: float, p_code: float, tau: float) -> str:
    kind, cued = claim
    if cued:
        return path_of(kind)
    return "short" if p_short >= tau else "code" if p_code >= 0.5 else "freeform"


def rates(meant: list[str], read: list[str]) -> str:
    free = sum(m == "freeform" and r == "short" for m, r in zip(meant, read, strict=True))
    short = sum(m == "short" and r != "short" for m, r in zip(meant, read, strict=True))
    code = sum(m == "code" and r == "code" for m, r in zip(meant, read, strict=True))
    return (f"free->short {free}/{meant.count('freeform')}, short->free {short}/{meant.count('short')}, "
            f"code {code}/{meant.count('code')}")


def backbone_reader(data: list[dict[str, str]], feature: str) -> None:
    x = features([row["text"] for row in data], feature)
    y = np.array([KINDS.index(row["kind"]) for row in data])
    split = np.array([row["split"] for row in data])
    claims = [claimed(row["text"]) for row in data]
    meant = [row["kind"] for row in data]
    print("rules alone: " + " | ".join(
        f"{test}: " + rates([meant[i] for i in np.where(split == test)[0]],
                            [path_of(claims[i][0]) for i in np.where(split == test)[0]]) for _, test in FOLDS[:2]))
    for lam in (1e-4, 1e-3, 1e-2):
        for tau in (0.5, 0.7, 0.85):
            cells = []
            for train, test in FOLDS:
                w, b = fit(x[np.isin(split, train)], y[np.isin(split, train)], lam)
                held = np.where(split == test)[0]
                p = probabilities(x[held], w, b)
                read = [read_as(claims[i], float(p[j, 1]), float(p[j, 2]), tau) for j, i in enumerate(held)]
                cells.append(f"{'+'.join(train)} -> {test}: " + rates([meant[i] for i in held], read))
            print(f"lambda {lam:g}, tau {tau}: " + " | ".join(cells))


def asked_reader(data: list[dict[str, str]], pool_file: str) -> None:
    from llama_cpp import Llama

    from trinity_cli import assets
    from trinity_cli.pool_config import load_pool

    member = load_pool(pool_file).models[0]
    unclaimed = [row for row in data if not claimed(row["text"])[1]]
    llm = Llama(str(assets.resolve(member.weights)), n_ctx=2048, n_threads=2, verbose=False, logits_all=True)
    found = []
    start = time.perf_counter()
    for row in unclaimed:
        reply = llm.create_chat_completion(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT.format(request=row["text"])}],
            max_tokens=1, temperature=0, logprobs=True, top_logprobs=10)
        mass = dict.fromkeys(("short", "code", "long"), 0.0)
        for token in reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]:
            word = token["token"].strip().lower()
            for name in mass:
                if len(word) >= 2 and name.startswith(word):
                    mass[name] += math.exp(token["logprob"])
        found.append((row, mass))
    print(f"{len(unclaimed)} unclaimed requests, {(time.perf_counter() - start) / max(len(unclaimed), 1):.2f} s each")
    for tau in (0.3, 0.5, 0.7, 0.9):
        counts = Counter((row["split"], row["kind"], read_as((None, False), mass["short"], mass["code"], tau))
                         for row, mass in found)
        print(f"tau {tau}: " + ", ".join(f"{s} {m}->{r} {n}" for (s, m, r), n in sorted(counts.items())))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reader", choices=("backbone", "asked"), required=True)
    parser.add_argument("--feature", choices=("last", "mean", "pen"), default="last")
    parser.add_argument("--pool", default=str(ROOT / "pools" / "local.yaml"))
    args = parser.parse_args()
    data = rows()
    if args.reader == "backbone":
        backbone_reader(data, args.feature)
    else:
        asked_reader(data, args.pool)
    return 0


if __name__ == "__main__":
    sys.exit(main())
