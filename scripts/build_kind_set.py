"""Build the labelled set that kind detection is chosen and measured on (tests/data/kind_set.jsonl)
from the task data that ships with trinity-cli and tests/data/kind_requests.tsv.

One JSON object a line: {"id", "source", "split", "kind", "text"}, where `kind` is what a person
means (freeform: a whole answer; short: a number, a letter, yes/no, a name; code: a program) and
`split` is "train" (rules are chosen on it), "heldout" (measured once with the first rules, then read,
so since issue 86's second round it is chosen on too), "fresh" (written after the held-out part was
read and before any rule was chosen on it, measured once after the second round; its misreads read,
so since the third round it is chosen on too) or "fresh2" (written for the third round by someone who
had read neither the rules nor the earlier sets, before any third-round rule change; never used for
choosing, measured once):

    source        kind      train                               heldout
    own           by line   tasks/registry.split_position("kind-detect", id) >= 0.4, the rest held out
    ifeval        freeform  its train split (291)               its val split (100); test never included
    ifbench       freeform  none (the transfer set)             every prompt
    gsm8k         short     the first 60 of its train split     the first 40 of val + test
    math500       short     60                                  40
    arc-challenge short     40                                  30
    mmlu          short     60                                  40
    mbpp          code      40                                  30
    fresh         by line   none                                none: all in split "fresh"
                            (tests/data/kind_requests_fresh.tsv, 172 requests)
    fresh2        by line   none                                none: all in split "fresh2"
                            (tests/data/kind_requests_fresh2.tsv, 200 requests; the one an
                            earlier part holds left out: 199)

A benchmark question is written as a person types it (`as_typed`): the answer-format line that
trinity's loaders add ("End your reply with a line of the form 'Answer: <number>'", "Put the
final answer in \\boxed{}", "Choose the correct answer...", "Reply with the complete function...")
and MMLU's "The following is a multiple-choice question about ..." header are taken off; the
lettered choices and MBPP's shown test stay. "First N" is in each split's own order
(tasks/registry.load_split), so the set depends on the shipped data alone.

    python scripts/build_kind_set.py           # rewrite tests/data/kind_set.jsonl
    python scripts/build_kind_set.py --check   # exit 1 if it differs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from trinity_cli.tasks.builtin import CODE_INSTRUCTION, MATH_INSTRUCTION, NUMERIC_INSTRUCTION
from trinity_cli.tasks.items import TaskItem
from trinity_cli.tasks.registry import load_split, split_of, split_position

ROOT = Path(__file__).resolve().parents[1]
OWN = ROOT / "tests" / "data" / "kind_requests.tsv"
FRESH = ROOT / "tests" / "data" / "kind_requests_fresh.tsv"
FRESH2 = ROOT / "tests" / "data" / "kind_requests_fresh2.tsv"
OUT = ROOT / "tests" / "data" / "kind_set.jsonl"
SALT = "kind-detect"
BENCHMARKS = {"gsm8k": ("short", 60, 40), "math500": ("short", 60, 40), "arc-challenge": ("short", 40, 30),
              "mmlu": ("short", 60, 40), "mbpp": ("code", 40, 30)}
_INSTRUCTIONS = (NUMERIC_INSTRUCTION, MATH_INSTRUCTION, CODE_INSTRUCTION)
_CHOOSE = re.compile(r"\n+Choose the correct answer\. End your reply with a line of the form 'Answer: <letter>'.*\Z",
                     re.S)
_HEADER = re.compile(r"\AThe following is a multiple-choice question about [^\n]*\.\n+")


def as_typed(item: TaskItem) -> str:
    """The item's question without the answer-format lines trinity's loaders add (module docstring)."""
    text = item.prompt
    for line in _INSTRUCTIONS:
        text = text.removesuffix(line)
    return _HEADER.sub("", _CHOOSE.sub("", text)).strip()


def _requests(path: Path) -> list[tuple[int, str, str]]:
    """(line number, kind, text) of each request of a TSV; a literal \\n in a text is a line break."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        kind, text = line.split("\t", 1)
        rows.append((number, kind, text.strip().replace("\\n", "\n")))
    return rows


def own_requests() -> list[dict[str, str]]:
    rows = []
    for number, kind, text in _requests(OWN):
        item_id = f"own-{number}"
        split = "train" if split_of(split_position(SALT, item_id)) == "train" else "heldout"
        rows.append({"id": item_id, "source": "own", "split": split, "kind": kind, "text": text})
    return rows


def fresh_requests(name: str = "fresh", path: Path = FRESH) -> list[dict[str, str]]:
    """The fresh held-out requests of `path`: every one in split `name` (module docstring)."""
    return [{"id": f"{name}-{number}", "source": name, "split": name, "kind": kind, "text": text}
            for number, kind, text in _requests(path)]


def task_rows(task: str, kind: str, splits: dict[str, tuple[str, ...]],
              counts: dict[str, int | None]) -> list[dict[str, str]]:
    rows = []
    for part, names in splits.items():
        items = [item for name in names for item in load_split(task, name)]
        for item in items[: counts[part]]:
            rows.append({"id": f"{task}/{item.id}", "source": task, "split": part, "kind": kind,
                         "text": as_typed(item)})
    return rows


def build() -> list[dict[str, str]]:
    rows = own_requests()
    rows += task_rows("ifeval", "freeform", {"train": ("train",), "heldout": ("val",)},
                      {"train": None, "heldout": None})
    rows += task_rows("ifbench", "freeform", {"heldout": ("test",)}, {"heldout": None})
    for task, (kind, train, heldout) in BENCHMARKS.items():
        rows += task_rows(task, kind, {"train": ("train",), "heldout": ("val", "test")},
                          {"train": train, "heldout": heldout})
    rows += fresh_requests()
    # A request of the second fresh part that an earlier part already holds is not fresh: left out.
    seen = {row["text"] for row in rows}
    return rows + [row for row in fresh_requests("fresh2", FRESH2) if row["text"] not in seen]


def render(rows: list[dict[str, str]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs from a rebuild")
    text = render(build())
    if parser.parse_args().check:
        same = OUT.is_file() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.relative_to(ROOT)}: {'up to date' if same else 'differs from a rebuild'}")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {text.count(chr(10))} requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
