"""Code answers: the program in a reply, and its score by running it with the item's tests
in the sandbox (tasks/scoring.py documents the contract)."""

from __future__ import annotations

import re
import secrets
from typing import Any

_CODE_START = re.compile(r"^(?:def|class|import|from|async\s+def|@)\s*\w", re.MULTILINE)
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(text: str, entry_point: str | None = None) -> str:
    """The program in a reply: a fenced block (preferring one defining `entry_point`) or the reply."""
    blocks: list[tuple[str, str]] = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    blocks = [(lang, body) for lang, body in blocks if lang in ("", "python", "py", "python3")]
    if not blocks:
        # No fences: drop any prose before the first line that starts code.
        lines = text.strip("\n").splitlines()
        start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), 0)
        return "\n".join(lines[start:])
    if entry_point:
        defining = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", re.MULTILINE)
        for _, body in blocks:
            if defining.search(body):
                return body
    for _, body in blocks:
        if _CODE_START.search(body):
            return body
    return blocks[0][1]


def build_program(output: str, reference: dict[str, Any], sentinel: str) -> str:
    """The source run for a code item: prelude, the reply's code, the tests, then the sentinel."""
    entry_point = reference.get("entry_point")
    prelude = reference.get("prelude") or ""
    code = extract_code(output, entry_point)
    defines = entry_point and re.search(
        rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE
    )
    if prelude and entry_point and not defines and code.startswith((" ", "\t")):
        body = prelude + code  # the reply completes the prelude's function body
    else:
        body = prelude + ("\n\n" if prelude else "") + code
    return f"{body}\n\n{reference['tests']}\n\nprint({sentinel!r})\n"


def score_code(output: str, reference: Any) -> float:
    if not isinstance(reference, dict) or not isinstance(reference.get("tests"), str):
        raise ValueError("code reference must be a dict with a 'tests' string")
    from trinity_cli.sandbox.recorded import run_python_recorded

    sentinel = f"trinity-tests-done-{secrets.token_hex(8)}"
    program = build_program(output, reference, sentinel)
    # Recorded: a bench or evolve run replayed from the rollout cache scores without running.
    result = run_python_recorded(program, secrets=(sentinel,), timeout_s=float(reference.get("timeout_s", 10)),
                                 strict=reference.get("sandbox") == "strict")
    return 1.0 if result.passed and sentinel in result.stdout else 0.0
