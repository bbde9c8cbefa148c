"""Answer kinds: one object per kind of answer (a number, a choice letter, LaTeX, code, a
free-form reply) owning everything that differs between them (base.py), registered by name
(registry.py), and the scorers of task items. `answer_kind(name)` and `detect(task)` are the
two ways in (`resolve_kind(kind, task)`: either, once, for an episode); `score_item(item,
reply)` grades a reply."""

from trinity_cli.answer_kinds.registry import (
    KIND_FROM,
    KINDS,
    answer_kind,
    check_scoring,
    claimed,
    detect,
    item_checks,
    kind_name,
    played_as,
    resolve_kind,
    score_item,
    scorer,
)

__all__ = ["KINDS", "KIND_FROM", "answer_kind", "check_scoring", "claimed", "detect", "item_checks", "kind_name",
           "played_as", "resolve_kind", "score_item", "scorer"]
