"""Scorers on model-style replies, right and wrong (no sandbox runs here)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from trinity_cli.answer_kinds import KINDS, score_item, scorer
from trinity_cli.answer_kinds.registry import can_score
from trinity_cli.errors import ConfigError
from trinity_cli.tasks.answers import extract_choice, extract_number, find_boxed
from trinity_cli.tasks.code import build_program, extract_code
from trinity_cli.tasks.items import TaskItem
from trinity_cli.tasks.mathequiv import normalize_math
from trinity_cli.tasks.scoring import score_choice, score_exact, score_math, score_numeric

# --------------------------------------------------------------------------- numeric

GSM8K_REPLY = """Janet's ducks lay 16 eggs per day. She eats 3 and bakes with 4, so she sells
16 - 3 - 4 = 9 eggs. At $2 each she makes 9 * 2 = $18.

Answer: 18"""


@pytest.mark.parametrize(
    ("reply", "reference"),
    [
        (GSM8K_REPLY, "18"),
        ("The total is 1,234 dollars.\nAnswer: $1,234", "1234"),
        ("She has 12 apples left.", 12),
        ("Answer: 84.0", "84"),
        ("Answer: 18.", "18"),
        ("The temperature drops to -5 degrees.\nAnswer: -5", "-5"),
        ("16-3-4=9 eggs a day, and 9*2=18", "18"),
        ("So the answer is 18. Let me restate: the answer is 18.\n\nAnswer: 18", "18"),
        ("**Answer:** 42", "42"),
        ("Janet sells 9 eggs.\n#### 18", "18"),
        ("The answer is \\boxed{1,000}.", "1000"),
        ("Answer: 0.5", "1/2"),
        ("Answer: $3.50 per cup", "3.5"),
        ("Answer: 1,450,000", "1,450,000"),
        ("Answer: −7", "-7"),
    ],
)
def test_numeric_right(reply: str, reference: object) -> None:
    assert score_numeric(reply, reference) == 1.0


@pytest.mark.parametrize(
    ("reply", "reference"),
    [
        ("She makes 9 * 2 = 18 dollars... wait, she keeps 2 eggs.\nAnswer: 14", "18"),
        ("Answer: 18", "-18"),
        ("I am not sure.", "18"),
        ("", "18"),
        ("Answer: 84.5", "84"),
        ("Answer: 1234 and then some. The answer is 123", "1234"),
    ],
)
def test_numeric_wrong(reply: str, reference: object) -> None:
    assert score_numeric(reply, reference) == 0.0


def test_numeric_prefers_the_answer_line_over_the_last_number() -> None:
    assert extract_number("Answer: 18\nThat is 9 eggs times 2 dollars.") == 18


def test_numeric_needs_a_separator_after_answer() -> None:
    # "To answer this" is prose; the last number is the answer.
    assert extract_number("To answer this, 3 + 4 = 7 and 7 * 2 = 14") == 14


def test_numeric_reference_must_be_a_number() -> None:
    with pytest.raises(ValueError):
        score_numeric("Answer: 3", "three")
    assert extract_number("Answer: 3/4") == Fraction(3, 4)


# --------------------------------------------------------------------------- math


def test_find_boxed_matches_nested_braces() -> None:
    text = r"So $x = \boxed{\frac{\sqrt{3}}{2}}$ and not \boxed{1}."
    assert find_boxed(text) == [r"\frac{\sqrt{3}}{2}", "1"]
    assert find_boxed(r"\boxed 5$") == ["5"]
    assert find_boxed(r"\boxed{\{1, 2\}}") == [r"\{1, 2\}"]


@pytest.mark.parametrize(
    ("reply", "reference"),
    [
        (r"Thus the polar coordinates are $\boxed{(3, \frac{\pi}{2})}$.", r"\left( 3, \frac{\pi}{2} \right)"),
        (r"The answer is $\boxed{\dfrac{4}{3}}$.", r"\frac43"),
        (r"$\boxed{0.5}$", r"\frac{1}{2}"),
        (r"$\boxed{90}$ degrees", r"90^\circ"),
        (r"$\boxed{864}$", r"864 \mbox{ inches}^2"),
        (r"$\boxed{10080}$", r"10,\!080"),
        (r"$\boxed{5}$", r"x=5"),
        (r"$\boxed{\text{Evelyn}}$", r"\text{Evelyn}"),
        (r"$\boxed{11\sqrt{2}}$", r"11\sqrt2"),
        (r"$\boxed{2\sqrt{2}}$", r"\sqrt{8}"),
        (r"$\boxed{x^2+2x+1}$", r"(x+1)^2"),
        (r"$\boxed{7, 3, 5}$", r"3, 5, 7"),
        (r"$\boxed{-2 + 7i}$", r"-2+7i"),
        (r"$\boxed{\$32,348}$", r"\$32,\!348"),
        ("Final Answer: The final answer is $\\frac{1}{2}$. I hope it is correct.", r"\frac12"),
        (r"$\boxed{\frac{270}{7}}$", r"\frac{270}7\text{ degrees}"),
        (r"$\boxed{[-2, 7]}$", r"x \in [-2,7]"),
        (r"$\boxed{\{-2, 3\}}$", r"\{3,-2\}"),
        (
            r"$\boxed{\begin{pmatrix} -\frac{1}{3} \\ \frac23 \\ \frac{5}{3} \end{pmatrix}}$",
            r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}",
        ),
    ],
)
def test_math_right(reply: str, reference: str) -> None:
    assert score_math(reply, reference) == 1.0


@pytest.mark.parametrize(
    ("reply", "reference"),
    [
        (r"$\boxed{(\frac{\pi}{2}, 3)}$", r"\left( 3, \frac{\pi}{2} \right)"),
        (r"$\boxed{0.33}$", r"\frac{1}{3}"),
        (r"$\boxed{[2, 5)}$", r"[2,5]"),
        (
            r"$\boxed{\begin{pmatrix} -1 & 0 \\ 0 & 1 \end{pmatrix}}$",
            r"\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}",
        ),
        (r"$\boxed{\begin{pmatrix} -1 \\ 0 \end{pmatrix}}$", r"\begin{pmatrix} -1 & 0 \end{pmatrix}"),
        (r"$\boxed{3}$ and more text", r"4"),
        ("no answer at all", "4"),
        (r"$\boxed{9^{9^{9^9}}}$", "1"),  # refused, never evaluated
        (r"$\boxed{__import__('os').system('true')}$", "0"),
    ],
)
def test_math_wrong(reply: str, reference: str) -> None:
    assert score_math(reply, reference) == 0.0


def test_math_normaliser() -> None:
    assert normalize_math(r"\left( \frac{3}{2}, -13 \right)") == r"(\frac{3}{2},-13)"
    assert normalize_math(r"$\dfrac{1}{2}$.") == r"\frac{1}{2}"
    assert normalize_math("2.50") == "2.5"
    assert normalize_math(r"\text{(C)}") == "(C)"


# --------------------------------------------------------------------------- choice


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("Rotation shortens the day.\nAnswer: C", "C"),
        ("The answer is (C).", "C"),
        ("The answer is C because days get shorter.", "C"),
        ("c", "C"),
        ("(c)", "C"),
        ("**C**", "C"),
        ("answer: c.", "C"),
        ("I think it is B... no. Answer: B\n\nAnswer: B", "B"),
        ("The correct option is D.", "D"),
        ("Answer: C. Planetary days will become shorter.", "C"),
        (r"$\boxed{A}$", "A"),
    ],
)
def test_choice_reads_the_letter(reply: str, letter: str) -> None:
    assert extract_choice(reply) == letter
    assert score_choice(reply, letter) == 1.0
    assert score_choice(reply, "E" if letter != "E" else "A") == 0.0


@pytest.mark.parametrize(
    "reply",
    [
        "The answer is a tricky one; I cannot tell.",
        "Answer: Cats are mammals",
        "I don't know.",
        "",
    ],
)
def test_choice_no_letter(reply: str) -> None:
    assert extract_choice(reply) is None


def test_choice_last_answer_wins() -> None:
    assert score_choice("Answer: A\nWait, that is wrong.\nAnswer: D", "D") == 1.0
    assert score_choice("Answer: A\nWait, that is wrong.\nAnswer: D", "A") == 0.0


# --------------------------------------------------------------------------- exact


def test_exact() -> None:
    assert score_exact("Paris", "paris") == 1.0
    assert score_exact("The capital is Paris.\nAnswer: **Paris.**", "Paris") == 1.0
    assert score_exact('  "New   York" ', "new york") == 1.0
    assert score_exact("Answer: Lyon", "Paris") == 0.0


# --------------------------------------------------------------------------- code (no execution)


def test_extract_code_from_markdown() -> None:
    reply = (
        "Here is my solution:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\n"
        "Example:\n```python\nprint(add(1, 2))\n```\n"
    )
    assert extract_code(reply, "add") == "def add(a, b):\n    return a + b\n"
    # An unterminated fence (the model ran out of tokens) still yields the code.
    assert extract_code("```py\ndef f():\n    return 1\n") == "def f():\n    return 1\n"
    # No fence: prose before the first code line is dropped.
    assert extract_code("Sure! Here it is:\ndef f():\n    return 1") == "def f():\n    return 1"
    # A fenced shell block is not Python.
    assert extract_code("```bash\nrm -rf /\n```\n```python\nx = 1\n```") == "x = 1\n"


def test_build_program_completes_a_body_or_takes_a_whole_function() -> None:
    ref = {"prelude": "def f(x):\n    '''Double x.'''\n", "tests": "assert f(2) == 4", "entry_point": "f"}
    body = build_program("    return 2 * x\n", ref, "DONE")
    assert body.startswith("def f(x):\n    '''Double x.'''\n    return 2 * x\n")
    whole = build_program("```python\ndef f(x):\n    return x + x\n```", ref, "DONE")
    assert "def f(x):\n    return x + x" in whole
    assert whole.rstrip().endswith("print('DONE')")


# --------------------------------------------------------------------------- registry


def test_score_item_dispatches_on_the_scorer() -> None:
    item = TaskItem(task="t", id="1", prompt="2+2?", reference="4", scorer="numeric")
    assert score_item(item, "Answer: 4") == 1.0
    assert score_item(item, "Answer: 5") == 0.0
    # The scorers are the answer kinds that score (answer_kinds/registry.py): "short" does not.
    assert [n for n, kind in KINDS.usable().items() if can_score(kind)] == [
        "numeric", "choice", "math", "exact", "code", "freeform"]


def test_unknown_scorer_suggests_close_names() -> None:
    with pytest.raises(ConfigError) as err:
        scorer("numerc")
    assert "numeric" in (err.value.hint or "")


def test_task_item_round_trips() -> None:
    item = TaskItem(task="mbpp", id="11", prompt="p", reference={"tests": "assert 1"}, scorer="code")
    assert TaskItem.from_dict(item.to_dict()) == item
    assert item.key == "mbpp/11"


def test_math_equivalence_reads_fractions_and_keeps_tuple_order() -> None:
    from trinity_cli.tasks import mathequiv

    assert mathequiv.math_equal(mathequiv.normalize_math("\\frac{1}{2}"), mathequiv.normalize_math("0.5"))
    assert not mathequiv.math_equal("(1,2)", "(2,1)")
