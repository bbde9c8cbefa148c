"""Task families by name (`FAMILIES`, entry-point group `trinity_cli.tasks`: built-in ones and a
package's alike) and the fixed train / val / test splits.

Splits. Every item of a task goes to exactly one split, decided by its id alone:

    u = first 64 bits of sha256("trinity-split-v1:<salt>:<id>") / 2**64
    test  if u < 0.20
    val   if 0.20 <= u < 0.40
    train otherwise

where <salt> is the task name for registered tasks and "file" for `file:` tasks (so the same
file reached by two different paths splits the same way). A family of a fixed, published set
may instead give exact counts (`TaskFamily.split_counts` = (test, val)): its items in the same
`u` order, the first `test` of them test, the next `val` val, the rest train (IFEval: 150 / 100 /
291; IFBench: all test). An item's split therefore never
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

from trinity_cli import seeds
from trinity_cli.errors import ConfigError, did_you_mean
from trinity_cli.registry import Registry
from trinity_cli.tasks.items import TaskFamily, TaskItem

SPLITS: tuple[str, ...] = ("train", "val", "test", "all")
SPLIT_ALIASES = {"validation": "val", "dev": "val"}
TEST_FRACTION = 0.20
VAL_FRACTION = 0.20
SPLIT_SALT_VERSION = "trinity-split-v1"
FILE_PREFIX = "file:"


GROUP = "trinity_cli.tasks"

# Task families by name (items.TaskFamily). The built-in ones register here exactly as a
# package registers its own, by entry point: `[project.entry-points."trinity_cli.tasks"]
# mytask = "my_pkg:FAMILY"` (docs/extending.md). `file:PATH` is not registered: it is any JSONL file.
FAMILIES: Registry[TaskFamily] = Registry(GROUP, "task", check=lambda found: isinstance(found, TaskFamily),
                                          expected="a TaskFamily instance (trinity_cli.tasks.items)")

for _name, _target in (
    ("gsm8k", "GSM8K"), ("math500", "MATH500"), ("arc-challenge", "ARC_CHALLENGE"), ("arc-easy", "ARC_EASY"),
    ("mmlu", "MMLU"), ("humaneval", "HUMANEVAL"), ("mbpp", "MBPP"), ("instructions", "INSTRUCTIONS"),
    ("ifeval", "IFEVAL"), ("ifbench", "IFBENCH"),
):
    FAMILIES.register(_name, f"trinity_cli.tasks.builtin:{_target}")


def get_task(name: str) -> TaskFamily:
    """The family of a registered task, or of `file:PATH` (a JSONL file, see userfile.py);
    an unknown name raises ConfigError with the close names."""
    if name.startswith(FILE_PREFIX):
        from trinity_cli.tasks.userfile import load_jsonl

        path = name[len(FILE_PREFIX) :]
        if not path:
            raise ConfigError("'file:' needs a path", hint="write file:path/to/tasks.jsonl")
        return TaskFamily(name=name, description=f"tasks from {path}", answer_kind=None,
                          loader=functools.partial(load_jsonl, path, name))
    if name not in FAMILIES:
        raise ConfigError(f"unknown task {name!r}", hint=did_you_mean(name, [*FAMILIES.names(), "file:PATH"]))
    return FAMILIES.get(name)


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
def _registered_items(name: str) -> tuple[TaskItem, ...]:
    family = FAMILIES.get(name)
    with FAMILIES.guard(name, "its loader"):  # a package's loader that raises: named, with the fix
        return tuple(family.load())


def load_items(task: str) -> list[TaskItem]:
    """Every item of `task`, in the source's order. A registered family is read once per process."""
    family = get_task(task)
    items = family.load() if task.startswith(FILE_PREFIX) else list(_registered_items(task))
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise ConfigError(f"task {task!r} has two items with id {item.id!r}", hint="ids must be unique")
        seen.add(item.id)
    return items


def _placed(task: str) -> list[tuple[str, TaskItem]]:
    """Every item of `task` with its split, in split-position order (module docstring): by the
    fractions, or, for a family with `split_counts` (test, val), the first `test` items in that
    order test, the next `val` val, the rest train."""
    salt = "file" if task.startswith(FILE_PREFIX) else task
    placed = sorted((split_position(salt, item.id), item.id, item) for item in load_items(task))
    counts = None if task.startswith(FILE_PREFIX) else FAMILIES.get(task).split_counts
    if counts is None:
        return [(split_of(position), item) for position, _, item in placed]
    test, val = counts
    return [("test" if rank < test else "val" if rank < test + val else "train", item)
            for rank, (_, _, item) in enumerate(placed)]


def load_split(task: str, split: str) -> list[TaskItem]:
    """The items of `task` in `split` ("train", "val", "test" or "all"), in a fixed order."""
    split = normalize_split(split)
    return [item for where, item in _placed(task) if split == "all" or where == split]


def split_sizes(task: str) -> dict[str, int]:
    """How many items of `task` each split holds."""
    sizes = {"train": 0, "val": 0, "test": 0}
    for where, _ in _placed(task):
        sizes[where] += 1
    return sizes
