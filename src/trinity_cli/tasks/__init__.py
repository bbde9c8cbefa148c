"""Tasks: the questions trinity trains and benchmarks on, and how replies are scored.

    FAMILIES               name -> TaskFamily (description, answer kind, loader, package, scorer),
                           built in or a package's (entry-point group trinity_cli.tasks)
    load_split(task, s)    the items of a task's fixed "train" / "val" / "test" split (or "all")
    parse_mix(text)        "gsm8k:train,mmlu:test:200" -> [MixEntry(task, split, n)]
    sample_items(mix, s)   the items of a mix, drawn deterministically from seed `s`
    family_of(task)        the registered family of a task name (None for `file:` tasks)
    check_code_sandbox(items, strict)  refuse up front code items that must run isolated, where
                           they cannot

Built-in tasks read data shipped inside PyPI packages (builtin.py); `file:PATH` reads your
own JSONL (userfile.py). Splits are documented in registry.py. An item is scored by its
family's own scorer, else by the answer kind its `scorer` names (answer_kinds.score_item: the
kinds are the one registry of scorers); the built-in short and code kinds' scoring functions
are scoring.py's and code.py's. Code runs in sandbox/sandbox.py (with isolation.py:
bubblewrap; limits.py: resource limits; sandbox/recorded.py: recorded runs, so replayed
episodes do not run their programs again).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from trinity_cli.tasks.items import TaskFamily, TaskItem
from trinity_cli.tasks.mix import MixEntry, format_mix, parse_mix, sample_items
from trinity_cli.tasks.registry import (
    FAMILIES,
    SPLITS,
    get_task,
    load_items,
    load_split,
    split_sizes,
)
from trinity_cli.tasks.userfile import load_jsonl


@functools.cache
def family_of(task: str) -> TaskFamily | None:
    """The registered family named `task` (None for `file:` tasks and items of no family:
    they are scored by the answer kind their `scorer` names)."""
    return FAMILIES.get(task) if not task.startswith("file:") and task in FAMILIES else None


def check_code_sandbox(items: Iterable[TaskItem], strict_sandbox: bool = False) -> None:
    """Raise `SandboxUnavailable` before any episode when a code item among `items` must run
    isolated (`strict_sandbox`: the pool's `sandbox: strict`; TRINITY_SANDBOX=strict; or the
    item's own "sandbox": "strict") and isolation is unavailable here."""
    code = [item for item in items if item.scorer == "code"]
    if not code:
        return
    from trinity_cli.sandbox import sandbox

    strict = strict_sandbox or sandbox.strict_from_env() or any(
        isinstance(item.reference, dict) and item.reference.get("sandbox") == "strict" for item in code
    )
    if strict:
        sandbox.require_isolation()


__all__ = [
    "SPLITS",
    "FAMILIES",
    "MixEntry",
    "TaskItem",
    "TaskFamily",
    "format_mix",
    "check_code_sandbox",
    "get_task",
    "load_items",
    "load_jsonl",
    "load_split",
    "parse_mix",
    "sample_items",
    "family_of",
    "split_sizes",
]
