"""How an episode's answer is settled: which answers are votes, when two agree, the plurality
at the end, and code answers run against the examples the task itself shows.

Answers are read exactly as the task's scorer reads them (`tasks.answers.final_answer` for
the scorer kind). Rules (episode/loop.py applies them turn by turn):

    vote        A turn that answers (a Worker, or a Verifier asked alone: rules.proposes_answer)
                casts a vote for its answer, unless an equal answer was in its prompt (an
                answering turn among the turns it was shown): a Worker copying the proposed
                answer is not a second opinion.
    agreement   A Verifier asked alone ACCEPTs when its answer equals the answer of ANY
                earlier answering turn (`agreed_with`, the latest such turn), and the
                episode's answer is that turn's reply. The fixed `agree` procedure stops at
                the first vote that equals an earlier vote (`agreement`).
    plurality   At the end without agreement: the answer with the most votes, ties to the
                one voted for first; its first vote's reply is the episode's answer (a
                member's first reply is its greedy one, and on the default pool's training
                items greedy replies beat fresh samples: `trinity matrix`,
                docs/turns.md). With no vote at all, the latest answering turn's reply.
    code        Answers are not compared (programs are judged by running them): every code
                answer is run against the task's examples (`run_examples`), and a Verifier
                is only asked about code that passed them (turns/source_rules.py, rule 3).
                The answer is the latest code that passes its examples, else the latest
                code answer. In `agree` and in a head's episode (turns/source_rules.py, rule 5),
                the first code that passes its examples ends the episode.

Examples (`Examples`): the tests a code task shows in its own text, never the ones it is
scored on (tasks/builtin.py: MBPP's first assert; HumanEval's `>>>` lines; a `file:` task's
`examples` field); for `ask` and `serve`, the asserts and `>>>` lines found in the question
(tasks/doctests.py). Each run goes through the sandbox and its recorder (sandbox/recorded.py).
"""

from __future__ import annotations

import ast
import re
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from trinity_cli.messages import Turn
from trinity_cli.sandbox.recorded import run_python_recorded
from trinity_cli.tasks.answers import FinalAnswer, final_answer, same_answer
from trinity_cli.tasks.code import build_program, extract_code
from trinity_cli.turns import rules

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


def answer_of(turn: Turn, kind: str | None) -> FinalAnswer | None:
    """The answer an answering turn commits to, as the scorer of `kind` reads it (None for
    code, and for turns that do not answer)."""
    if not rules.proposes_answer(turn) or kind == "code":
        return None
    return final_answer(turn.reply, kind)


def gives_answer(reply: str, kind: str | None) -> bool:
    """Whether `reply` holds an answer the scorer of `kind` can read: on code, a definition
    (a `def` or `class` line) in its code; with no kind (a free question), any text;
    otherwise a final answer."""
    if kind is None:
        return bool(reply.strip())
    if kind == "code":
        return _DEFINITION.search(extract_code(reply)) is not None
    return final_answer(reply, kind) is not None


def shown_turns(turns: Sequence[Turn], turn: Turn) -> list[Turn]:
    """The earlier turns `turn`'s prompt showed (none when it was asked alone); `turns` are
    numbered on from the first's index (an episode's: episode/loop.py's `first_index`)."""
    if turn.alone or not turns:
        return []
    return list(turns[turn.truncated_turns : turn.index - turns[0].index])


def is_vote(turns: Sequence[Turn], turn: Turn, kind: str | None) -> bool:
    """Whether `turn` (not yet in, or last of, `turns`) casts a vote (module docstring)."""
    mine = answer_of(turn, kind)
    if mine is None:
        return False
    for seen in shown_turns(turns, turn):
        theirs = answer_of(seen, kind)
        if theirs is not None and same_answer(mine, theirs):
            return False
    return True


def agreed_with(turns: Sequence[Turn], answer: FinalAnswer | None, kind: str | None) -> int | None:
    """Index of the latest answering turn of `turns` whose answer equals `answer`, or None."""
    if answer is None:
        return None
    for turn in reversed(turns):
        theirs = answer_of(turn, kind)
        if theirs is not None and same_answer(answer, theirs):
            return turn.index
    return None


def agreement(turns: Sequence[Turn], kind: str | None) -> int | None:
    """For the `agree` procedure, after the latest turn: the index of the turn it agrees
    with when it is a vote equal to an earlier vote (code: the latest turn itself when its
    code passed its examples); else None."""
    if not turns:
        return None
    last = turns[-1]
    if kind == "code":
        return last.index if last.examples_passed else None
    if not last.vote:
        return None
    return agreed_with([t for t in turns[:-1] if t.vote], answer_of(last, kind), kind)


def settled_answer(turns: Sequence[Turn], kind: str | None) -> str | None:
    """The episode's answer at the end without agreement (module docstring: plurality; code)."""
    answering = [t for t in turns if rules.proposes_answer(t)]
    if not answering:
        return None
    if kind == "code":
        passing = [t for t in answering if t.examples_passed]
        return (passing or answering)[-1].reply
    groups: list[tuple[FinalAnswer, list[Turn]]] = []
    for turn in answering:
        if not turn.vote:
            continue
        mine = answer_of(turn, kind)
        assert mine is not None  # a vote has an answer
        group = next((g for g in groups if same_answer(g[0], mine)), None)
        if group is None:
            groups.append((mine, [turn]))
        else:
            group[1].append(turn)
    if not groups:
        return answering[-1].reply
    best = max(groups, key=lambda g: (len(g[1]), -g[1][0].index))
    return best[1][0].reply
