"""The answer alone (turns/answer_text.py): each member style's reply x each task kind, with and
without an answer line, as ask prints it and serve returns it."""

from __future__ import annotations

import pytest

from trinity_cli.answer_kinds import answer_kind
from trinity_cli.turns import program
from trinity_cli.turns.answer_text import answer_text


def program_reply(code: str) -> str:
    """A program member's reply as recorded: the model's block, run in the sandbox."""
    return program.run_reply(f"```python\n{code}\n```")[0]


FUNCTION = "def add(a, b):\n    return a + b"

# (style, kind, reply, answer): the style names the member the reply is typical of (it labels the
# case; answer_text reads the reply alone). Program replies are run for real (see `program_reply`).
CASES = [
    # reason: working, then an answer line (or none)
    ("reason", "numeric", "12 times 7 is 84.\nAnswer: 84", "84"),
    ("reason", "numeric", "She pays 3 x $400 = $1,200 in all.", "$1,200"),
    ("reason", "numeric", "**Final answer:** -0.5 metres", "-0.5"),
    ("reason", "choice", "Gravity pulls the ball down, so (C) is right.\nAnswer: C", "C"),
    ("reason", "choice", "The best option is B. Planets orbit the Sun.\nThe answer is **B**.", "B"),
    ("reason", "math", "So $x = \\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
    ("reason", "math", "Therefore the answer is $\\sqrt{2}$.", "\\sqrt{2}"),
    ("reason", "code", f"Here is the function:\n```python\n{FUNCTION}\n```\nIt adds them.", FUNCTION),
    ("reason", None, "Paris is the capital of France.\nAnswer: Paris.", "Paris"),
    ("reason", None, "The capital of France is Paris, on the Seine.", "The capital of France is Paris, on the Seine."),
    ("reason", "exact", "Answer: \"blue whale\"", "blue whale"),
    # direct: the answer line alone, or a bare value
    ("direct", "numeric", "Answer: 84", "84"),
    ("direct", "numeric", "84", "84"),
    ("direct", "choice", "Answer: (B)", "B"),
    ("direct", "choice", "D", "D"),
    ("direct", "math", "Answer: $\\frac{3}{4}$", "\\frac{3}{4}"),
    ("direct", "code", f"```python\n{FUNCTION}\n```", FUNCTION),
    ("direct", None, "Answer: Paris", "Paris"),
    ("direct", None, "Paris", "Paris"),
]


@pytest.mark.parametrize(("kind", "reply", "expected"),
                         [pytest.param(*case[1:], id=f"{case[0]}-{case[1]}-{i}") for i, case in enumerate(CASES)])
def test_text_replies(kind: str | None, reply: str, expected: str) -> None:
    assert answer_text(reply, answer_kind(kind)) == expected


@pytest.mark.parametrize("kind", ["numeric", None, "exact"])
def test_a_program_answers_with_its_printed_value(kind: str | None) -> None:
    reply = program_reply("print(12 * 7)")
    assert "Program output" in reply and "Answer: 84" in reply
    assert answer_text(reply, answer_kind(kind)) == "84"


def test_a_program_choice_and_math() -> None:
    assert answer_text(program_reply("print('C')"), answer_kind("choice")) == "C"
    fraction = program_reply("from fractions import Fraction\nprint(Fraction(1, 2))")
    assert answer_text(fraction, answer_kind("math")) == "1/2"


def test_a_program_on_a_code_task_answers_with_its_code_alone() -> None:
    reply = program_reply(FUNCTION)  # defines, prints nothing
    assert answer_text(reply, answer_kind("code")) == FUNCTION
    # Even when the model wrote no fence: trinity's output block is not taken for the code.
    bare = program.run_reply(FUNCTION)[0]
    assert "Program output" in bare and answer_text(bare, answer_kind("code")) == FUNCTION


def test_a_program_that_printed_nothing_or_crashed_gives_its_text_without_scaffold() -> None:
    crashed = program_reply("raise ValueError('boom')")
    assert "Program output" in crashed and "Answer:" not in crashed
    assert answer_text(crashed, answer_kind(None)) == "```python\nraise ValueError('boom')\n```"
    assert answer_text(crashed, answer_kind("numeric")) == "```python\nraise ValueError('boom')\n```"


def test_no_reply_is_an_empty_answer() -> None:
    assert answer_text(None, answer_kind("numeric")) == "" and answer_text("  \n", answer_kind(None)) == ""


def test_split_reply_reads_back_what_run_reply_appends() -> None:
    reply = program_reply("x = 6 * 7\nprint('working')\nprint(x)")
    text, printed, ran = program.split_reply(reply)
    assert ran and printed == "42" and text == "```python\nx = 6 * 7\nprint('working')\nprint(x)\n```"
    assert program.split_reply("Answer: 42") == ("Answer: 42", None, False)
