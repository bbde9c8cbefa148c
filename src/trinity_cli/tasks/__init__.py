"""Tasks: the questions trinity trains and benchmarks on, and how replies are scored.

    TASKS                  name -> TaskSpec (description, scorer, loader, package)
    load_split(task, s)    the items of a task's fixed "train" / "val" / "test" split (or "all")
    parse_mix(text)        "gsm8k:train,mmlu:test:200" -> [MixEntry(task, split, n)]
    sample_items(mix, s)   the items of a mix, drawn deterministically from seed `s`
    score_item(item, out)  1.0 if the reply `out` answers `item` correctly, else 0.0
    check_code_sandbox(items, strict)  refuse up front code items that must run isolated, where
                           they cannot

Built-in tasks read data shipped inside PyPI packages (builtin.py); `file:PATH` reads your
own JSONL (userfile.py). Splits are documented in registry.py, scorers in scoring.py, the
code sandbox in sandbox/sandbox.py (with isolation.py: bubblewrap; limits.py: resource limits;
sandbox/recorded.py: recorded runs, so replayed episodes do not run their programs again).
"""

from __future__ import annotations

from collections.abc import Iterable

from trinity_cli.tasks.items import TaskItem
from trinity_cli.tasks.mix import MixEntry, format_mix, parse_mix, sample_items
from trinity_cli.tasks.registry import (
    SPLITS,
    TASKS,
    TaskSpec,
    get_task,
    load_items,
    load_split,
    split_sizes,
)
from trinity_cli.tasks.scoring import SCORERS, get_scorer
from trinity_cli.tasks.userfile import load_jsonl


def score_item(item: TaskItem, output: str, strict_sandbox: bool = False) -> float:
    """Score a model's reply to `item` with the item's scorer: 1.0 or 0.0.

    `strict_sandbox` (a pool's `sandbox: strict`): code items refuse to run without isolation.
    """
    reference = item.reference
    if strict_sandbox and item.scorer == "code" and isinstance(reference, dict):
        reference = {**reference, "sandbox": "strict"}
    return get_scorer(item.scorer)(output, reference)


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
    "SCORERS",
    "SPLITS",
    "TASKS",
    "MixEntry",
    "TaskItem",
    "TaskSpec",
    "format_mix",
    "check_code_sandbox",
    "get_scorer",
    "get_task",
    "load_items",
    "load_jsonl",
    "load_split",
    "parse_mix",
    "sample_items",
    "score_item",
    "split_sizes",
]
