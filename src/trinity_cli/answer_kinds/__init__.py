"""Answer kinds: one object per kind of answer (a number, a choice letter, LaTeX, code, a
free-form reply) owning everything that differs between them (base.py), registered by name
(registry.py). `answer_kind(name)` and `detect(task)` are the two ways in."""

from trinity_cli.answer_kinds.registry import KINDS, answer_kind, detect, item_checks, kind_name

__all__ = ["KINDS", "answer_kind", "detect", "item_checks", "kind_name"]
