"""The text the coordinator's backbone reads (version `COORDINATOR_VERSION` in
coordinator/policy.py): a short dispatcher instruction, the task, and the conversation as
plain `role (model): content` lines (no chat template: it hurt role accuracy in the paper's
code), each followed by how the turn was settled when it was (`[ACCEPT]` / `[REVISE]` for a
Verifier, `[examples passed]` / `[examples failed]` for a code answer run against the task's
examples), ending with the line `Next:`. A long text is shortened to the backbone's token limit
by dropping the oldest turns first (then the earlier context, then the end of the task): the
instruction, the task and `Next:` are never the part that goes (`candidate_texts`, in order of
preference; `coordinator_text` takes the first that fits). Changing any of it changes every
feature: bump COORDINATOR_VERSION.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trinity_cli.messages import ChatMessage, Turn

INSTRUCTION = (
    "You coordinate a team of language models. Read the task and the conversation so far, "
    "then decide which model acts next and in which role: thinker (plans or critiques), "
    "worker (solves) or verifier (checks the latest answer)."
)
TASK_CHARS = 2000
TURN_CHARS = 600
TEXT_CHARS = 6000


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + " …"


def coordinator_text(
    task: str,
    turns: Sequence[Turn],
    context: Sequence[ChatMessage] = (),
    fits: Callable[[str], bool] | None = None,
) -> str:
    """The text the backbone reads (see module docstring).

    At most TEXT_CHARS characters and, given `fits` (whether the backbone reads a text
    whole), a text that fits: the oldest turns are dropped first, then the earlier context,
    and only then is the task clipped (from its end); the instruction and `Next:` always stay.
    """

    texts = candidate_texts(task, turns, context)
    if fits is None:
        return texts[0]
    return next((text for text in texts if fits(text)), texts[-1])


def candidate_texts(task: str, turns: Sequence[Turn], context: Sequence[ChatMessage] = ()) -> list[str]:
    """The texts `coordinator_text` chooses from, in its order of preference: every turn
    (within TEXT_CHARS), then without the oldest turns one by one, then the task alone with
    its length halved until one character is left; `coordinator_text` takes the first that
    fits, else the last."""

    def build(task_chars: int, with_context: bool, lines: Sequence[str]) -> str:
        head = [INSTRUCTION]
        if context and with_context:
            head.append("Earlier: " + _one_line(" ".join(f"{m.role}: {m.content}" for m in context), TURN_CHARS))
        head.append("Task: " + _one_line(task, task_chars))
        return "\n".join([*head, *lines, "Next:"])

    lines = [_turn_line(t) for t in turns]
    while lines and len(build(TASK_CHARS, True, lines)) > TEXT_CHARS:
        lines.pop(0)
    texts = [build(TASK_CHARS, True, lines[i:]) for i in range(len(lines) + 1)]
    task_chars = TASK_CHARS
    while True:
        texts.append(build(task_chars, False, []))
        if task_chars <= 1:
            return texts
        task_chars //= 2


def _turn_line(turn: Turn) -> str:
    """One turn as the coordinator reads it (module docstring): role, model, reply, outcome."""
    marks = []
    if turn.verdict is not None:
        marks.append(turn.verdict)
    if turn.examples_passed is not None:
        marks.append("examples passed" if turn.examples_passed else "examples failed")
    suffix = "".join(f" [{m}]" for m in marks)
    return f"{turn.role.value} ({turn.model}): {_one_line(turn.reply, TURN_CHARS)}{suffix}"
