"""What an answer kind is: everything that differs between a number, a choice letter, a
LaTeX answer, a program and a free-form reply, in one object, so no `kind == "..."` is
needed anywhere else.

An `AnswerKind` owns:

    detect(task)          whether a question's own wording asks for this kind (cheap: regular
                          expressions, no model call); kinds are tried in `priority` order.
    instruction(style, role, revising)
                          (instruction, request) that replaces the style's own for this kind,
                          or None to keep the style's (turns/prompts.py).
    draft_messages(style, task, context)
                          the whole messages of a Worker shown no turns (a draft), or None
                          for the layout of turns/prompts.py.
    fits_style(style, task)
                          whether a member of `style` is asked at all (a haiku is not a program).
    max_tokens(role)      a reply cap for the role, or None for the member's own.
    last_step_note(style) what a conductor's last step is told besides its Worker instructions
                          (code: reply with the complete code; "" for none).
    read(reply)           the answer a reply commits to (`FinalAnswer`), or None; kinds that
                          are not compared by value return None always.
    same(a, b)            whether two read answers agree.
    gives_answer(reply)   whether a reply holds an answer of this kind at all.
    answer_text(text)     what `ask` prints and `serve` returns, from the answering reply's
                          model text (trinity's program scaffold already taken off).
    as_asked(answer, question)
                          that answer in the form the question asks for ("yes"/"no" where a
                          yes-or-no question's program printed True/False); printing only.
    score(output, reference)
                          1.0 or 0.0, as bench scores an item of this kind.
    checks(task, reference)
                          what trinity can run on every answer of this task (code: its shown
                          examples; free-form: the constraints it states), or None.

and declares how an episode settles its answers (`settles`):

    "votes"     answers are read and compared: a Verifier answers from the task alone and
                ACCEPTs when it agrees with an earlier answer; plurality at the end.
    "judged"    answers are not compared: a Verifier is shown the latest answer and judges
                it (`Verdict: ACCEPT|REVISE`); checks, where the task has them, run on every
                answer, and a Verifier is not asked about an answer that failed them.

The class attributes of `AnswerKind` below are what an episode's rules read of the kind (each
documented where it is defined, and where it is read): `reader_weights`, `verifier_sees_turns`,
`passing_checks_settle`, `agree_by_verdict`, `default_mode`, `failed_check_override`,
`proposal_label`, `retry_from_task_alone`, `history_chars`.

The episode carries the kind as this object, resolved once where it starts (`resolve_kind`,
registry.py: policies/base.Episode, episode/loop.run_episode, conductor/run.run_conductor);
turns/, the decision sources and the conductor are given the object, never a name to look up
again.

A kind from another package registers in the entry-point group `trinity_cli.answer_kinds`
(registry.py) with an `AnswerKind` instance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from trinity_cli.answer_kinds.examples import examples_note
from trinity_cli.messages import ChatMessage, Role
from trinity_cli.tasks.answers import FinalAnswer, final_answer, marked_answer, same_answer


class Checks(Protocol):
    """What trinity runs on every answer of a task (a code task's shown examples, a free-form
    request's stated constraints): `run` gives the dict a turn records in `Turn.examples`
    ({"passed": bool, "failing": what failed or None, "error": why}); the kind's `check_note`
    is the line later prompts show under that answer."""

    def run(self, reply: str, strict: bool = False) -> dict[str, Any]: ...


class AnswerKind:
    """A short answer read by `read` and compared by `same` (the defaults: the kind-free
    reading of tasks/answers.py); subclasses override what differs."""

    name: str = "answer"
    settles: str = "votes"  # "votes" or "judged" (module docstring)
    summary: str = "a short answer: a number, a word, a name"
    # Detection order: lower first (code before a free-form "Write ...", free-form's cues before
    # the short answer's; registry.detect).
    priority: int = 50
    # Which of a reader's weight sets (coordinator/reader.py) scores this kind's replies:
    # "answer", "choice" or "code" (only "code" reads the examples feature).
    reader_weights: str = "answer"
    # A Verifier is shown the turns so far as well as the answer it judges (code), or the
    # answer alone (free-form: a long answer is not shown twice). Read by turns/prompts.py.
    verifier_sees_turns: bool = True
    # An answer that passes the task's checks is settled: the checks are the whole judgement
    # (code's shown examples), so there is nothing left for a Verifier to add. The pair of
    # `SourceRules.stop_when_checks_settle` (turns/source_rules.py): the fixed `agree` and
    # every head stop at the first such answer (turns/settle.agreement, rule 5).
    passing_checks_settle: bool = False
    # The fixed `agree` procedure settles this kind by a Verifier's verdict, drafting, judging
    # and revising until an ACCEPT (episode/schedules.py), rather than by asking members alone
    # until two answers agree. Free-form: whole answers are judged, not compared.
    agree_by_verdict: bool = False
    # The policy `ask` and `serve` answer with when no mode or head is named (None: the pool's
    # default); a kind no head was validated on names the fixed procedure it was measured with.
    default_mode: str | None = None
    # Turn.override of a Verifier that acts as a Worker after a failed check (rule 3,
    # turns/source_rules.py).
    failed_check_override: str = "the proposed answer failed its checks: verifier acts as worker"
    # What a Verifier is shown the answer under (turns/prompts.py).
    proposal_label: str = "Proposed code to check:"
    # After an answer fails its checks, the next Worker is asked from the task alone, shown no
    # turns (code: shown failing code, members repeat it), instead of revising it shown what
    # failed (free-form: the failure says what to fix). Read by turns/source_rules.asked_alone.
    retry_from_task_alone: bool = False
    # Past replies shown to later turns are clipped to this many characters (turns/prompts.py).
    history_chars: int = 1500

    def detect(self, task: str) -> bool:
        return False

    def instruction(self, style: str, role: Role, revising: bool) -> tuple[str, str] | None:
        return None

    def fits_style(self, style: str, task: str) -> bool:
        return True

    def draft_messages(self, style: str, task: str, context: Sequence[ChatMessage] = ()) -> list[ChatMessage] | None:
        return None

    def redraft_messages(self, style: str, task: str, context: Sequence[ChatMessage], draft: str,
                         wrong: str) -> list[ChatMessage] | None:
        """A draft asked again, told what trinity's checks found `wrong` with the earlier
        `draft` (the `drafts-told` policy, policies/drafts.py); None: this kind asks a fresh
        draft instead."""
        return None

    def max_tokens(self, role: Role) -> int | None:
        return None

    def last_step_note(self, style: str) -> str:
        """What the conductor's last step is told before its Worker instructions, for a member
        of `style` (conductor/run.py `step_messages`; "": nothing)."""
        return ""

    def procedure_summary(self, procedure: str | None) -> str | None:
        """How the fixed `procedure` ("agree", ...) plays this kind, in one line, where it plays
        it otherwise than its own summary says (None: as it says)."""
        return None

    def check_note(self, result: dict[str, Any]) -> str:
        """The line later prompts show under an answer, from what its checks recorded."""
        return examples_note(result)

    def read(self, reply: str) -> FinalAnswer | None:
        return final_answer(reply)

    def vote_key(self, answer: str, reference: Any = None) -> str | None:
        """What a single answer counts as in bench's vote: its read value ("kind:value"), or
        None when it has no readable answer."""
        found = self.read(answer)
        return f"{found.kind}:{found.value}" if found is not None else None

    def same(self, a: FinalAnswer, b: FinalAnswer) -> bool:
        return same_answer(a, b)

    def gives_answer(self, reply: str) -> bool:
        return bool(reply.strip())

    def answer_text(self, text: str, printed: str | None = None) -> str:
        """The answer alone (turns/answer_text.py): a program's printed value when it printed
        one, else what `found` reads, else the marked answer, else the whole text."""
        if printed is not None and printed.strip():
            return printed.strip()
        found = self.found(text)
        if found is None or not found.strip():
            found = marked_answer(text)
        return found.strip() if found is not None else text.strip()

    def as_asked(self, answer: str, question: str) -> str:
        """`answer` (what `answer_text` gives) in the form `question` asks for it, as `ask` prints
        it; scoring never sees this (bench scores the whole reply). The default keeps it as it is."""
        return answer

    def found(self, text: str) -> str | None:
        """The answer as the reply writes it, for `answer_text` (None: use the marked answer)."""
        return None

    def score(self, output: str, reference: Any) -> float:
        raise NotImplementedError(f"answer kind {self.name!r} has no scorer")

    def checks(self, task: str, reference: Any = None) -> Any:
        return None

    @property
    def judged(self) -> bool:
        return self.settles == "judged"

    def __repr__(self) -> str:
        return f"<answer kind {self.name}>"
