"""Answer kinds by name (registry.py's `Registry`, entry-point group `trinity_cli.answer_kinds`),
which kind a question asks for, and how a task item is scored: the answer kinds are trinity's
one registry of scorers.

Built-in kinds register here exactly as a package would; a package's kind is an
`AnswerKind` instance named by its entry point. `detect(task)` tries every kind's `detect`
in `priority` order (code 10, choice 20, math 30, numeric 40, a package's 50 by default,
freeform 60: a request that says it wants a whole answer, short 80: the short path's cues)
and gives the first that claims the task (None for "short": a short answer read kind-free,
`answer_kind(None)`), else "freeform" (`FALLBACK`): a guess fails toward the whole answer,
and the short path is taken only where a number, a letter, yes/no or code is clearly asked.
It is measured on a labelled set of requests (docs/kind_detection.md). `resolve_kind(kind, task)` is how
an episode gets its kind once, as the object it then carries (from a name, or None to detect
it). A kind that cannot be imported or whose `detect` raises is set aside with one warning
(registry.py) and detection goes on without it. A run record keeps the name (None for
"short", as records before kinds were named did). `played_as(items, kind_from)`: bench and
matrix items played as their family's kind, or as the kind `ask` would detect.

Scoring. An item's `scorer` names the answer kind that grades it (`AnswerKind.score`; the
built-in kinds call the functions of tasks/scoring.py, tasks/code.py and constraints.py),
unless its task family has a scorer of its own (`TaskFamily.scorer`), which then decides:
`score_item`. `check_scoring(items)` refuses, before a run starts, an item whose scorer is no
kind's name ("did you mean") or names a kind that cannot score (the kind-free "short" cannot).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from trinity_cli.answer_kinds.base import AnswerKind, Checks
from trinity_cli.errors import ConfigError, did_you_mean, option
from trinity_cli.registry import Registry
from trinity_cli.tasks import FAMILIES, family_of
from trinity_cli.tasks.items import TaskItem

GROUP = "trinity_cli.answer_kinds"

KINDS: Registry[AnswerKind] = Registry(GROUP, "answer kind", check=lambda found: isinstance(found, AnswerKind),
                                       expected="an AnswerKind instance (trinity_cli.answer_kinds.base)")

for _name, _target in (
    ("short", "trinity_cli.answer_kinds.short:SHORT"),
    ("numeric", "trinity_cli.answer_kinds.short:NUMERIC"),
    ("choice", "trinity_cli.answer_kinds.short:CHOICE"),
    ("math", "trinity_cli.answer_kinds.short:MATH"),
    ("exact", "trinity_cli.answer_kinds.short:EXACT"),
    ("code", "trinity_cli.answer_kinds.short:CODE"),
    ("freeform", "trinity_cli.answer_kinds.freeform:FREEFORM"),
):
    KINDS.register(_name, _target)


FALLBACK = "freeform"  # what `detect` gives a request no kind claims


def answer_kind(name: str | None) -> AnswerKind:
    """The kind named `name`; None, or a name no kind has (a task family's items may name
    their family's own scorer, such as "contains"), is the kind-free "short" answer. Names a
    person gives are checked where they come in (`kind_name`)."""
    return KINDS.get(name if name is not None and name in KINDS else "short")


def resolve_kind(kind: AnswerKind | str | None, task: str) -> AnswerKind:
    """The answer kind an episode of `task` carries, resolved once where the episode starts
    (episode/loop.run_episode, policies/base.Episode, conductor/run.run_conductor): `kind`
    itself when it is one, the kind a name names (`answer_kind`), or, for None, the kind
    `task`'s wording asks for (`detect`)."""
    if isinstance(kind, AnswerKind):
        return kind
    return answer_kind(detect(task) if kind is None else kind)


def kind_name(name: str | None) -> str | None:
    """`name` as runs record it ("short" as None); an unknown name raises ConfigError with the
    close matches."""
    return None if name is None or KINDS.get(name).name == "short" else name


def detect(task: str) -> str | None:
    """The kind `task`'s wording asks for (module docstring): the first kind in `priority` order
    whose `detect` claims it, None when that is the kind-free short answer, and "freeform" when
    none does (a guess fails toward the whole answer)."""
    return detect_among(KINDS.usable(), task)


def detect_among(kinds: dict[str, AnswerKind], task: str) -> str | None:
    """`detect` with the usable kinds already listed (`KINDS.usable()`, which reads the installed
    entry points each time): scripts/analysis/kind_detection.py times the rules apart from that."""
    return claimed_among(kinds, task)[0]


def claimed(task: str) -> tuple[str | None, bool]:
    """`detect`'s kind for `task`, and whether a kind's wording cues claimed it (False: no cue
    did, the kind is `FALLBACK`'s guess). A conversation's message with no cue of its own follows
    the exchange before it (ask/conversation.follow_up_kind)."""
    return claimed_among(KINDS.usable(), task)


def claimed_among(kinds: dict[str, AnswerKind], task: str) -> tuple[str | None, bool]:
    """`claimed` with the usable kinds already listed."""
    for name, kind in sorted(kinds.items(), key=lambda found: found[1].priority):
        try:
            claims = kind.detect(task)
        except Exception as exc:  # a package's detect: set aside, the others still decide
            KINDS.tolerate(name, "its detect", exc)
            continue
        if claims:
            return (None if kind.name == "short" else kind.name), True
    return FALLBACK, False


KIND_FROM = ("preset", "detect")  # where bench and matrix take the kind an item is played as (`played_as`)


def played_as(items: Sequence[TaskItem], kind_from: str = "preset") -> list[TaskItem]:
    """`items` as their episodes play them. "preset": as they are, each played as the kind its
    `scorer` names (its family's). "detect": an item of a family that scores replies with a scorer
    of its own (IFEval, IFBench: `TaskFamily.scorer`) is played as the kind `ask` reads from its
    prompt (`detect`; "short" for the kind-free short answer), so a bench or matrix row says what
    `trinity ask` gives for it; its score is its family's, as before. An item that its kind scores
    keeps its kind (there the kind is the scorer). ConfigError for another `kind_from`."""
    if kind_from not in KIND_FROM:
        raise ConfigError(f"{option('kind_from')} {kind_from!r}: expected {' or '.join(KIND_FROM)}",
                          did_you_mean(kind_from, KIND_FROM))
    if kind_from == "preset":
        return list(items)
    return [item if _needs_kind(item) else replace(item, scorer=detect(item.prompt) or "short") for item in items]


# What a listing tries a package's `detect` on (`listed`): a question of each shape trinity reads.
SAMPLE_QUESTIONS = ("What is 12*7?", "Write a Python function that returns the reverse of a string.",
                    "Write a short poem about the sea, in exactly three lines.")


def listed(name: str) -> AnswerKind:
    """The kind named `name` as `trinity pools` lists it: a package's `detect` is tried on
    `SAMPLE_QUESTIONS` first, so one that raises is set aside (no warning: the listing says
    why) and ConfigError names it. A `detect` that raises only on other questions is set aside
    when detection first meets one (`detect`)."""
    kind = KINDS.get(name)
    if name not in KINDS.built_in():
        with KINDS.guard(name, "its detect"):
            for question in SAMPLE_QUESTIONS:
                kind.detect(question)
    return kind


def item_checks(scorer: str | None, task: str, reference: Any) -> Checks | None:
    """What trinity checks on every answer of a scored item (its kind's `checks` of the item's
    reference: a code item's shown examples, a free-form item's constraints); None for a
    scorer that is no answer kind's."""
    checks: Checks | None = answer_kind(scorer).checks(task, reference)  # "short" has none
    return checks


def can_score(kind: AnswerKind) -> bool:
    """Whether `kind` grades answers: it gives `score` of its own (AnswerKind's raises)."""
    return type(kind).score is not AnswerKind.score


def scorer(name: str) -> AnswerKind:
    """The kind that scores items whose `scorer` is `name`; ConfigError when no kind has that
    name (with the close names of those that score) or the kind cannot score."""
    if name not in KINDS:
        scoring = [n for n, kind in KINDS.usable().items() if can_score(kind)]
        raise ConfigError(f"unknown scorer {name!r}: a scorer is an answer kind ({', '.join(scoring)})",
                          f"{did_you_mean(name, scoring)} A scorer of your own is an answer kind or a task "
                          "family of your own: docs/extending.md")
    kind = KINDS.get(name)
    if not can_score(kind):
        raise ConfigError(f"the answer kind {name!r} cannot score: it gives no `score`",
                          "name a kind that scores (trinity pools lists them), or give the task family a scorer")
    return kind


def _needs_kind(item: TaskItem) -> bool:
    family = family_of(item.task)
    return family is None or family.scorer is None


def check_scoring(items: Iterable[TaskItem]) -> None:
    """Raise ConfigError, before any episode, when one of `items` could not be scored (module
    docstring); the message names the task and the item."""
    seen: set[tuple[str, str]] = set()
    for item in items:
        if (item.task, item.scorer) in seen or not _needs_kind(item):
            continue
        seen.add((item.task, item.scorer))
        try:
            scorer(item.scorer)
        except ConfigError as exc:
            raise ConfigError(f"task {item.task}, item {item.id!r}: {exc.raw_message}", exc.raw_hint) from None


def score_item(item: TaskItem, output: str, strict_sandbox: bool = False) -> float:
    """Score a model's reply to `item`: 1.0 or 0.0, by its task family's own scorer if it has
    one, else by the answer kind its `scorer` names (module docstring). A package's scorer that
    raises is set aside and named (registry.py).

    `strict_sandbox` (a pool's `sandbox: strict`): code items refuse to run without isolation.
    """
    reference = item.reference
    if strict_sandbox and item.scorer == "code" and isinstance(reference, dict):
        item = replace(item, reference={**reference, "sandbox": "strict"})
    family = family_of(item.task)
    if family is not None and family.scorer is not None:
        with FAMILIES.guard(family.name, "its scorer"):
            return float(family.scorer(output, item.reference))
    kind = scorer(item.scorer)
    with KINDS.guard(item.scorer, "its score"):
        return float(kind.score(output, item.reference))
