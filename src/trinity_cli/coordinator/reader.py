"""A reader: a policy that reads what the replies show and decides whom to ask, when to stop
and which answer is final, by a linear score of a small documented vector of reply features.

Every call a reader makes is a member asked from the task alone (role Worker, `alone`: the
call a matrix row holds, bench/matrix.py), at most `calls` calls (default: one per member),
round-robin in the order of its priority (a member's second call is its first fresh attempt,
as `agree`'s fourth is), so the episodes it plays replay from a sample matrix with no model
call (evolve/reader_fit.py plays them there, through this module's own `decide`, `stop` and
`final`).

Reply features (FEATURES_VERSION "reply-features v1") of an answering turn t of member m:
    member      which member answered (one weight per member: how much its answer counts)
    confidence  t's tokens' mean log-probability (backends/confidence.py "mean") minus the
                member's centre (the median over the training replies of that member and
                family); 0 when the member gave no log-probabilities (an API member, a reply
                recorded before they were kept), and its `measured` flag is False
    low         t's lowest 16-token window's mean log-probability, centred the same way
    capped      -1 when t stopped at its token cap (finish_reason "length"), else 0
    examples    on code: +1 when t's code passed the task's shown examples, -1 when it
                failed them, 0 when none were run; elsewhere 0
Answers are grouped as the scorer reads them (turns/settle.answer_of; on code each reply is
a group of its own). A group's score is the sum over its replies of
    member[m] + conf[m] * confidence + low[m] * low + capped_w * capped + examples_w * examples
with one set of weights per family of task (FAMILIES: "code", "choice", "answer" for every
other scorer kind and for free questions).

Decisions, per family f:
    whom        the member with the fewest calls so far, highest `priority[f][m]` first,
                ties to pool order (members the loop masks are skipped)
    stop        after n calls (n < calls): when the best group's score minus the second
                best's (0 without one) is at least `margin[f][n-1]`, and, once every member
                was asked (n >= members), the best group's score is at least `floor[f]`
    final       the best group's first reply; ties: on code the latest, elsewhere the
                earliest (agree's plurality and code rules); no group: the latest reply
With priority falling in pool order, member = 1, examples_w = 1, a margin of 1.5 for each call
before every member was asked and 0.5 after, floor = 1.5 and every other weight 0, a reader
plays `agree` over the members at `calls` calls (`Reader.agree_start`): it stops once two
answers agree (code: once a reply passes its examples). The floor moves with the margins (weight
group "margin") when `calls` exceeds the members; otherwise no stop reads it.

File (a head directory holding one file, manifest.json): {"policy": "reader", "format": 1,
"features": FEATURES_VERSION, "name": str, "pool": {"name", "models"}, "models": [str],
"calls": int (absent: one per member), "families": {family: {"priority", "member", "conf",
"low": [float per member], "capped_w", "examples_w", "floor": float (absent: 1.5, unread
at one call a member),
"margin": [float per call but the last]}},
"centres": {family: {member: {"mean", "low": float}}}, "made": "agree" | "route" | "evolved",
"trained": bool, "recipe": dict | null, ...}; any other key is kept as it is (what made it:
evolve/reader_fit.py). Written atomically.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli import paths
from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.answer_kinds.short import SHORT
from trinity_cli.errors import ConfigError, HeadMismatch
from trinity_cli.messages import ROLES, ChatMessage, Decision, Role, Turn
from trinity_cli.turns import rules, settle
from trinity_cli.turns.source_rules import SourceRules

FEATURES_VERSION = "reply-features v1"
FORMAT = 1
FAMILIES = ("answer", "choice", "code")
PER_MEMBER = ("priority", "member", "conf", "low")
SCALARS = ("capped_w", "examples_w", "floor")
WEIGHT_GROUPS = (*PER_MEMBER, "capped_w", "examples_w", "margin")  # the floor moves with "margin": both stop
START_FLOOR = 1.5


def family(kind: AnswerKind) -> str:
    """The family of weights `kind`'s replies are scored by (module docstring): the kind's
    `reader_weights` (answer_kinds/base.py)."""
    return kind.reader_weights


@dataclass(frozen=True)
class ReplyFeatures:
    """One answering turn's features (module docstring); `measured`: whether its
    log-probabilities were there."""

    member: int
    confidence: float
    low: float
    capped: float
    examples: float
    measured: bool


@dataclass
class Reader:
    """A reader's weights and the centres of its confidence features (module docstring)."""

    pool: str
    models: list[str]
    weights: dict[str, dict[str, Any]]
    centres: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    calls: int = 0  # at most this many calls an episode (0: one per member)

    def __post_init__(self) -> None:
        m = len(self.models)
        self.calls = self.calls or m
        if self.calls < 1:
            raise ConfigError(f"reader for pool {self.pool!r}: it must make at least one call, not {self.calls}")
        for fam in FAMILIES:
            w = self.weights.get(fam)
            if w is None:
                raise ConfigError(f"reader for pool {self.pool!r}: no weights for the {fam!r} family")
            w.setdefault("floor", START_FLOOR)  # readers written before floors were kept make no call past m
            if any(len(w[k]) != m for k in PER_MEMBER) or len(w["margin"]) != self.calls - 1:
                raise ConfigError(f"reader for pool {self.pool!r}: the {fam!r} weights do not fit {m} members "
                                  f"and {self.calls} calls")

    @property
    def made(self) -> str:
        """"agree" (the start: it plays `agree`), "route" (`route`: a fixed router) or
        "evolved" (a generation of its search kept)."""
        made = self.manifest.get("made")
        return made if made in ("evolved", "route") else "agree"

    @property
    def learned(self) -> bool:
        """Whether a search moved its weights (what a head's `learned` says of a head)."""
        return self.made == "evolved"

    @property
    def uniform(self) -> bool:
        """A reader never routes at random (what a head's `uniform` says of an untrained head)."""
        return False

    policy = "reader"  # what it is, as a run record and `/v1/models` say it (a head says "head")

    def describe(self) -> str:
        """Who plays, in a few words (ask's first line, serve's `/v1/models`): its name and how
        it was made."""
        return f"reader {self.manifest.get('name')} ({self.made}: reads the replies' signals)"

    @property
    def trained_max_turns(self) -> int:
        """Its turn budget: `calls`."""
        return self.calls

    def check(self, pool_name: str, models: Sequence[str]) -> None:
        """A reader routes the members it was made for, by name and order."""
        if list(models) != self.models or pool_name != self.pool:
            raise HeadMismatch(f"reader {self.manifest.get('name')!r} was made for pool {self.pool!r} {self.models}, "
                               f"not {pool_name!r} {list(models)}",
                               "make one for this pool with `trinity evolve --reader`")

    @classmethod
    def agree_start(cls, pool: str, models: Sequence[str],
                    centres: dict[str, dict[str, dict[str, float]]] | None = None, calls: int = 0) -> Reader:
        """The reader that plays `agree` over `models` in pool order at `calls` calls (0: one
        call a member; module docstring)."""
        m, calls = len(models), calls or len(models)
        margins = [1.5 if n < m else 0.5 for n in range(1, calls)]
        weights = {fam: {"priority": [float(m - i) for i in range(m)], "member": [1.0] * m, "conf": [0.0] * m,
                         "low": [0.0] * m, "capped_w": 0.0, "examples_w": 1.0, "floor": START_FLOOR,
                         "margin": margins}
                   for fam in FAMILIES}
        return cls(pool, list(models), weights, centres or {}, {"made": "agree", "trained": False}, calls)

    @classmethod
    def route(cls, pool: str, models: Sequence[str], routes: dict[str, str]) -> Reader:
        """The reader that plays a fixed router: one call, to `routes[family]` (a member of
        `models` for each of FAMILIES), whose reply is the answer."""
        m = len(models)
        weights = {fam: {"priority": [float(m if name == routes[fam] else m - 1 - i) for i, name in enumerate(models)],
                         "member": [1.0] * m, "conf": [0.0] * m, "low": [0.0] * m, "capped_w": 0.0,
                         "examples_w": 1.0, "floor": START_FLOOR, "margin": []}
                   for fam in FAMILIES}
        return cls(pool, list(models), weights, {}, {"made": "route", "trained": False, "routes": dict(routes)}, 1)

    # -- the parameter vector the search moves (evolve/reader_fit.py) --
    @property
    def n_params(self) -> int:
        return self.flat().size

    def flat(self) -> np.ndarray:
        """Every weight in one vector: per family (FAMILIES order), PER_MEMBER lists, SCALARS,
        then the margins."""
        parts: list[float] = []
        for fam in FAMILIES:
            w = self.weights[fam]
            for key in PER_MEMBER:
                parts += w[key]
            parts += [w[key] for key in SCALARS]
            parts += w["margin"]
        return np.asarray(parts, dtype=float)

    def mask(self, groups: Collection[str]) -> np.ndarray:
        """Which entries of `flat()` belong to the weight groups named (WEIGHT_GROUPS)."""
        unknown = sorted(set(groups) - set(WEIGHT_GROUPS))
        if unknown:
            raise ConfigError(f"no weight group {unknown[0]!r} in a reader", f"name some of {', '.join(WEIGHT_GROUPS)}")
        m, out = len(self.models), []
        floor = "margin" in groups and self.calls > m  # at one call a member no stop reads the floor
        for _ in FAMILIES:
            for key in PER_MEMBER:
                out += [key in groups] * m
            out += [floor if key == "floor" else key in groups for key in SCALARS]
            out += ["margin" in groups] * (self.calls - 1)
        return np.asarray(out, dtype=bool)

    def with_flat(self, vector: np.ndarray) -> Reader:
        values = [float(v) for v in np.asarray(vector, dtype=float).ravel()]
        if len(values) != self.n_params:
            raise ConfigError(f"a reader of {len(self.models)} members has {self.n_params} weights, got {len(values)}")
        m, at, weights = len(self.models), 0, {}
        for fam in FAMILIES:
            w: dict[str, Any] = {}
            for key in PER_MEMBER:
                w[key], at = values[at:at + m], at + m
            for key in SCALARS:
                w[key], at = values[at], at + 1
            w["margin"], at = values[at:at + self.calls - 1], at + self.calls - 1
            weights[fam] = w
        return Reader(self.pool, list(self.models), weights, self.centres, dict(self.manifest), self.calls)

    # -- reading replies --
    def features(self, turn: Turn, kind: AnswerKind) -> ReplyFeatures:
        """`turn`'s reply features (module docstring)."""
        fam = family(kind)
        member = self.models.index(turn.model)
        stats = turn.logprob_stats or {}
        centre = self.centres.get(fam, {}).get(turn.model, {})
        mean, low = stats.get("mean"), stats.get("low")
        measured = mean is not None and low is not None and not stats.get("unmatched")
        passed = turn.examples_passed
        return ReplyFeatures(
            member=member,
            confidence=float(mean or 0.0) - centre.get("mean", 0.0) if measured else 0.0,
            low=float(low or 0.0) - centre.get("low", 0.0) if measured else 0.0,
            capped=-1.0 if turn.finish_reason == "length" else 0.0,
            examples=0.0 if fam != "code" or passed is None else (1.0 if passed else -1.0),
            measured=measured)

    def reply_score(self, turn: Turn, kind: AnswerKind) -> float:
        w, f = self.weights[family(kind)], self.features(turn, kind)
        return (w["member"][f.member] + w["conf"][f.member] * f.confidence + w["low"][f.member] * f.low
                + w["capped_w"] * f.capped + w["examples_w"] * f.examples)

    def groups(self, turns: Sequence[Turn], kind: AnswerKind) -> list[tuple[float, list[Turn]]]:
        """The answering turns grouped by answer (code: one group a reply), each with its
        score, in the order their first reply came."""
        answering = [t for t in turns if rules.proposes_answer(t)]
        if kind.judged:  # one group a reply
            return [(self.reply_score(t, kind), [t]) for t in answering if settle.gives_answer(t.reply, kind)]
        found: list[tuple[Any, list[Turn]]] = []
        for turn in answering:
            mine = settle.answer_of(turn, kind)
            if mine is None or not turn.vote:
                continue
            group = next((g for g in found if kind.same(g[0], mine)), None)
            if group is None:
                found.append((mine, [turn]))
            else:
                group[1].append(turn)
        return [(sum(self.reply_score(t, kind) for t in g), g) for _, g in found]

    def best(self, groups: list[tuple[float, list[Turn]]], kind: AnswerKind) -> int:
        if kind.judged:  # ties to the latest
            return max(range(len(groups)), key=lambda i: (groups[i][0], i))
        return max(range(len(groups)), key=lambda i: (groups[i][0], -i))


