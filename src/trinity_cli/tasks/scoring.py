"""The built-in answer kinds' scoring functions: grade a model's reply against a task item's
reference.

Which function scores an item is its answer kind's business: an item's `scorer` names an
answer kind, whose `score` decides (answer_kinds/registry.py: the one registry of scorers;
answer_kinds/short.py calls the functions here and in code.py, freeform.py those of
answer_kinds/constraints.py). Every function is `score(output_text, reference) -> float` and
returns 1.0 or 0.0. They never raise on odd model output (an unparseable reply scores 0.0); a
malformed *reference* is a bug in the task data and raises `ValueError`.

References, by scorer:

    numeric   a number or its text: 18, "1,234", "-0.5", "3/4"
    math      LaTeX text of the answer, as inside \\boxed{}: "\\frac{\\pi}{2}", "(2,\\infty)"
    choice    a letter "A".."E"
    exact     a string, compared after normalisation (case, spaces, outer punctuation)
    code      {"tests": str, "prelude": str = "", "entry_point": str | None, "timeout_s": float = 10}
    freeform  a list of constraints the whole reply must meet (answer_kinds/constraints.py)

How answers are read from a reply:

    numeric   the number after the last "Answer:" / "answer is" marker, else after "####",
              else in the last \\boxed{}, else the last number in the reply. Commas between
              digit groups, "$", units after the number and a trailing period are ignored;
              numbers compare as exact rationals, so 84.0 == 84 and 0.5 == 1/2.
    math      the last \\boxed{...} (braces matched), else the text after the last "answer
              is" / "Answer:". Both sides are normalised (spacing commands, \\left/\\right,
              \\dfrac, text units, degrees, "x =" prefixes, trailing zeros); if the strings
              still differ and both are plain algebra, sympy decides (mathequiv.py).
    choice    the letter after the last "Answer:" / "answer is" / "option", else a letter in
              parentheses or bold, else a reply that is just a letter.
    code      the first fenced code block that defines the entry point (else the first
              fenced block, else the whole reply) runs with the tests in `sandbox.run_python`;
              it passes when the process exits 0 *after* the tests ran (a sentinel printed
              after the tests guards against `exit(0)` in the solution). A reference with
              "sandbox": "strict" refuses to run without isolation (SandboxUnavailable).
"""

from __future__ import annotations

from typing import Any

from trinity_cli.tasks.answers import (
    _LETTERS,
    _answer_tails,
    _strip_markdown,
    extract_choice,
    extract_math_answer,
    extract_number,
    normalize_text,
    parse_reference_number,
)
from trinity_cli.tasks.mathequiv import math_equal, normalize_math


def score_numeric(output: str, reference: Any) -> float:
    expected = parse_reference_number(reference)
    got = extract_number(output)
    return 1.0 if got is not None and got == expected else 0.0


def score_choice(output: str, reference: Any) -> float:
    expected = str(reference).strip().upper()
    if len(expected) != 1 or expected not in _LETTERS:
        raise ValueError(f"choice reference must be a letter A-E, got {reference!r}")
    return 1.0 if extract_choice(output) == expected else 0.0


def score_exact(output: str, reference: Any) -> float:
    tails = _answer_tails(_strip_markdown(output))
    candidate = tails[0] if tails and tails[0].strip() else output
    return 1.0 if normalize_text(candidate) == normalize_text(str(reference)) else 0.0


def score_math(output: str, reference: Any) -> float:
    got = extract_math_answer(output)
    if got is None:
        return 0.0
    return 1.0 if math_equal(normalize_math(got), normalize_math(str(reference))) else 0.0
