"""Role prompts for each member style, how a turn's messages are built, and how replies are read.

A pool member is weights plus a style (`style:` in the pool file), and each style has its
own prompt for every role:

    reason    works step by step, briefly (the Worker ends with the answer line the task
              asks for); its Verifier sees the proposed answer, solves the task itself and
              states a verdict.
    direct    the final answer alone, no working (pair it with a small `max_tokens`); its
              Verifier answers on its own, shown neither the proposed answer nor the turns,
              and the two answers are compared.
    program   writes a Python program whose printed value (or variable `answer`) is the
              answer; trinity runs it in the code sandbox (program.py) and appends the
              output and an `Answer:` line to the reply. Its Verifier recomputes with its own
              program, shown only the task, and the results are compared. On code tasks the Worker writes the
              function and the Verifier writes assert tests that are run against it.

Prompts are written for small models: short, no headings to copy, and on code tasks the
code comes first. They are versioned: `PROMPT_VERSION` goes into head manifests and rollout
cache keys, so changing any wording below must bump it.

Message layout for every style and role: one system message (the role's instructions) and
one user message holding, in order, earlier conversation (if any), the task, the turns so
far (oldest dropped first when the context is short: `keep_last`), the proposed answer
(Verifiers that see it), and the role's request. A Verifier that answers on its own (direct,
and program outside code tasks: `sees_proposed_answer`) is shown no turns either, only the
conversation and the task, so its answer is independent of the one it is compared with.

Aggregation (`aggregate_task`, bench's `moa` row): the strongest member is shown the task and
every member's answer and asked, as a Worker in its own style, for one best answer. The
request is the task text itself, so the aggregator's call is an ordinary Worker call
(`build_messages`), played by `episode.run_episode` like any other. `AGGREGATE` is used by
no other call: heads never see it and no existing call's messages change, so adding it did
not bump `PROMPT_VERSION` (which ties heads to the prompts they were evolved under);
rewording it changes the aggregator's messages and so its rollout cache keys by itself.

Verdicts (`verdict`): when the Verifier's own final answer is strong (an anchored or
unquoted `Answer:` line, `\\boxed{}`, a choice letter: see tasks/scoring.py) and the proposed
answer can be read, the two are compared by the task's scorer and the comparison decides
("compared"). Otherwise the stated `Verdict: ACCEPT|REVISE` decides ("stated"; a reply that
opens with the bare word counts); anything unparseable is REVISE. A program Verifier on a
code task is decided by running its tests ("executed", program.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trinity_cli.messages import ChatMessage, Role, Turn
from trinity_cli.tasks.answers import final_answer, same_answer

PROMPT_VERSION = "p3"

# Past replies are clipped to this many characters when shown to later turns: small
# models have small contexts, and the head of a long reply carries its substance.
HISTORY_CHARS = 1500

_NEXT_LINE = (
    "End with one last line that is exactly 'Next: worker' (to have the task solved) or "
    "'Next: verifier' (to have the latest answer checked)."
)

SYSTEM: dict[str, dict[Role, str]] = {
    "reason": {
        Role.THINKER: (
            "You help a team solve a task, but you do not solve it yourself and you do not give a "
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
            "You check a proposed answer, and you do not trust it. Solve the task yourself, briefly "
            "and step by step, and write your own final answer in the form the task asks for. Then "
            "write a last line that is exactly 'Verdict: ACCEPT' if your answer agrees with the "
            "proposed one, or 'Verdict: REVISE' if it does not. If the task asks for code, read the "
            "proposed code against the task and its example instead, and end with the verdict line."
        ),
    },
    "direct": {
        Role.THINKER: (
            "You help a team solve a task, but you do not solve it. In one or two short sentences, "
            "give the key fact or idea needed. Do not give the final answer. " + _NEXT_LINE
        ),
        Role.WORKER: (
            "Reply with the final answer only, in the form the task asks for, for example "
            "'Answer: 42' or 'Answer: B'. Do not explain and do not show any working. If the task "
            "asks for code, reply with the code alone in one ```python block."
        ),
        Role.VERIFIER: (
            "Reply with the final answer only, in the form the task asks for, for example "
            "'Answer: 42' or 'Answer: B'. Do not explain and do not show any working. If the task "
            "asks for code, read the proposed code against the task and its example and reply "
            "with one line: 'Verdict: ACCEPT' if it is right, 'Verdict: REVISE' if not."
        ),
    },
    "program": {
        Role.THINKER: (
            "You help a team solve a task with a Python program, but you do not solve it and do "
            "not give a final answer. In at most five short lines, say what the program must "
            "compute and how. " + _NEXT_LINE
        ),
        Role.WORKER: (
            "Solve the task by writing a short Python program that computes the answer and ends "
            "with print(answer). Reply with one ```python block and nothing else; use only the "
            "standard library. For a multiple-choice question, print the letter of the right "
            "choice. If the task asks for a function, write just that function instead."
        ),
        Role.VERIFIER: (
            "Check the task by writing your own short Python program that computes the answer "
            "and ends with print(answer). Reply with one ```python block and nothing else; use "
            "only the standard library. For a multiple-choice question, print the letter of the "
            "right choice. If the task asks for a function, write instead assert statements that "
            "test the proposed function on the task's examples and on one more case you work out."
        ),
    },
}

REQUEST: dict[str, dict[Role, str]] = {
    "reason": {
        Role.THINKER: "Write the plan or critique now (no final answer).",
        Role.WORKER: "Solve the task now.",
        Role.VERIFIER: "Solve it independently, then give your verdict.",
    },
    "direct": {
        Role.THINKER: "Give your hint now (no final answer).",
        Role.WORKER: "Give the final answer now.",
        Role.VERIFIER: "Give the final answer now.",
    },
    "program": {
        Role.THINKER: "Give your advice now (no final answer).",
        Role.WORKER: "Write the program now.",
        Role.VERIFIER: "Write your program now.",
    },
}

# The aggregator's task (bench's `moa`): the task, the members' answers, the request. Its last
# sentence is there because, asked only to "give your own answer", the 1.5B aggregator replied
# "the provided code is correct" with no code on 35 of 50 MBPP items (bench run of 2026-11-22).
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


def _clip(text: str) -> str:
    return text if len(text) <= HISTORY_CHARS else text[:HISTORY_CHARS] + " […]"


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


def latest_answer(turns: Sequence[Turn]) -> str | None:
    """The latest Worker reply: the episode's answer so far."""
    for turn in reversed(turns):
        if turn.role is Role.WORKER:
            return turn.reply
    return None