class ReaderSource(SourceRules):
    """A reader as the turn loop's decision source (episode/loop.py's `DecisionSource`); what
    `ask` and `serve` hold for a reader where they hold a `Coordinator` for a head (`head`,
    `backbone_ref`: None and `loads_backbone` False, it reads no backbone; `warm`; `close`)."""

    stop_reason = "read"  # its score said stop (module docstring)
    backbone_ref = None
    loads_backbone = False

    def __init__(self, reader: Reader) -> None:
        self.reader = reader

    @property
    def head(self) -> Reader:
        return self.reader

    def warm(self) -> None:
        """Nothing to load: a reader reads no backbone."""

    def close(self) -> None:
        """Nothing to close: a reader holds no model and no cache."""

    @property
    def models(self) -> list[str]:
        return self.reader.models

    @property
    def max_calls(self) -> int:
        return self.reader.calls

    def decide(self, task: str, turns: Sequence[Turn], rng: np.random.Generator, excluded: Collection[str] = (),
               context: Sequence[ChatMessage] = (), greedy: bool = False, kind: AnswerKind = SHORT) -> Decision:
        return self.next_member(turns, kind, excluded)

    def next_member(self, turns: Sequence[Turn], kind: AnswerKind, excluded: Collection[str] = ()) -> Decision:
        """Whom to ask next (module docstring, "whom"), from the task alone, as a Worker."""
        models = self.reader.models
        priority = self.reader.weights[family(kind)]["priority"]
        usable = [i for i, m in enumerate(models) if m not in excluded]
        if not usable:
            raise ConfigError("every member of the reader's pool is masked for this task")
        calls = {i: sum(t.model == models[i] for t in turns) for i in usable}
        pick = min(usable, key=lambda i: (calls[i], -priority[i], i))
        return Decision(model=models[pick], role=Role.WORKER,
                        model_probs=[float(i == pick) for i in range(len(models))],
                        role_probs=[float(r is Role.WORKER) for r in ROLES], alone=True)

    def stop(self, turns: Sequence[Turn], kind: AnswerKind) -> int | None:
        """After the latest turn: the index of the best group's first reply when its lead is at
        least the margin for this many calls (module docstring), else None."""
        n = len(turns)
        weights = self.reader.weights[family(kind)]
        margins = weights["margin"]
        if n == 0 or n > len(margins):
            return None
        groups = self.reader.groups(turns, kind)
        if not groups:
            return None
        best = self.reader.best(groups, kind)
        second = max((s for i, (s, _) in enumerate(groups) if i != best), default=0.0)
        floor = weights["floor"] if n >= len(self.reader.models) else -np.inf  # read once every member was asked
        if groups[best][0] - second >= margins[n - 1] and groups[best][0] >= floor:
            return groups[best][1][0].index
        return None

    def final(self, turns: Sequence[Turn], kind: AnswerKind) -> str | None:
        groups = self.reader.groups(turns, kind)
        if groups:
            return groups[self.reader.best(groups, kind)][1][0].reply
        answering = [t for t in turns if rules.proposes_answer(t)]
        return answering[-1].reply if answering else None


