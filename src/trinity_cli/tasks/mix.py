"""Task mixes: which items a run trains or benchmarks on.

A mix is a comma-separated list of `TASK:SPLIT[:N]` entries:

    gsm8k:train,arc-challenge:test:200,file:my_tasks.jsonl:all:50

TASK is a registered task family (tasks/registry.py: built in, or a package's) or `file:PATH`
(the path may contain ":" but not ","), SPLIT is train, val, test or all ("validation" and
"dev" mean val), and N, if given, draws N items of that split instead of taking all of them;
`A-B` instead of N takes the items ranked A to B (1-based, both included: `gsm8k:test:101-200`
is the 100 items drawn after the first 100).
A task may appear with several splits, but not twice with the same split, nor with `all`
and another split. An entry whose split holds no item is refused when it is drawn, with how
many items each split holds (a small file's ids may leave its test split empty: take `:all`).

Sampling is a pure function of (mix, seed) and the task data; it uses no random-number
generator state at all. Each item gets the rank sha256("<seed>:<task>:<split>:<id>") and an
entry with N takes the N lowest-ranked items, so raising N keeps the items drawn before and
changing one entry leaves the others' draws alone. The combined list is then ordered by
sha256("<seed>:mix:<task>:<id>"), which interleaves the tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from trinity_cli import seeds
from trinity_cli.errors import ConfigError, did_you_mean, option
from trinity_cli.tasks.items import TaskItem
from trinity_cli.tasks.registry import (
    FAMILIES,
    FILE_PREFIX,
    SPLIT_ALIASES,
    SPLITS,
    load_split,
    normalize_split,
    split_sizes,
)

MIX_HINT = "write TASK:SPLIT[:N] entries separated by commas, e.g. gsm8k:train,mmlu:test:200"


class MixEntry(NamedTuple):
    """One entry of a mix: take `n` items (all when None) of `task`'s `split`, from the one
    ranked `first` (1-based) on."""

    task: str
    split: str
    n: int | None = None
    first: int = 1

    def __str__(self) -> str:
        if self.n is not None and self.first != 1:
            return f"{self.task}:{self.split}:{self.first}-{self.first + self.n - 1}"
        return f"{self.task}:{self.split}" + (f":{self.n}" if self.n is not None else "")


def parse_mix(text: str) -> list[MixEntry]:
    """Parse a mix string; a `ConfigError` names the offending entry."""
    entries: list[MixEntry] = []
    for raw in text.split(","):
        raw = raw.strip()
        if raw:
            entries.append(_parse_entry(raw))
    if not entries:
        raise ConfigError("the task mix is empty", hint=MIX_HINT)
    _check_overlaps(entries)
    return entries


def format_mix(entries: Sequence[MixEntry]) -> str:
    """The mix string that `parse_mix` turns back into `entries`."""
    return ",".join(str(entry) for entry in entries)


def _parse_entry(raw: str) -> MixEntry:
    if raw.startswith(FILE_PREFIX):
        parts = raw[len(FILE_PREFIX) :].split(":")
        n, first = _parse_n(parts.pop(), raw) if len(parts) > 2 and _is_count(parts[-1]) else (None, 1)
        if len(parts) < 2:
            raise ConfigError(f"mix entry {raw!r} names no split", hint=f"write {raw}:test, {raw}:all ...")
        split = _parse_split(parts.pop(), raw)
        path = ":".join(parts).strip()
        if not path:
            raise ConfigError(
                f"mix entry {raw!r} has no file path", hint="write file:path/to/tasks.jsonl:test"
            )
        if not Path(path).expanduser().is_file():
            raise ConfigError(f"task file not found: {path}", hint=f"check the path in mix entry {raw!r}")
        return MixEntry(FILE_PREFIX + path, split, n, first)
    parts = [part.strip() for part in raw.split(":")]
    task = parts[0]
    if task not in FAMILIES:
        raise ConfigError(
            f"unknown task {task!r} in mix entry {raw!r}", hint=did_you_mean(task, [*FAMILIES.names(), "file:PATH"])
        )
    if len(parts) == 1:
        raise ConfigError(
            f"mix entry {raw!r} names no split", hint=f"write {task}:train, {task}:val or {task}:test"
        )
    if len(parts) > 3:
        raise ConfigError(f"mix entry {raw!r} has too many ':' parts", hint=MIX_HINT)
    split = _parse_split(parts[1], raw)
    n, first = _parse_n(parts[2], raw) if len(parts) == 3 else (None, 1)
    return MixEntry(task, split, n, first)


def _parse_split(text: str, raw: str) -> str:
    text = text.strip()
    try:
        return normalize_split(text)
    except ConfigError:
        raise ConfigError(
            f"unknown split {text!r} in mix entry {raw!r}", hint=did_you_mean(text, [*SPLITS, *SPLIT_ALIASES])
        ) from None


def _is_count(text: str) -> bool:
    a, dash, b = text.strip().partition("-")
    return a.isdigit() and (not dash or b.isdigit())


def _parse_n(text: str, raw: str) -> tuple[int, int]:
    """The count and first rank of an `N` or `A-B` part."""
    text = text.strip()
    a, dash, b = text.partition("-")
    if dash and a.isdigit() and b.isdigit() and 1 <= int(a) <= int(b):
        return int(b) - int(a) + 1, int(a)
    if not text.isdigit() or int(text) == 0:
        raise ConfigError(
            f"item count {text!r} in mix entry {raw!r} is neither a positive integer nor a range A-B",
            hint="write e.g. gsm8k:train:100 or gsm8k:test:101-200, or leave the count out to take the whole split",
        )
    return int(text), 1


def _check_overlaps(entries: Sequence[MixEntry]) -> None:
    splits_of: dict[str, list[str]] = {}
    for entry in entries:
        taken = splits_of.setdefault(entry.task, [])
        if entry.split in taken:
            raise ConfigError(
                f"the mix lists {entry.task}:{entry.split} twice",
                hint="merge the entries into one, with the total count",
            )
        if taken and (entry.split == "all" or "all" in taken):
            raise ConfigError(
                f"the mix takes {entry.task}:all and another split of it",
                hint="'all' already contains every split",
            )
        taken.append(entry.split)


def _rank(*parts: object) -> bytes:
    return seeds.digest(":".join(str(part) for part in parts))


def sample_items(mix: str | Sequence[MixEntry], seed: int) -> list[TaskItem]:
    """The items of `mix` drawn with `seed` (see the module docstring); same inputs, same list."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an integer, got {seed!r}", hint=f"e.g. {option('seed')} 0")
    entries = parse_mix(mix) if isinstance(mix, str) else [MixEntry(*entry) for entry in mix]
    if not isinstance(mix, str):
        entries = [MixEntry(e.task, normalize_split(e.split), e.n, e.first) for e in entries]
        _check_overlaps(entries)
    chosen: list[TaskItem] = []
    for entry in entries:
        items = load_split(entry.task, entry.split)
        if not items:
            raise _empty(entry)
        if entry.n is None:
            chosen.extend(items)
            continue
        last = entry.first - 1 + entry.n
        if last > len(items):
            asks = f"{entry.n} items" if entry.first == 1 else f"items up to rank {last}"
            raise ConfigError(
                f"mix entry {entry} asks for {asks} but the split has {len(items)}",
                hint=f"ask for at most {len(items)}, or leave the count out",
            )
        ranked = sorted(items, key=lambda item: _rank(seed, entry.task, entry.split, item.id))
        chosen.extend(ranked[entry.first - 1 : last])
    return sorted(chosen, key=lambda item: _rank(seed, "mix", item.task, item.id))


def _empty(entry: MixEntry) -> ConfigError:
    """The error of an entry whose split holds no item: how many each split holds, and what to
    take instead (a small file's items fall in whichever split their ids send them to)."""
    sizes = split_sizes(entry.task)
    held = ", ".join(f"{split} {count}" for split, count in sizes.items())
    if entry.task.startswith(FILE_PREFIX):
        hint = (f"take every item of the file: {entry.task}:all (ids decide the splits, so a small "
                "file leaves some empty)")
    elif any(sizes.values()):
        hint = "use a split that holds items: " + ", ".join(f"{entry.task}:{s}" for s, n in sizes.items() if n)
    else:
        hint = f"the task {entry.task} gives no items: check the package that provides it"
    return ConfigError(f"mix entry {entry} selects no items: its {sum(sizes.values())} items are split {held}",
                       hint=hint)
