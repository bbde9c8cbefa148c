"""The answer kinds read as a short value and compared by it (numeric, choice, math, exact,
and the kind-free short answer), and code, judged by running it. Their readings and scorers
are tasks/answers.py's and tasks/scoring.py's, unchanged; what each kind asks of an episode
is declared on its class (answer_kinds/base.py)."""

from __future__ import annotations

import re
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


class Numeric(AnswerKind):
    name, priority = "numeric", 40
    summary = "a number (GSM8K); asked for by 'Answer: <number>'"
    _hint = re.compile(r"answer:\s*<number>", re.I)

    def detect(self, task: str) -> bool:
        return bool(self._hint.search(task))

    def read(self, reply: str) -> FinalAnswer | None:
        return number_answer(reply)

    def gives_answer(self, reply: str) -> bool:
        return self.read(reply) is not None

    def found(self, text: str) -> str | None:
        return number_text(text)

    def score(self, output: str, reference: Any) -> float:
        return scoring.score_numeric(output, reference)


class Choice(AnswerKind):
    name, priority, reader_family = "choice", 20, "choice"
    summary = "a choice letter A-E (ARC, MMLU); asked for by lettered options"
    _hint = re.compile(r"answer:\s*<letter>|\n\s*\(?[B-E][.)]\s", re.I)

    def detect(self, task: str) -> bool:
        return bool(self._hint.search(task))

    def read(self, reply: str) -> FinalAnswer | None:
        return choice_answer(reply)

    def gives_answer(self, reply: str) -> bool:
        return self.read(reply) is not None

    def found(self, text: str) -> str | None:
        return extract_choice(text)

    def score(self, output: str, reference: Any) -> float:
        return scoring.score_choice(output, reference)


class Math(AnswerKind):
    name, priority = "math", 30
    summary = "a LaTeX answer compared by equivalence (MATH-500); asked for by \\boxed"
    _hint = re.compile(r"\\boxed")

    def detect(self, task: str) -> bool:
        return bool(self._hint.search(task))

    def read(self, reply: str) -> FinalAnswer | None:
        return math_answer(reply)

    def gives_answer(self, reply: str) -> bool:
        return self.read(reply) is not None

    def found(self, text: str) -> str | None:
        return extract_math_answer(text)

    def score(self, output: str, reference: Any) -> float:
        return scoring.score_math(output, reference)


class Exact(AnswerKind):
    name = "exact"
    summary = "a short text compared after normalising case, spaces and outer punctuation"

    def read(self, reply: str) -> FinalAnswer | None:
        return exact_answer(reply)

    def gives_answer(self, reply: str) -> bool:
        return self.read(reply) is not None

    def score(self, output: str, reference: Any) -> float:
        return scoring.score_exact(output, reference)


class Code(AnswerKind):
    """A program, judged by running it: against the task's shown examples on every answer
    (turns/settle.py), read or tested by a Verifier shown it."""

    name, priority, reader_family = "code", 10, "code"
    settles = "judged"
    summary = "a Python function or program (MBPP, HumanEval), run against the task's shown examples"
    retry_alone = True
    failed_check_override = "the proposed code failed its examples: verifier acts as worker, alone"
    stop_when_checks_pass = True
    final_step_note = ("Reply with the complete code the task asks for, in one ```python block that defines it: "
                       "not a description of earlier steps' code.")
    _hint = re.compile(r"```python|\bpython (?:code|function)\b|\bwrite a (?:python )?function\b", re.I)

    def detect(self, task: str) -> bool:
        return bool(self._hint.search(task))

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


SHORT, NUMERIC, CHOICE, MATH, EXACT, CODE = ShortAnswer(), Numeric(), Choice(), Math(), Exact(), Code()