def save(reader: Reader, directory: Path) -> None:
    """Write `reader` as a head directory (module docstring, File)."""
    doc = {**reader.manifest, "policy": "reader", "format": FORMAT, "features": FEATURES_VERSION,
           "pool": {"name": reader.pool, "models": reader.models}, "models": reader.models, "calls": reader.calls,
           "families": reader.weights, "centres": reader.centres}
    directory.mkdir(parents=True, exist_ok=True)
    paths.atomic_write_bytes(directory / "manifest.json", (json.dumps(doc, indent=1) + "\n").encode())


def is_reader(directory: Path) -> bool:
    """Whether the head directory holds a reader (its manifest says "policy": "reader")."""
    try:
        return json.loads((directory / "manifest.json").read_text(encoding="utf-8")).get("policy") == "reader"
    except (OSError, ValueError, AttributeError):
        return False


def load(directory: Path) -> Reader:
    """The reader in `directory`; a damaged or foreign file is one ConfigError line."""
    where = directory / "manifest.json"
    try:
        doc = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read reader {where}: {e}", "write it again with `trinity evolve --reader`") from e
    if doc.get("policy") != "reader" or doc.get("format") != FORMAT or doc.get("features") != FEATURES_VERSION:
        raise ConfigError(f"{where} is not a reader of format {FORMAT} reading {FEATURES_VERSION!r}",
                          "make it again with `trinity evolve --reader`")
    manifest = {k: v for k, v in doc.items() if k not in ("families", "centres", "calls")}
    try:
        return Reader(doc["pool"]["name"], list(doc["models"]), doc["families"], doc.get("centres") or {}, manifest,
                      int(doc.get("calls") or 0))
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{where} lacks {e}", "make it again with `trinity evolve --reader`") from e
