"""Role prompts for each member style, how a turn's messages are built, and how replies are read.

A pool member is weights plus a style (`style:` in the pool file), and each style has its
own instructions for every role:

    reason    works step by step, briefly (the Worker ends with the answer line the task
              asks for).
    direct    the final answer alone, no working (pair it with a small `max_tokens`).
    program   writes a Python program whose printed value (or variable `answer`) is the
              answer; trinity runs it in the code sandbox (turns/program.py) and appends the
              output and an `Answer:` line to the reply. On code tasks the Worker writes the
              function and the Verifier writes assert tests that are run against it.

Prompts are written for small models: short, no headings to copy, and on code tasks the
code comes first. They are versioned: `PROMPT_VERSION` goes into head manifests, so
changing any wording below must bump it.

Message layout (p4), every style and role: one system message, the same for every member
and role (`SYSTEM`), and one user message holding, in order, earlier conversation (if any),
the task, the turns so far (oldest dropped first when the context is short: `keep_last`;
a code answer's example run is shown under it), the proposed code to check (code
Verifiers), and last the style's instructions for the role and the request. What
consecutive calls share (system, conversation, task, turns) thus comes first, where
llama.cpp reuses the previous prompt's evaluated prefix. In a conversation (earlier messages
given) the instructions come right after the earlier conversation, before the task, and the
request stays last: everything before the new message is then known before it is typed, and
`trinity chat` computes it ahead (ask/conversation.next_calls). Prompts without earlier
conversation, every benchmark's, keep the order above (and PROMPT_VERSION: no recorded call
or head changes).

A Worker shown no turns (a first draft, or a draft asked alone) is asked in the answer kind's
own words where it has them (`AnswerKind.draft_messages`: a free-form request is asked as a
person asks it, the request alone under a plain system line).

Asked alone (`alone=True`: the fixed `sc` and `agree` procedures, and every Verifier outside
code tasks), a member sees only the conversation and the task, with the Worker's
instructions: its answer is then independent of the episode's others and counts as a vote
(turns/settle.py). A Verifier outside code tasks is exactly such a call, compared with every
earlier answer: a small model shown the proposed answer copies it (docs/pools.md). On code tasks a
Verifier is shown the latest code and its example run: a reason or direct Verifier reads it
and states `Verdict: ACCEPT|REVISE`, a program Verifier writes asserts that are run
(program.run_tests).

Aggregation (`aggregate_task`, bench's `moa` row): the strongest member is shown the task and
every member's answer and asked, as a Worker in its own style, for one best answer. The
request is the task text itself, so the aggregator's call is an ordinary Worker call
(`build_messages`), played by `episode.run_episode` like any other. Rewording `AGGREGATE`
changes the aggregator's messages and so its rollout cache keys by itself.

Which calls answer, and which are asked alone: turns/rules.py. How a reply's verdict and
suggestion are read: turns/replies.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.answer_kinds.short import SHORT
from trinity_cli.messages import ChatMessage, Role, Turn
from trinity_cli.turns.rules import asked_alone, latest_proposal

PROMPT_VERSION = "p4"

# Past replies are clipped to this many characters when shown to later turns: small
# models have small contexts, and the head of a long reply carries its substance.
HISTORY_CHARS = 1500

SYSTEM = (
    "You are one member of a team of assistants that solve tasks together. Follow the "
    "instructions at the end of each message exactly."
)

_NEXT_LINE = (
    "End with one last line that is exactly 'Next: worker' (to have the task solved) or "
    "'Next: verifier' (to have the latest answer checked)."
)

INSTRUCTIONS: dict[str, dict[Role, str]] = {
    "reason": {
        Role.THINKER: (
            "You help the team, but you do not solve the task yourself and you do not give a "
            "final answer. In at most five short lines, say how to solve it; if an answer was "
            "already proposed, say exactly what is wrong or missing in it. " + _NEXT_LINE
        ),
        Role.WORKER: (
            "You solve the task. Think step by step and keep it brief; use the advice and fix the "
            "mistakes pointed out in earlier turns, if any. If the task asks for code, write the "
            "complete code first in one ```python block, then at most two sentences. Finish with "
            "the answer in the form the task asks for."
        ),
        Role.VERIFIER: (
            "You check the proposed code, and you do not trust it. Read it against the task and "
            "its examples, and the result of running the examples if shown. End with a last line "
            "that is exactly 'Verdict: ACCEPT' if it is right, or 'Verdict: REVISE' if it is not."
        ),
    },
    "direct": {
        Role.THINKER: (
            "You help the team, but you do not solve the task. In one or two short sentences, "
            "give the key fact or idea needed. Do not give the final answer. " + _NEXT_LINE
        ),
        Role.WORKER: (
            "Reply with the final answer only, in the form the task asks for, for example "
            "'Answer: 42' or 'Answer: B'. Do not explain and do not show any working. If the task "
            "asks for code, reply with the code alone in one ```python block."
        ),
        Role.VERIFIER: (
            "Read the proposed code against the task and its examples, and the result of running "
            "the examples if shown. Reply with one line: 'Verdict: ACCEPT' if it is right, "
            "'Verdict: REVISE' if not."
        ),
    },
    "program": {
        Role.THINKER: (
            "You help the team solve the task with a Python program, but you do not solve it and "
            "do not give a final answer. In at most five short lines, say what the program must "
            "compute and how. " + _NEXT_LINE
        ),
        Role.WORKER: (
            "Solve the task by writing a short Python program that computes the answer and ends "
            "with print(answer). Reply with one ```python block and nothing else; use only the "
            "standard library. For a multiple-choice question, print the letter of the right "
            "choice. If the task asks for a function, write just that function instead."
        ),
        Role.VERIFIER: (
            "Check the proposed function by writing assert statements that test it on the task's "
            "examples and on one more case you work out. Reply with one ```python block of asserts "
            "and nothing else."
        ),
    },
}

REQUEST: dict[str, dict[Role, str]] = {
    "reason": {
        Role.THINKER: "Write the plan or critique now (no final answer).",
        Role.WORKER: "Solve the task now.",
        Role.VERIFIER: "Give your verdict now.",
    },
    "direct": {
        Role.THINKER: "Give your hint now (no final answer).",
        Role.WORKER: "Give the final answer now.",
        Role.VERIFIER: "Give your verdict now.",
    },
    "program": {
        Role.THINKER: "Give your advice now (no final answer).",
        Role.WORKER: "Write the program now.",
        Role.VERIFIER: "Write your asserts now.",
    },
}

# The aggregator's task (bench's `moa`): the task, the members' answers, the request. Its last
# sentence is there because, asked only to "give your own answer", an aggregator tends to reply
# "the provided code is correct" with no code of its own.
AGGREGATE = (
    "{task}\n\n"
    "Answers to this task from {count} follow. Any of them may be wrong, and they may disagree.\n\n"
    "{answers}\n\n"
    "Synthesize them into a single best answer to the task: check each one critically instead of "
    "copying the most common one, then give your own complete answer, ending with the answer in the "
    "form the task asks for. Write that answer out even when it is the same as one above (for code, "
    "the whole code again): saying that an answer is right is not an answer."
)
# Each member answer shown to the aggregator keeps at most this many characters, its start
# and its end (where the answer line is).
AGGREGATE_ANSWER_CHARS = 1500

LABEL = {Role.THINKER: "Thinker", Role.WORKER: "Worker", Role.VERIFIER: "Verifier"}


def clip(text: str, limit: int = HISTORY_CHARS) -> str:
    """`text` as later prompts show it: its first `limit` characters, then " […]"."""
    return text if len(text) <= limit else text[:limit] + " […]"


def opening(task: str, context: Sequence[ChatMessage] = ()) -> list[str]:
    """The first parts of every request's user message: the earlier conversation (if any),
    then the task (conductor/run.py opens its prompts the same way)."""
    parts = []
    if context:
        lines = "\n".join(f"{m.role}: {clip(m.content)}" for m in context)
        parts.append(f"Earlier conversation:\n{lines}")
    parts.append(f"Task:\n{task}")
    return parts


def _clip_ends(text: str, limit: int) -> str:
    """`text`, or its start and end with " […] " between when longer than `limit`."""
    if len(text) <= limit:
        return text
    tail = limit // 3
    return text[: limit - tail].rstrip() + "\n[…]\n" + text[-tail:].lstrip()


def aggregate_task(task: str, answers: Sequence[str], limit: int = AGGREGATE_ANSWER_CHARS) -> str:
    """The aggregator's task text (`AGGREGATE`): `task`, then `answers` numbered in the
    order given (no model names), each clipped to `limit` characters (start and end)."""
    shown = "\n\n".join(f"[Answer {i}]\n{_clip_ends(a.strip(), limit)}" for i, a in enumerate(answers, 1))
    count = "one assistant" if len(answers) == 1 else f"{len(answers)} assistants"
    return AGGREGATE.format(task=task, count=count, answers=shown)


def _shown_turn(turn: Turn, kind: AnswerKind) -> str:
    """A turn as later prompts show it: label, reply (clipped to the kind's `history_chars`),
    and its checks' result (the kind's `check_note`)."""
    text = f"[{LABEL[turn.role]}]\n{clip(turn.reply, kind.history_chars)}"
    if turn.examples is not None and turn.examples_passed is not None:  # checks that ran, on what was stated
        text += "\n" + kind.check_note(turn.examples)
    return text



def build_messages(
    role: Role,
    task: str,
    turns: Sequence[Turn],
    context: Sequence[ChatMessage] = (),
    keep_last: int | None = None,
    style: str = "reason",
    kind: AnswerKind = SHORT,
    alone: bool = False,
) -> list[ChatMessage]:
    """The messages sent to a `style` member acting as `role` (see module docstring);
    `kind` is the episode's `AnswerKind` (default: a short answer of no stated form), which may
    replace the style's instructions (answer_kinds/base.py `instruction`); what a Verifier is
    shown is the kind's too (`verifier_sees_turns`, `proposal_label`); `alone`: asked from
    the task alone, with the Worker's instructions, whatever `role` is recorded."""
    if style not in INSTRUCTIONS:
        raise ValueError(f"unknown style {style!r}")
    if asked_alone(role, kind, alone):
        shown: list[Turn] = []
        asked = Role.WORKER
    else:
        shown = list(turns) if keep_last is None else list(turns)[len(turns) - keep_last :] if keep_last else []
        asked = role
    if asked is Role.VERIFIER and not kind.verifier_sees_turns:  # free-form: the answer alone
        shown = []
    shown = [t for t in shown if t.error is None]  # a member that failed said nothing to show
    if asked is Role.WORKER and not shown:
        drafted = kind.draft_messages(style, task, context)
        if drafted is not None:
            return drafted
    parts = opening(task, context)
    if shown:
        dropped = len(turns) - len(shown)
        header = f"Turns so far ({dropped} earlier turns omitted):" if dropped else "Turns so far:"
        parts.append(header + "\n" + "\n\n".join(_shown_turn(t, kind) for t in shown))
    proposed = latest_proposal(turns)
    if asked is Role.VERIFIER and proposed is not None:
        stated = proposed.examples is not None and proposed.examples_passed is not None
        note = f"\n{kind.check_note(proposed.examples)}" if stated and proposed.examples is not None else ""
        parts.append(f"{kind.proposal_label}\n{clip(proposed.reply, kind.history_chars)}{note}")
    own = kind.instruction(style, asked, revising=bool(shown) and proposed is not None)
    instruction, request = own if own is not None else (INSTRUCTIONS[style][asked], REQUEST[style][asked])
    if context:  # a conversation's: what the call is asked to do comes before the task (module docstring)
        parts.insert(1, instruction)
        parts.append(request)
    else:
        parts.append(f"{instruction}\n{request}")
    return [ChatMessage("system", SYSTEM), ChatMessage("user", "\n\n".join(parts))]
