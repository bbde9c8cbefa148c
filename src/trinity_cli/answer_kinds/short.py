"""The answer kinds read as a short value and compared by it (numeric, choice, math, exact,
and the kind-free short answer), and code, judged by running it. Their readings and scorers
are tasks/answers.py's and tasks/scoring.py's, unchanged; what each kind asks of an episode
is declared on its class (answer_kinds/base.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.answer_kinds.examples import Examples, defines_code
from trinity_cli.tasks import scoring
from trinity_cli.tasks.answers import (
    FinalAnswer,
    choice_answer,
    exact_answer,
    extract_choice,
    extract_math_answer,
    math_answer,
    number_answer,
    number_text,
)
from trinity_cli.tasks.code import extract_code, score_code
from trinity_cli.tasks.doctests import examples_in_text


class ShortAnswer(AnswerKind):
    """A short answer whose form the question does not state: read kind-free."""

    name = "short"
    summary = "a short answer the question does not give a form for (read kind-free)"


class Marked(AnswerKind):
    """A short value of a stated form, read by its scorer's reader: the question's wording
    (`hint`) asks for it, `reader` reads a reply, `finder` gives it as the reply writes it
    (what `ask` prints), `scorer` grades it (tasks/answers.py, tasks/scoring.py)."""

    def __init__(self, name: str, summary: str, reader: Callable[[str], FinalAnswer | None],
                 scorer: Callable[[str, Any], float], finder: Callable[[str], str | None] | None = None,
                 hint: str | None = None, priority: int = 50, reader_weights: str = "answer") -> None:
        self.name, self.summary, self.priority, self.reader_weights = name, summary, priority, reader_weights
        self.hint = re.compile(hint, re.I) if hint is not None else None
        self.reader, self.scorer, self.finder = reader, scorer, finder

    def detect(self, task: str) -> bool:
        return self.hint is not None and bool(self.hint.search(task))

    def read(self, reply: str) -> FinalAnswer | None:
        return self.reader(reply)

    def gives_answer(self, reply: str) -> bool:
        return self.read(reply) is not None

    def found(self, text: str) -> str | None:
        return self.finder(text) if self.finder is not None else None

    def score(self, output: str, reference: Any) -> float:
        return self.scorer(output, reference)


class Code(AnswerKind):
    """A program, judged by running it: against the task's shown examples on every answer
    (turns/settle.py), read or tested by a Verifier shown it."""

    name, priority, reader_weights = "code", 10, "code"
    settles = "judged"
    summary = "a Python function or program (MBPP, HumanEval), run against the task's shown examples"
    retry_from_task_alone = True
    failed_check_override = "the proposed code failed its examples: verifier acts as worker, alone"
    passing_checks_settle = True
    _last_step = ("Reply with the complete code the task asks for, in one ```python block that defines it: "
                  "not a description of earlier steps' code.")
    _hint = re.compile(r"```python|\bpython (?:code|function)\b|\bwrite a (?:python )?function\b", re.I)

    def detect(self, task: str) -> bool:
        return bool(self._hint.search(task))

    def last_step_note(self, style: str) -> str:
        """A `program` member's step is a program already: it is told nothing more."""
        return "" if style == "program" else self._last_step

    def read(self, reply: str) -> None:
        return None  # programs are compared by running them, not by reading

    def vote_key(self, answer: str, reference: Any = None) -> str | None:
        """The code itself, blank lines and trailing spaces aside: equal programs vote together."""
        entry = reference.get("entry_point") if isinstance(reference, dict) else None
        code = extract_code(answer, entry)
        return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip()) or None

    def gives_answer(self, reply: str) -> bool:
        return defines_code(reply)

    def answer_text(self, text: str, printed: str | None = None) -> str:
        return extract_code(text).strip("\n")

    def score(self, output: str, reference: Any) -> float:
        return score_code(output, reference)

    def checks(self, task: str, reference: Any = None) -> Examples | None:
        """A scored item's shown examples (its reference's "examples"), else the asserts and
        `>>>` lines the question shows (tasks/doctests.py); None when there are none."""
        if reference is not None:
            return Examples.from_reference(reference)
        source = examples_in_text(task)
        return Examples(source) if source else None


SHORT, CODE = ShortAnswer(), Code()
NUMERIC = Marked("numeric", "a number (GSM8K); asked for by 'Answer: <number>'", number_answer,
                 scoring.score_numeric, number_text, r"answer:\s*<number>", priority=40)
CHOICE = Marked("choice", "a choice letter A-E (ARC, MMLU); asked for by lettered options", choice_answer,
                scoring.score_choice, extract_choice, r"answer:\s*<letter>|\n\s*\(?[B-E][.)]\s", priority=20,
                reader_weights="choice")
MATH = Marked("math", "a LaTeX answer compared by equivalence (MATH-500); asked for by \\boxed", math_answer,
              scoring.score_math, extract_math_answer, r"\\boxed", priority=30)
EXACT = Marked("exact", "a short text compared after normalising case, spaces and outer punctuation", exact_answer,
               scoring.score_exact)
