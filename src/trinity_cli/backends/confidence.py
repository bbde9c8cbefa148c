"""How sure a model was of its own reply: a small summary of the chosen tokens'
log-probabilities, computed where each token is sampled (backends/llamacpp.py) and carried
as `Completion.logprob_stats`.

Layout (version 1; every value rounded to 4 decimals):
    {"v": 1,
     "n": tokens summarised (the reply's sampled tokens, the end-of-generation token left out),
     "mean": mean log-probability of the chosen tokens (natural log, under the model's own
             distribution: log-softmax of the raw logits, before temperature, top-p or a
             grammar),
     "min": the lowest of them,
     "tail": mean over the last `WINDOW` tokens (where the answer usually is),
     "low": the lowest mean over any `WINDOW` consecutive tokens (DeepConf's lowest group
            confidence; the mean itself when the reply is shorter),
     "entropy": mean entropy (nats) of the distributions the tokens were drawn from,
     "certainty": mean self-certainty (Kang et al. 2025): KL(uniform || p) of each token's
                  distribution, in nats; absent in replies recorded before it was kept}
A reply of no token has {"v": 1, "n": 0} alone. `None` in a Completion means the backend
gives none (an API model, a recorded call made before they were kept); a call made again
fills them in without changing its key (pool/pool.py, "Filling log-probabilities").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

VERSION = 1
WINDOW = 16
FIELDS = ("mean", "min", "tail", "low", "entropy")


def summarize(logprobs: Sequence[float], entropies: Sequence[float],
              certainties: Sequence[float] = ()) -> dict[str, Any]:
    """The version-1 summary (module docstring) of one reply's per-token values ("certainty"
    only when `certainties` are given)."""
    n = len(logprobs)
    if n == 0:
        return {"v": VERSION, "n": 0}
    window = min(WINDOW, n)
    sums = [sum(logprobs[:window])]
    for i in range(window, n):
        sums.append(sums[-1] + logprobs[i] - logprobs[i - window])
    out = {
        "mean": sum(logprobs) / n,
        "min": min(logprobs),
        "tail": sum(logprobs[-window:]) / window,
        "low": min(sums) / window,
        "entropy": sum(entropies) / len(entropies) if entropies else 0.0,
    }
    if certainties:
        out["certainty"] = sum(certainties) / len(certainties)
    return {"v": VERSION, "n": n, **{k: round(float(v), 4) for k, v in out.items()}}


def constant(mean: float, n: int) -> dict[str, Any]:
    """The summary of `n` tokens each of log-probability `mean` (a scripted model's)."""
    return summarize([mean] * n, [0.0] * n)
