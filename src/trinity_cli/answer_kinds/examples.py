"""A code task's shown examples and running a code answer against them, in the sandbox.

Examples (`Examples`): the tests a code task shows in its own text, never the ones it is
scored on (tasks/builtin.py: MBPP's first assert; HumanEval's `>>>` lines; a `file:` task's
`examples` field); for `ask` and `serve`, the asserts and `>>>` lines found in the question
(tasks/doctests.py). Each run goes through the sandbox and its recorder (sandbox/recorded.py).

`Examples` is one kind of an answer kind's checks (answer_kinds/base.py `Checks`): `run(reply)`
gives the dict a turn records (`ExampleRun.to_dict()`: passed, failing, error); `examples_note`
is the line later prompts show under the answer.
"""

from __future__ import annotations

import ast
import re
import secrets
from dataclasses import asdict, dataclass
from typing import Any

from trinity_cli.sandbox.recorded import run_python_recorded
from trinity_cli.tasks.code import build_program, extract_code

_DEFINITION = re.compile(r"^\s*(?:async\s+def|def|class)\s+\w", re.MULTILINE)

EXAMPLE_TIMEOUT_S = 10.0
ERROR_CHARS = 200


@dataclass(frozen=True)
class Examples:
    """A code task's shown tests: `source`, Python (setup statements and asserts); `prelude`
    and `entry_point` as in the item's code reference (tasks/code.py)."""

    source: str
    prelude: str = ""
    entry_point: str | None = None

    @classmethod
    def from_reference(cls, reference: Any) -> Examples | None:
        """The examples of a code item's reference dict (its "examples" key), or None."""
        if not isinstance(reference, dict) or not str(reference.get("examples") or "").strip():
            return None
        return cls(str(reference["examples"]), str(reference.get("prelude") or ""), reference.get("entry_point"))

    def run(self, reply: str, strict: bool = False) -> dict[str, Any]:
        """Run `reply`'s code against these examples (`run_examples`), as a turn records it."""
        return run_examples(reply, self, strict=strict).to_dict()


@dataclass(frozen=True)
class ExampleRun:
    """What running a code answer against its examples did: `passed`; else `failing`, the
    first example that failed (None when the code itself did not run), and `error`, its
    exception line."""

    passed: bool
    failing: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _statements(source: str) -> list[str]:
    """`source` split into its top-level statements (the whole text if it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [source]
    return [ast.get_source_segment(source, node) or "" for node in tree.body]


def run_examples(reply: str, examples: Examples, strict: bool = False) -> ExampleRun:
    """Run the code of `reply` and then each of `examples`' statements in turn, in the
    sandbox; the first statement that raises is the failing example."""
    marker = f"trinity-example-{secrets.token_hex(6)}:"
    steps = _statements(examples.source)
    runner = (
        f"__trinity_steps = {steps!r}\n"
        "for __trinity_i, __trinity_src in enumerate(__trinity_steps):\n"
        "    try:\n"
        "        exec(__trinity_src, globals())\n"
        "    except BaseException as __trinity_e:\n"
        f"        print({marker!r} + str(__trinity_i) + ':' + type(__trinity_e).__name__ + ': ' "
        f"+ str(__trinity_e)[:{ERROR_CHARS}])\n"
        "        raise SystemExit(1)\n"
    )
    done = f"trinity-examples-done-{secrets.token_hex(6)}"
    program = build_program(reply, {"prelude": examples.prelude, "entry_point": examples.entry_point,
                                    "tests": runner}, done)
    result = run_python_recorded(program, secrets=(marker, done), timeout_s=EXAMPLE_TIMEOUT_S,
                                 strict=strict)
    if result.passed and done in result.stdout:
        return ExampleRun(True)
    for line in result.stdout.splitlines():
        if line.startswith(marker):
            index, _, error = line[len(marker):].partition(":")
            return ExampleRun(False, steps[int(index)].strip(), error.strip())
    if result.killed_for == "timeout":
        return ExampleRun(False, None, "timed out")
    last = next((ln for ln in reversed(result.stderr.splitlines()) if ln.strip()), "")
    return ExampleRun(False, None, last.strip()[:ERROR_CHARS] or f"exit status {result.returncode}")


def examples_note(result: dict[str, Any]) -> str:
    """One line on a code answer's example run (ExampleRun as a dict)."""
    if result.get("passed"):
        return "(trinity ran the task's examples on this code: all passed)"
    failing = str(result.get("failing") or "").strip()
    error = str(result.get("error") or "").strip()
    what = f" `{failing}`" if failing else ""
    return f"(trinity ran the task's examples on this code: failed{what}: {error or 'no result'})"


def defines_code(reply: str) -> bool:
    """Whether `reply`'s code holds a definition (a `def` or `class` line)."""
    return _DEFINITION.search(extract_code(reply)) is not None
