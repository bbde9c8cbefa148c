"""Which calls of an episode answer and what each is shown: the rules the prompts, the turn
engine (episode/loop.py) and the settling of answers (turns/settle.py) share.

A Worker call always proposes an answer. A Verifier asked alone (every Verifier of a kind
whose answers are compared by value, and any call a fixed procedure marks `alone`) sees only
the conversation and the task and answers as a Worker would, so its answer is independent and
counts as a vote. On a judged kind (code, free-form: answer_kinds/base.py) a Verifier is shown
the latest proposed answer instead, and judges it without answering.
"""

from __future__ import annotations

from collections.abc import Sequence

from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.messages import Role, Turn


def latest_proposal(turns: Sequence[Turn]) -> Turn | None:
    """The latest turn that proposed an answer (a Worker, or a Verifier asked alone): what a
    code Verifier checks; None before any."""
    return next((turn for turn in reversed(turns) if proposes_answer(turn)), None)


def proposes_answer(turn: Turn) -> bool:
    """Whether `turn` proposed an answer (`role_proposes_answer`); a failed call (Turn.error)
    proposes none."""
    return turn.error is None and role_proposes_answer(turn.role, turn.alone)


def role_proposes_answer(role: Role, alone: bool) -> bool:
    """Whether a call in `role`, asked alone or not, proposes an answer: every Worker call,
    and a Verifier asked alone (which answers as a Worker would)."""
    return role is Role.WORKER or (role is Role.VERIFIER and alone)


def asked_alone(role: Role, kind: AnswerKind, alone: bool = False) -> bool:
    """Whether a call in `role` sees the task alone (module docstring): when the decision
    says so, and a Verifier of every kind but the judged ones (`kind.judged`), whose answer it
    must judge."""
    return alone or (role is Role.VERIFIER and not kind.judged)
