"""Your own tasks, from a JSONL file: use them as `file:PATH` wherever a task name goes.

One JSON object per line (blank lines are skipped):

    {"prompt": "What is 7 * 6?", "answer": 42, "scorer": "numeric", "id": "q1"}

    prompt   required, non-empty string: sent to the model as is, so say how to answer
             (e.g. "End with 'Answer: <number>'")
    answer   required; by scorer:
               numeric  a number or number text: 42, "1,234", "-0.5", "3/4"
               math     LaTeX text, as it would appear inside \\boxed{}
               choice   a letter A-E (either case)
               exact    a string (or number), compared after normalisation
               code     test code run after the reply's code: a string, a list of assert
                        lines, or {"tests": ..., "prelude": ..., "entry_point": ...,
                        "timeout_s": ..., "sandbox": "auto" | "strict", "examples": ...};
                        strict refuses to run the code without bubblewrap isolation;
                        `examples` (optional, a string or a list of assert lines) are the
                        tests the prompt shows: episodes run every code answer against
                        them (turns/settle.py), so keep them out of `tests`, which scores
    scorer   required: the name of an answer kind that scores, built in (numeric | math |
             choice | exact | code | freeform) or an installed package's (`trinity pools`
             lists them; answer_kinds/registry.py). A run refuses, before it starts, a name
             no kind has (with the close ones) or a kind that cannot score (`short`). A
             scorer with no reference check below (freeform, a package's kind) takes the
             answer as written; a scorer of your own is an answer kind or a task family of
             your own (docs/extending.md)
    id       optional string or integer, unique in the file; defaults to "line-N". The id
             decides the item's split, so keep ids stable when you edit the file.

Any other key is an error, as is anything else malformed: the message names the file and
the line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trinity_cli.errors import ConfigError, did_you_mean
from trinity_cli.tasks.answers import parse_reference_number
from trinity_cli.tasks.items import TaskItem

FIELDS = ("prompt", "answer", "scorer", "id")
CODE_FIELDS = ("tests", "prelude", "entry_point", "timeout_s", "sandbox", "examples")


def load_jsonl(path: str | Path, task: str | None = None) -> list[TaskItem]:
    """The items of a task file; `task` names them (default: "file:PATH")."""
    path = Path(path).expanduser()
    task = task or f"file:{path}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"task file not found: {path}", hint="check the path after 'file:'") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read task file {path}: {exc}", hint="it must be UTF-8 JSONL") from None
    items: list[TaskItem] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{where}: not valid JSON ({exc.msg})", hint="write one JSON object per line"
            ) from None
        item = _item(record, task, lineno, where)
        if item.id in seen:
            raise ConfigError(
                f"{where}: id {item.id!r} already used on line {seen[item.id]}",
                hint="give every line its own id",
            )
        seen[item.id] = lineno
        items.append(item)
    if not items:
        raise ConfigError(f"task file {path} has no items", hint="write one JSON object per line")
    return items


def _item(record: Any, task: str, lineno: int, where: str) -> TaskItem:
    if not isinstance(record, dict):
        raise ConfigError(
            f"{where}: expected a JSON object, got {type(record).__name__}",
            hint='write {"prompt": ..., "answer": ..., "scorer": ...}',
        )
    for key in record:
        if key not in FIELDS:
            raise ConfigError(f"{where}: unknown field {key!r}", hint=did_you_mean(key, FIELDS))
    for key in ("prompt", "answer", "scorer"):
        if key not in record:
            raise ConfigError(
                f"{where}: missing field {key!r}", hint="every line needs prompt, answer and scorer"
            )
    prompt, scorer = record["prompt"], record["scorer"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise ConfigError(f"{where}: 'prompt' must be a non-empty string", hint="put the question text there")
    # Which kinds exist is the answer kinds' registry's to say, below this layer: a run checks
    # the name before it starts (answer_kinds.check_scoring); here only its form.
    if not isinstance(scorer, str) or not scorer.strip():
        raise ConfigError(f"{where}: 'scorer' must name an answer kind",
                          hint='e.g. "scorer": "numeric" (trinity pools lists the answer kinds)')
    item_id = record.get("id", f"line-{lineno}")
    if isinstance(item_id, bool) or not isinstance(item_id, (str, int)) or str(item_id) == "":
        raise ConfigError(f"{where}: 'id' must be a non-empty string or an integer", hint='e.g. "id": "q17"')
    reference = _reference(record["answer"], scorer, where)
    return TaskItem(task=task, id=str(item_id), prompt=prompt, reference=reference, scorer=scorer)


def _reference(answer: Any, scorer: str, where: str) -> Any:
    """The checked reference for `scorer`, in the form the built-in kind of that name scores
    (`REFERENCES`, scoring.py); a scorer with no check here (freeform, a package's kind) takes
    the answer as written, never another form."""
    check = REFERENCES.get(scorer)
    return check(answer, scorer, where) if check is not None else answer


def _numeric_reference(answer: Any, scorer: str, where: str) -> Any:
    try:
        parse_reference_number(answer)
    except ValueError:
        raise ConfigError(
            f"{where}: answer {answer!r} is not a number",
            hint='numeric answers look like 42, "1,234", -0.5 or "3/4"',
        ) from None
    return answer if isinstance(answer, (int, float)) else str(answer).strip()


def _choice_reference(answer: Any, scorer: str, where: str) -> str:
    letter = str(answer).strip().upper() if isinstance(answer, str) else ""
    if len(letter) != 1 or letter not in "ABCDE":
        raise ConfigError(
            f"{where}: choice answer must be a letter A-E, got {answer!r}",
            hint="list the choices in the prompt as A. ... B. ...",
        )
    return letter


def _text_reference(answer: Any, scorer: str, where: str) -> str:
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)) or str(answer).strip() == "":
        raise ConfigError(
            f"{where}: {scorer} answer must be a non-empty string", hint='e.g. "\\frac{1}{2}"'
        )
    return str(answer).strip()


def _code_reference(answer: Any, scorer: str, where: str) -> dict[str, Any]:
    hint = 'give test code: "assert f(1) == 2", a list of asserts, or {"tests": ..., "entry_point": ...}'
    if isinstance(answer, str):
        answer = {"tests": answer}
    elif isinstance(answer, list):
        if not answer or not all(isinstance(line, str) for line in answer):
            raise ConfigError(f"{where}: code answer list must hold test lines (strings)", hint=hint)
        answer = {"tests": "\n".join(answer)}
    if not isinstance(answer, dict):
        raise ConfigError(f"{where}: code answer must be test code", hint=hint)
    for key in answer:
        if key not in CODE_FIELDS:
            raise ConfigError(
                f"{where}: unknown code answer field {key!r}", hint=did_you_mean(key, CODE_FIELDS)
            )
    tests = answer.get("tests")
    if not isinstance(tests, str) or not tests.strip():
        raise ConfigError(f"{where}: code answer needs non-empty 'tests'", hint=hint)
    for key in ("prelude", "entry_point"):
        if answer.get(key) is not None and not isinstance(answer[key], str):
            raise ConfigError(f"{where}: code answer {key!r} must be a string", hint=hint)
    timeout = answer.get("timeout_s", 10)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 600:
        raise ConfigError(f"{where}: 'timeout_s' must be a number of seconds in (0, 600]", hint="e.g. 10")
    sandbox = answer.get("sandbox", "auto")
    if sandbox not in ("auto", "strict"):
        raise ConfigError(f"{where}: 'sandbox' must be \"auto\" or \"strict\", got {sandbox!r}",
                          hint="strict refuses to run the code without bubblewrap")
    examples = answer.get("examples") or ""
    if isinstance(examples, list) and all(isinstance(line, str) for line in examples):
        examples = "\n".join(examples)
    if not isinstance(examples, str):
        raise ConfigError(f"{where}: code answer 'examples' must be test code (a string or a list of lines)",
                          hint='e.g. "examples": ["assert f(1) == 2"]')
    for what, code in (("tests", tests), ("examples", examples)):
        try:
            compile(code, f"{where} {what}", "exec")
        except SyntaxError as exc:
            raise ConfigError(
                f"{where}: the {what} are not valid Python ({exc.msg}, line {exc.lineno})",
                hint=f"fix the {what} code",
            ) from None
    return {
        "tests": tests,
        "prelude": answer.get("prelude") or "",
        "entry_point": answer.get("entry_point"),
        "timeout_s": float(timeout),
        **({"sandbox": "strict"} if sandbox == "strict" else {}),
        **({"examples": examples} if examples.strip() else {}),
    }


# How a line's answer becomes its reference, by scorer (scorers missing here take it as written).
REFERENCES: dict[str, Callable[[Any, str, str], Any]] = {
    "numeric": _numeric_reference,
    "choice": _choice_reference,
    "math": _text_reference,
    "exact": _text_reference,
    "code": _code_reference,
}
