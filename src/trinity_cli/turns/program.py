"""Program-style turns: run the Python a `program` member wrote, in the code sandbox, and
turn what it prints into the turn's answer.

Contract of `run_reply(reply)` (Worker, and Verifier on non-code tasks):
    the program is the reply's first fenced Python block (else the reply from its first
    line that starts code); it runs under `tasks.sandbox.run_python` with a short timeout;
    its answer is the last non-empty line it printed (less a leading "Answer:" label), else
    the value of a top-level variable `answer` if it sets one. The turn's reply
    becomes the model's text plus

        Program output:
        ```
        <stdout, last 20 lines / 800 characters; stderr's last line if it failed>
        ```
        Answer: <answer>

    (the `Answer:` line only when there is an answer), so scorers, Verifiers and later turns
    read it like any other reply. A program that defines functions and prints nothing (a
    code task) leaves the reply unchanged apart from an empty output note.

Contract of `run_tests(proposed, tests)` (a program Verifier on a code task): the proposed
reply's code followed by the Verifier's assert block runs in the sandbox; ACCEPT when it
exits 0 after the asserts ran, else REVISE.

The model's reply is what the rollout cache stores; the program's run is recorded apart
(sandbox/recorded.py), so a replayed turn does not run it again.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import asdict, dataclass
from typing import Any

from trinity_cli.sandbox.recorded import run_python_recorded
from trinity_cli.tasks.code import extract_code

TIMEOUT_S = 10.0
MEMORY_MB = 512
OUTPUT_LINES = 20
OUTPUT_CHARS = 800
ANSWER_CHARS = 200
_LABEL = re.compile(r"^(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*[:=]?\s*", re.IGNORECASE)
# What run_reply appends to the model's text (module docstring); `split_reply` reads it back.
OUTPUT_HEADER = "\n\nProgram output:\n```\n"
_SCAFFOLD = re.compile(r"\n\nProgram output:\n```\n.*\n```(?:\nAnswer: (?P<answer>[^\n]*))?", re.DOTALL)


@dataclass(frozen=True)
class Execution:
    """What running a program turn did; recorded on the turn (`Turn.execution`)."""

    code: str
    returncode: int | None
    stdout: str
    stderr: str
    answer: str | None
    timed_out: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _tail(text: str) -> str:
    lines = text.rstrip().splitlines()[-OUTPUT_LINES:]
    out = "\n".join(lines)
    return out if len(out) <= OUTPUT_CHARS else "…" + out[-OUTPUT_CHARS:]


def _epilogue(marker: str) -> str:
    # Prints `answer` when the program defines it, behind a marker that tells it apart
    # from what the program printed itself. Runs only if the program got that far.
    return (
        "\n\n# trinity: report `answer` if the program set one\n"
        "if 'answer' in globals() and not callable(globals()['answer']):\n"
        f"    print({marker!r} + str(globals()['answer']))\n"
    )


def run_reply(reply: str, strict: bool = False) -> tuple[str, Execution]:
    """Run a program-style reply; (the reply to record, what the run did). See the module
    docstring for how the answer is chosen and how the reply is extended. `strict` (the
    pool's `sandbox: strict`) refuses to run it without isolation, as TRINITY_SANDBOX=strict does."""
    code = extract_code(reply)
    marker = f"trinity-answer-{secrets.token_hex(6)}:"
    result = run_python_recorded(code + _epilogue(marker), secrets=(marker,), timeout_s=TIMEOUT_S,
                                 memory_mb=MEMORY_MB, strict=strict)
    printed: list[str] = []
    variable: str | None = None
    for line in result.stdout.splitlines():
        if line.startswith(marker):
            variable = line[len(marker) :].strip()
        elif line.strip():
            printed.append(line.strip())
    # The variable wins only when the program printed nothing itself: a program that
    # prints its result and also happens to name something `answer` meant what it printed.
    answer = printed[-1] if printed else variable
    if answer is not None:
        # Programs often print their own label ("Answer: 8.0"): keep the value only.
        answer = _LABEL.sub("", answer).strip()[:ANSWER_CHARS] or None
    timed_out = result.killed_for == "timeout"
    shown = _tail("\n".join(printed))
    if result.returncode not in (0, None) or timed_out:
        last_error = next((ln for ln in reversed(result.stderr.splitlines()) if ln.strip()), "")
        why = "timed out" if timed_out else f"exit status {result.returncode}"
        shown = (shown + "\n" if shown else "") + f"[{why}] {last_error}".rstrip()
        if not printed:
            answer = None  # a crash's partial state is not an answer
    execution = Execution(code, result.returncode, _tail(result.stdout), _tail(result.stderr), answer, timed_out)
    text = f"{reply.rstrip()}{OUTPUT_HEADER}{shown or '(nothing printed)'}\n```"
    if answer is not None:
        text += f"\nAnswer: {answer}"
    return text, execution


def split_reply(text: str) -> tuple[str, str | None, bool]:
    """(the model's own text, the program's answer or None, whether a program ran) of a
    recorded reply: `run_reply`'s scaffold (output block and `Answer:` line) taken off the
    end. A reply without that scaffold comes back whole, (text, None, False)."""
    start = text.rfind(OUTPUT_HEADER)
    match = _SCAFFOLD.fullmatch(text, start) if start >= 0 else None
    if match is None:
        return text, None, False
    return text[:start], match.group("answer"), True


def run_tests(
    proposed: str, tests_reply: str, entry_point: str | None = None, strict: bool = False
) -> tuple[str, Execution]:
    """('ACCEPT' | 'REVISE', what the run did): the proposed code followed by the tests."""
    sentinel = f"trinity-asserts-done-{secrets.token_hex(6)}"
    code = f"{extract_code(proposed, entry_point)}\n\n{extract_code(tests_reply)}\n\nprint({sentinel!r})\n"
    result = run_python_recorded(code, secrets=(sentinel,), timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB, strict=strict)
    passed = result.passed and sentinel in result.stdout
    execution = Execution(
        code, result.returncode, _tail(result.stdout.replace(sentinel, "")), _tail(result.stderr),
        None, result.killed_for == "timeout",
    )
    return ("ACCEPT" if passed else "REVISE"), execution
