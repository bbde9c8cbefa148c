"""Answer kinds by name (registry.py's `Registry`, entry-point group `trinity_cli.answer_kinds`),
and which kind a question asks for.

Built-in kinds register here exactly as a package would; a package's kind is an
`AnswerKind` instance named by its entry point. `detect(task)` tries every kind's `detect`
in `priority` order (code 10, choice 20, math 30, numeric 40, a package's 50 by default,
freeform 90) and gives the first that claims the task, else None: a short answer read
kind-free (`answer_kind(None)`, the kind named "short"). A run record keeps the name
(None for "short", as records before kinds were named did).
"""

from __future__ import annotations

from typing import Any

from trinity_cli.answer_kinds.base import AnswerKind, Checks
from trinity_cli.registry import Registry

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


def answer_kind(name: str | None) -> AnswerKind:
    """The kind named `name`; None, or a name no kind has (a task file's own scorer, such as
    "contains"), is the kind-free "short" answer. Names a person gives are checked where they
    come in (`kind_name`)."""
    return KINDS.get(name if name is not None and name in KINDS else "short")


def kind_name(name: str | None) -> str | None:
    """`name` as runs record it ("short" as None); an unknown name raises ConfigError with the
    close matches."""
    return None if name is None or KINDS.get(name).name == "short" else name


def detect(task: str) -> str | None:
    """The kind `task`'s wording asks for (module docstring), or None for a short answer."""
    kinds = sorted((KINDS.get(n) for n in KINDS.names()), key=lambda k: k.priority)
    found = next((k for k in kinds if k.detect(task)), None)
    return None if found is None or found.name == "short" else found.name


def item_checks(scorer: str | None, task: str, reference: Any) -> Checks | None:
    """What trinity checks on every answer of a scored item (its kind's `checks` of the item's
    reference: a code item's shown examples, a free-form item's constraints); None for a
    scorer that is no answer kind's."""
    checks: Checks | None = answer_kind(scorer).checks(task, reference)  # "short" has none
    return checks
