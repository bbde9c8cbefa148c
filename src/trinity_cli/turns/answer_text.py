"""The answer alone, as a person would write it: what `ask` prints, what `serve` returns as
the assistant message, and the `answer` of an ask run's record (bench.json keeps whole replies).

Contract of `answer_text(reply, kind)`, `reply` being the episode's answer reply (the
Worker reply it settled on, with trinity's program scaffold when a `program` member wrote
it) and `kind` the task's scorer kind (None: unknown, as for most `ask` questions):

    code      the code alone, plain (no fence), so `trinity ask ... > f.py` is a program:
              the reply's Python block (tasks/code.py's `extract_code` on the model's text).
    program   a `program` member's reply that printed a value: that value (the `Answer:`
              line trinity appended after running it), whatever the kind.
    choice    the letter the reply commits to ("B").
    math      the LaTeX answer: the last \\boxed{} content, else the answer line's.
    numeric   the number as the reply writes it ("1,234", "-0.5", "$18"): from its answer
              line, "####" or \\boxed{}, else its last number (what the scorer reads).
    otherwise (None, "exact") the answer line's text (last \\boxed{} or "Answer: ..."
              tail, markdown and surrounding quotes/dollars taken off), else the model's
              whole text without trinity's scaffold.

An empty or missing reply gives "". `--show-work` (ask) and `show_work` (serve) return the
reply itself instead; run records keep both.
"""

from __future__ import annotations

from trinity_cli.tasks.answers import extract_choice, extract_math_answer, marked_answer, number_text
from trinity_cli.tasks.code import extract_code
from trinity_cli.turns.program import split_reply


def answer_text(reply: str | None, kind: str | None = None) -> str:
    """The answer in `reply` for a task of scorer `kind` (module docstring)."""
    if not reply or not reply.strip():
        return ""
    text, printed, _ = split_reply(reply)
    if kind == "code":
        return extract_code(text).strip("\n")
    if printed is not None and printed.strip():
        return printed.strip()
    found: str | None = None
    if kind == "choice":
        found = extract_choice(text)
    elif kind == "math":
        found = extract_math_answer(text)
    elif kind == "numeric":
        found = number_text(text)
    if found is None or not found.strip():
        found = marked_answer(text)
    return found.strip() if found is not None else text.strip()
