"""The answer alone, as a person would write it: what `ask` prints, what `serve` returns as
the assistant message, and the `answer` of an ask run's record (bench.json keeps whole replies).

`answer_text(reply, kind)`: `reply` is the episode's answer reply (the Worker reply it settled
on, with trinity's program scaffold when a `program` member wrote it), `kind` the task's
`AnswerKind` (default: a short answer of no stated form). The kind reads it (answer_kinds/:
`AnswerKind.answer_text`):

    code      the code alone, plain (no fence), so `trinity ask ... > f.py` is a program.
    freeform  the whole reply (Markdown), less a "Here is ...:" opening line.
    otherwise a `program` member's printed value when it printed one; else the value as the
              reply writes it (choice: the letter; math: the LaTeX answer; numeric: the
              number as written, "1,234", "$18"); else the answer line's text (last \\boxed{}
              or "Answer: ..." tail, markdown and surrounding quotes/dollars taken off), else
              the model's whole text without trinity's scaffold.

A short answer is then given in the form the question asks for (`AnswerKind.as_asked`): "yes" or
"no", not True/False, to a question that asks yes or no. An empty or missing reply gives "".
`--show-work` (ask) and `show_work` (serve) return the reply itself instead; run records keep both.
"""

from __future__ import annotations

from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.answer_kinds.short import SHORT
from trinity_cli.turns.program import split_reply


def answer_text(reply: str | None, kind: AnswerKind = SHORT, question: str = "") -> str:
    """The answer in `reply` for a task of answer kind `kind` (module docstring), in the form
    `question` asks for it (`AnswerKind.as_asked`: "yes"/"no" where a program printed True/False)."""
    if not reply or not reply.strip():
        return ""
    text, printed, _ = split_reply(reply)
    return kind.as_asked(kind.answer_text(text, printed), question)
