"""Role prompts, how a turn's messages are built, and how replies are read.

Prompts are versioned: `PROMPT_VERSION` goes into head manifests and rollout cache keys,
so changing any wording below must bump it.

Message layout for every role: one system message (the role's instructions) and one user
message holding, in order, earlier conversation (if any), the task, the turns so far
(oldest dropped first when the context is short: `keep_last`), and the role's request.

Verifier contract: small models asked to "check" an answer accept nearly everything, so
the Verifier re-derives the answer on its own and ends with `Verdict: ACCEPT` or
`Verdict: REVISE` (a reply that starts with the bare word counts too). When both the
Verifier's own final answer and the Worker's can be extracted (an `Answer:` line,
`\\boxed{}`, or a final number) they are compared and the comparison decides; otherwise
the stated verdict decides, and anything unparseable is REVISE.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trinity_cli.messages import ChatMessage, Role, Turn

PROMPT_VERSION = "p1"

# Past replies are clipped to this many characters when shown to later turns: small
# models have small contexts, and the head of a long reply carries its substance.
HISTORY_CHARS = 1500

SYSTEM = {
    Role.THINKER: (
        "You are the Thinker in a team of assistants solving a task together. "
        "Do NOT solve the task and do NOT state a final answer. Instead write a short plan "
        "of the steps needed, or, if an answer was already proposed, point out exactly what "
        "is wrong or missing in it. Be brief. End with one line naming who should act next: "
        "'Next: worker' (to solve), 'Next: verifier' (to check the latest answer) or "
        "'Next: thinker'."
    ),
    Role.WORKER: (
        "You are the Worker in a team of assistants solving a task together. Solve the task "
        "step by step, using the plan and fixing the mistakes pointed out in earlier turns if "
        "there are any. Follow the answer format the task asks for; otherwise end with a "
        "line 'Answer: <final answer>'."
    ),
    Role.VERIFIER: (
        "You are the Verifier in a team of assistants. Do not trust the proposed answer. "
        "Solve the task yourself, independently and step by step, and end your solution "
        "with a line 'Answer: <your final answer>'. Then compare it with the proposed "
        "answer and write a last line that is exactly 'Verdict: ACCEPT' if they agree and "
        "the proposed answer is correct, or 'Verdict: REVISE' if not."
    ),
}

REQUEST = {
    Role.THINKER: "Write the plan or critique now (no final answer).",
    Role.WORKER: "Solve the task now.",
    Role.VERIFIER: "Solve it independently, then give your verdict.",
}

LABEL = {Role.THINKER: "Thinker", Role.WORKER: "Worker", Role.VERIFIER: "Verifier"}


def _clip(text: str) -> str:
    return text if len(text) <= HISTORY_CHARS else text[:HISTORY_CHARS] + " […]"


def latest_answer(turns: Sequence[Turn]) -> str | None:
    """The latest Worker reply: the episode's answer so far."""
    for turn in reversed(turns):
        if turn.role is Role.WORKER:
            return turn.reply
    return None


def build_messages(
    role: Role,
    task: str,
    turns: Sequence[Turn],
    context: Sequence[ChatMessage] = (),
    keep_last: int | None = None,
) -> list[ChatMessage]:
    """The messages sent to the model acting as `role` (see module docstring)."""
    shown = list(turns) if keep_last is None else list(turns)[len(turns) - keep_last :] if keep_last else []
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
    if role is Role.VERIFIER:
        answer = latest_answer(turns)
        if answer is not None:
            parts.append(f"Proposed answer to check:\n{_clip(answer)}")
    parts.append(REQUEST[role])
    return [ChatMessage("system", SYSTEM[role]), ChatMessage("user", "\n\n".join(parts))]


_VERDICT = re.compile(r"\b(?:verdict\s*[:\-]?\s*)(ACCEPT|REVISE)\b", re.I)
_LEADING = re.compile(r"^\W*(ACCEPT|REVISE)\b", re.I)
_NEXT = re.compile(r"next\s*(?:role)?\s*[:\-]\s*\**\s*(thinker|worker|verifier)\b", re.I)
_ANSWER = re.compile(r"(?:final\s+)?answer\s*(?:is)?\s*[:=]\s*(.+)", re.I)
_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?")
# A number, maybe with '$', thousands commas, a few unit words and a final period.
_PLAIN_NUMBER = re.compile(r"\$?\s*(-?\$?[\d,]*\.?\d+)\s*(?:[A-Za-z%]+\s*){0,3}\.?")


def stated_verdict(reply: str) -> str | None:
    """'ACCEPT' or 'REVISE' as the reply states it (last verdict line, or a leading word)."""
    found = _VERDICT.findall(reply)
    if found:
        return found[-1].upper()
    lead = _LEADING.match(reply)
    return lead.group(1).upper() if lead else None


def _boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


def final_answer(text: str) -> str | None:
    """A normalised final answer from free text, or None when none can be told apart.

    Preference: `\\boxed{}`, then the last `Answer:` line, then the last number.
    Normalisation: lower case, no `$`, commas, spaces, `*`, trailing period; numbers
    written as 84.0 become 84; a lone choice letter like '(C)' becomes 'c'.
    """
    boxed = _boxed(text)
    candidate = boxed
    if candidate is None:
        lines = [m.group(1) for line in text.splitlines() if (m := _ANSWER.search(line))]
        candidate = lines[-1] if lines else None
    if candidate is None:
        numbers = _NUMBER.findall(text.split("Verdict")[0])
        candidate = numbers[-1] if numbers else None
    if candidate is None:
        return None
    value = candidate.strip().strip("*").strip()
    letter = re.fullmatch(r"\(?([A-Ea-e])[).:]?(?:\s.*)?", value)
    if letter:
        return letter.group(1).lower()
    number = _PLAIN_NUMBER.fullmatch(value)
    if number:
        raw = number.group(1).replace(",", "")
        try:
            as_float = float(raw)
            return str(int(as_float)) if as_float.is_integer() else str(as_float)
        except ValueError:
            pass
    return re.sub(r"[\s$*,]|\.$", "", value.lower()) or None


def verdict(reply: str, proposed: str | None) -> tuple[str, str]:
    """(verdict, how): how is 'compared' when answers were compared, else 'stated'."""
    mine = final_answer(reply.split("Verdict")[0]) if reply else None
    theirs = final_answer(proposed) if proposed else None
    if mine is not None and theirs is not None:
        return ("ACCEPT" if mine == theirs else "REVISE"), "compared"
    return (stated_verdict(reply) or "REVISE"), "stated"


def suggestion(reply: str) -> Role | None:
    """The role a Thinker asks to act next ('Next: worker'), if any."""
    found = _NEXT.findall(reply)
    return Role(found[-1].lower()) if found else None
