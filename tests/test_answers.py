"""One answer extractor: what the scorers read is what Verifier comparisons read."""

from __future__ import annotations

import pytest

from trinity_cli.answer_kinds import answer_kind
from trinity_cli.answer_kinds import detect as guess_kind
from trinity_cli.tasks.answers import final_answer, same_answer
from trinity_cli.tasks.scoring import score_choice, score_numeric


def test_scorers_skip_quoted_answers() -> None:
    # "The proposed answer: 18" quotes someone else; the reply's own answer is 15.
    reply = "The proposed answer: 18 is wrong, since 3*5 = 15.\nAnswer: 15"
    assert score_numeric(reply, "15") == 1.0
    assert score_numeric("The worker's answer: 18 is off. I get 15 in the end.", "15") == 1.0
    # Anchored lines win over a later mention inside a sentence.
    assert score_numeric("Answer: 42\nI double-checked, so the previous answer: 40 was off.", "42") == 1.0


def test_anchored_line_forms() -> None:
    for text in ("Answer: 7", "**Final answer:** 7", "- So the answer is 7.", "Thus, the correct answer is 7"):
        found = answer_kind("numeric").read(text)
        assert found is not None and found.value == "7" and found.strong, text


def test_weak_fallback_is_marked() -> None:
    found = answer_kind("numeric").read("I added 3 and 4 to get 7")
    assert found is not None and found.value == "7" and not found.strong


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("Answer: (C)", "choice", "C"),
        ("Answer: C. Planetary motion", "choice", "C"),
        ("Answer: A total of 42", "numeric", "42"),
        ("Answer: $1,200.", "numeric", "1200"),
        ("It is 84.0 apples", "numeric", "84"),
        ("\\boxed{\\frac{1}{2}}", "math", "\\frac{1}{2}"),
        ("Answer: east", "exact", "east"),
    ],
)
def test_generic_reading(text: str, kind: str, value: str) -> None:
    found = final_answer(text)
    assert found is not None and (found.kind, found.value) == (kind, value)


def test_no_answer() -> None:
    assert final_answer("no numbers here") is None
    assert answer_kind("code").read("```python\ndef f(): pass\n```") is None


def test_same_answer_uses_the_scorers_equivalence() -> None:
    half = answer_kind("math").read("\\boxed{0.5}")
    frac = answer_kind("math").read("\\boxed{\\frac{1}{2}}")
    assert half is not None and frac is not None and same_answer(half, frac)
    a, b = answer_kind("numeric").read("Answer: 84.0"), answer_kind("numeric").read("Answer: 84")
    assert a is not None and b is not None and same_answer(a, b)
    assert score_choice("Answer: (c)", "C") == 1.0


def test_guess_kind_from_the_task_wording() -> None:
    from trinity_cli.tasks.builtin import CODE_INSTRUCTION, MATH_INSTRUCTION, NUMERIC_INSTRUCTION, choice_prompt

    assert guess_kind(f"How many?\n\n{NUMERIC_INSTRUCTION}") == "numeric"
    assert guess_kind(f"Solve x.\n\n{MATH_INSTRUCTION}") == "math"
    assert guess_kind(choice_prompt("Which?", ["a", "b", "c"])) == "choice"
    assert guess_kind(f"Write f.\n\n{CODE_INSTRUCTION}") == "code"
    assert guess_kind("What is the capital of France?") is None