def sees_proposed_answer(style: str, kind: str | None) -> bool:
    """Whether a Verifier of `style` is shown the answer it checks. A direct or program
    Verifier answers on its own and is compared, except on code, which it must read."""
    return style == "reason" or kind == "code"


def build_messages(
    role: Role,
    task: str,
    turns: Sequence[Turn],
    context: Sequence[ChatMessage] = (),
    keep_last: int | None = None,
    style: str = "reason",
    kind: str | None = None,
) -> list[ChatMessage]:
    """The messages sent to a `style` member acting as `role` (see module docstring);
    `kind` is the task's scorer kind (None: unknown)."""
    if style not in SYSTEM:
        raise ValueError(f"unknown style {style!r}")
    shown = list(turns) if keep_last is None else list(turns)[len(turns) - keep_last :] if keep_last else []
    if role is Role.VERIFIER and not sees_proposed_answer(style, kind):
        # An answer checked by comparison must be reached without it: shown the turns,
        # a small model copies the Worker's answer (p2's direct Verifier accepted 94% of
        # right answers and 96% of wrong ones; docs/pools.md, "How far each Verifier can be trusted").
        shown = []
    parts = []
    if context:
        lines = "\n".join(f"{m.role}: {_clip(m.content)}" for m in context)
        parts.append(f"Earlier conversation:\n{lines}")
    parts.append(f"Task:\n{task}")
    if shown:
        dropped = len(turns) - len(shown)
        header = f"Turns so far ({dropped} earlier turns omitted):" if dropped else "Turns so far:"
        body = "\n\n".join(f"[{LABEL[t.role]}]\n{_clip(t.reply)}" for t in shown)
        parts.append(f"{header}\n{body}")
    if role is Role.VERIFIER and sees_proposed_answer(style, kind):
        answer = latest_answer(turns)
        if answer is not None:
            parts.append(f"Proposed answer to check:\n{_clip(answer)}")
    parts.append(REQUEST[style][role])
    return [ChatMessage("system", SYSTEM[style][role]), ChatMessage("user", "\n\n".join(parts))]


_VERDICT = re.compile(r"\bverdict\s*[:\-]?\s*\**\s*(ACCEPT|REVISE)\b", re.I)
_LEADING = re.compile(r"^\W*(ACCEPT|REVISE)\b", re.I)
# A Thinker's suggestion is its own last line naming exactly one role: "Next: worker".
_NEXT = re.compile(r"[\s*>_-]*next\s*(?:role)?\s*[:\-]\s*\**\s*(thinker|worker|verifier)\W*", re.I)


def stated_verdict(reply: str) -> str | None:
    """'ACCEPT' or 'REVISE' as the reply states it (last verdict line, or a leading word)."""
    found = _VERDICT.findall(reply)
    if found:
        return found[-1].upper()
    lead = _LEADING.match(reply)
    return lead.group(1).upper() if lead else None


def verdict(reply: str, proposed: str | None, kind: str | None = None) -> tuple[str, str]:
    """(verdict, how) for a Verifier `reply` on the answer `proposed` of a task whose
    scorer is `kind` (None: unknown); how is 'compared' or 'stated' (module docstring)."""
    if reply and proposed and kind != "code":
        own_text = re.split(r"\bverdict\b", reply, flags=re.I)[0]
        mine = final_answer(own_text, kind)
        theirs = final_answer(proposed, kind)
        if mine is not None and mine.strong and theirs is not None:
            return ("ACCEPT" if same_answer(mine, theirs) else "REVISE"), "compared"
    return (stated_verdict(reply) or "REVISE"), "stated"


def suggestion(reply: str) -> Role | None:
    """The role a Thinker asks to act next: its last non-empty line, when that line is a
    `Next: <role>` naming one role (an echo of the instructions names several: ignored)."""
    lines = [line for line in reply.strip().splitlines() if line.strip()]
    if not lines:
        return None
    match = _NEXT.fullmatch(lines[-1].strip())
    return Role(match.group(1).lower()) if match else None
