"""What a reply says besides its answer: a code Verifier's verdict and a Thinker's suggestion.

Verdicts of code Verifiers that read (`verdict`): the stated `Verdict: ACCEPT|REVISE` (a reply
that opens with the bare word counts); anything unparseable is REVISE. A Thinker's suggestion
is its own last line naming exactly one role (`Next: worker`).
"""

from __future__ import annotations

import re

from trinity_cli.messages import Role

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


def verdict(reply: str) -> str:
    """'ACCEPT' or 'REVISE' of a code Verifier that reads (module docstring): as stated,
    REVISE when no verdict can be read."""
    return stated_verdict(reply) or "REVISE"


def suggestion(reply: str) -> Role | None:
    """The role a Thinker asks to act next: its last non-empty line, when that line is a
    `Next: <role>` naming one role (an echo of the instructions names several: ignored)."""
    lines = [line for line in reply.strip().splitlines() if line.strip()]
    if not lines:
        return None
    match = _NEXT.fullmatch(lines[-1].strip())
    return Role(match.group(1).lower()) if match else None
