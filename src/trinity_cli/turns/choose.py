"""Which of a free-form request's drafts is the answer: the ways of choosing among drafts, with
no model call. bench/drafts.py scores every one of them from a recorded matrix; the draft policy
(episode/schedules.py `drafts`) plays the one chosen on validation items.

A draft (`Draft`) is what a Worker asked alone wrote, with what trinity knows of it without the
benchmark's own checker: whether it passed the constraints the request states (`passed`: None
when the request states none trinity can read), its self-certainty (`certainty`: mean
KL(uniform || p) of its tokens, backends/confidence.py; None when the backend gives none) and its
tokens' mean log-probability (`confidence`).

A draft that degenerates fails its checks whatever the request states: one that repeats a line
or a run of words past the limits (`repeats`, tasks/repeats.py; unless the request asks for
repetition) or, with `CUT_FAILS` (off by default), one whose call stopped at the token cap
(`cut`). Every rule
chooses among the drafts that do not degenerate when there are any (`pick`), and what is shown
of a draft that repeats is trimmed (`Draft.printed`).

Rules (`CHOOSERS`: name -> drafts in the order drawn -> the index of the answer):

    first         the first draft
    passing       the first draft that passed the checks, else the first
    mbr           minimum Bayes risk (consensus): the draft whose mean similarity to the others
                  is highest (ties: the earlier); similarity is ROUGE-L F1 over lower-cased
                  words (`similarity`, word LCS computed by rapidfuzz)
    passing-mbr   mbr among the drafts that passed, else mbr among all
    certainty     the highest self-certainty (ties, or none known: the earlier)
    passing-certainty   the same among the drafts that passed, else among all
    confidence    the highest mean log-probability

Where a request states no constraint trinity reads, `passed` is None for every draft, and the
passing rules act as their fallbacks do.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from trinity_cli.messages import Turn
from trinity_cli.tasks.repeats import trim

_WORD = re.compile(r"[a-z0-9]+")
# A draft cut at the token cap fails its checks (module docstring).
CUT_FAILS = False


@dataclass(frozen=True)
class Draft:
    """One draft and what is known of it without the benchmark's checker (module docstring)."""

    reply: str
    passed: bool | None = None
    certainty: float | None = None
    confidence: float | None = None
    repeats: bool = False
    cut: bool = False

    @property
    def degenerate(self) -> bool:
        """It repeats past the limits, or (with `CUT_FAILS`) was cut at the token cap."""
        return self.repeats or (self.cut and CUT_FAILS)

    @property
    def printed(self) -> str:
        """What is shown of it: the reply, its repeats trimmed (tasks/repeats.py) when it has any."""
        return trim(self.reply) if self.repeats else self.reply

    @classmethod
    def of(cls, turn: Turn) -> Draft:
        """A recorded turn as a draft: its checks' result (`Turn.examples`: the stated
        constraints' verdict, None when none ran or none was stated, and False when it
        degenerates), whether it repeats, whether the call stopped at the token cap, and its
        log-probability summary's certainty and mean."""
        checks, stats = turn.examples or {}, turn.logprob_stats or {}
        passed = bool(checks.get("passed")) if checks.get("checked") else None
        draft = cls(turn.reply, passed, stats.get("certainty"), stats.get("mean"), bool(checks.get("repeats")),
                    turn.finish_reason == "length")
        return replace(draft, passed=False) if draft.degenerate else draft


def what_failed(turn: Turn) -> str | None:
    """What trinity's checks found wrong with the draft `turn`, in the checks' own sentences
    ("; "-joined: the stated constraints that failed, then its repeats); None when it did not
    fail (`Draft.of(turn).passed` is not False) or the call failed. A draft cut at the token cap
    fails only with `CUT_FAILS`, said as such."""
    if turn.error is not None or Draft.of(turn).passed is not False:
        return None
    checks = turn.examples or {}
    said = [checks.get("error"), checks.get("repeats")]
    if CUT_FAILS and turn.finish_reason == "length":
        said.append("it stops in the middle, at the length limit")
    return "; ".join(s for s in said if s) or None


def words(text: str) -> list[str]:
    """ROUGE's tokens: lower-cased runs of letters and digits."""
    return _WORD.findall(text.lower())


def similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """ROUGE-L F1 of two word lists: 2 LCS / (|a| + |b|); 0.0 when both are empty."""
    from rapidfuzz.distance import LCSseq  # C++ LCS; only needed here

    if not a and not b:
        return 0.0
    return 2 * LCSseq.similarity(a, b) / (len(a) + len(b))


def consensus(texts: Sequence[str]) -> list[float]:
    """Each text's mean similarity to the others (a lone text: 0.0)."""
    tokens = [words(t) for t in texts]
    n = len(tokens)
    if n < 2:
        return [0.0] * n
    pair = {(i, j): similarity(tokens[i], tokens[j]) for i in range(n) for j in range(i + 1, n)}
    return [sum(pair[min(i, j), max(i, j)] for j in range(n) if j != i) / (n - 1) for i in range(n)]


def _best(scores: Sequence[float | None], among: Sequence[int]) -> int:
    known = [(s, -i) for i in among if (s := scores[i]) is not None]
    return -max(known)[1] if known else among[0]


def _passing(drafts: Sequence[Draft]) -> list[int]:
    return [i for i, d in enumerate(drafts) if d.passed]


def first(drafts: Sequence[Draft]) -> int:
    return 0


def passing(drafts: Sequence[Draft]) -> int:
    return next(iter(_passing(drafts)), 0)


def mbr(drafts: Sequence[Draft], among: Sequence[int] | None = None) -> int:
    among = list(range(len(drafts))) if among is None else list(among)
    if len(among) == 1:
        return among[0]
    scores = consensus([drafts[i].reply for i in range(len(drafts))])
    return _best([scores[i] if i in among else None for i in range(len(drafts))], among)


def passing_mbr(drafts: Sequence[Draft]) -> int:
    return mbr(drafts, _passing(drafts) or None)


def certainty(drafts: Sequence[Draft], among: Sequence[int] | None = None) -> int:
    return _best([d.certainty for d in drafts], list(range(len(drafts))) if among is None else among)


def passing_certainty(drafts: Sequence[Draft]) -> int:
    return certainty(drafts, _passing(drafts) or None)


def confidence(drafts: Sequence[Draft]) -> int:
    return _best([d.confidence for d in drafts], list(range(len(drafts))))


CHOOSERS: dict[str, Callable[[Sequence[Draft]], int]] = {
    "first": first, "passing": passing, "mbr": mbr, "passing-mbr": passing_mbr, "certainty": certainty,
    "passing-certainty": passing_certainty, "confidence": confidence,
}


def pick(rule: str, drafts: Sequence[Draft]) -> int:
    """The index of `rule`'s pick (`CHOOSERS`) among the drafts that do not degenerate, or among
    all of them when every one does."""
    among = [i for i, d in enumerate(drafts) if not d.degenerate] or list(range(len(drafts)))
    return among[CHOOSERS[rule]([drafts[i] for i in among])]
