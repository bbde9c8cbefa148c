"""`trinity ask`: what a question is asked with (`AskOptions`), what comes back (`AskResult`,
read from the saved run), the question itself (`read_question`) and its episode seed
(`question_seed`). ask/answer.py answers it (its docstring: the run record, seeds, modes, the
turn budget).

Light on purpose: no model code, no numpy. The warm client (serve/warm.py), which sends the
question to a running `trinity serve`, imports this package and nothing that answers.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from trinity_cli import seeds
from trinity_cli.conductor.workflow import DEFAULT_DEPTH, ConductorSpec
from trinity_cli.errors import ConfigError
from trinity_cli.messages import ChatMessage, Transcript

if TYPE_CHECKING:
    from trinity_cli.pool_config import PoolConfig


@dataclass
class AskOptions:
    """`max_turns` None: the head's training max_turns (`turn_budget`); `greedy` None: the
    default decision mode (`head.default_greedy`: greedy for a trained head)."""

    pool: str | None = None
    head: str | None = None
    backbone: str | None = None
    device: str = "auto"
    max_turns: int | None = None
    seed: int = 0
    exclude: Sequence[str] = ()
    greedy: bool | None = None  # None: DEFAULT_DECISIONS
    use_cache: bool = True
    token_budget: int | None = None
    cost_budget: float | None = None
    mode: str | None = None  # a policy's name (policies/registry.py); None: `answer_mode`
    conductor: str | None = None  # conductor mode: who conducts (None: the pool's)
    conductor_depth: int = DEFAULT_DEPTH
    kind: str | None = None  # the answer kind (answer_kinds/); None: detected from the question

    def conductor_spec(self) -> ConductorSpec:
        return ConductorSpec(self.conductor, self.conductor_depth)


def answer_mode(options: AskOptions, config: PoolConfig) -> str:
    """The name of the policy a question is answered by (policies/registry.py resolves it):
    `options.mode` when given; else the coordinator when a head is named or the pool's `router`
    is `head`, else the policy the pool's `router` names (`agree`)."""
    if options.mode is not None:
        return options.mode
    return "coordinator" if options.head is not None or config.router == "head" else config.router


@dataclass
class AskResult:
    """`answer`: the answer alone (turns/answer_text.py); `transcript.answer`: the whole reply;
    `head_name` None in conductor mode (`transcript.workflow` says what ran)."""

    run_id: str
    transcript: Transcript
    head_name: str | None
    head_trained: bool
    wall_s: float
    answer: str = ""
    record: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of_record(cls, run_id: str, record: dict[str, Any]) -> AskResult:
        """The result of the ask run `run_id` from its record (run.json)."""
        head = record["head"] or {"name": None, "trained": False}
        name = head["name"]
        return cls(run_id, Transcript.from_dict(record["transcript"]), None if name is None else str(name),
                   bool(head["trained"]), float(record["wall_s"]), record["answer"], record)


def question_seed(seed: int, question: str, context: Sequence[ChatMessage] = ()) -> int:
    """The episode seed of `question` (after earlier `context`) under `seed`: the first 4
    bytes, little-endian, of sha256 over the canonical JSON of [seed, question, [[role,
    content], ...]]."""
    payload = json.dumps([seed, question, [[m.role, m.content] for m in context]], ensure_ascii=False,
                         separators=(",", ":"))
    return seeds.seed(payload)


def read_question(question: str | None, stdin: TextIO | None = None) -> str:
    """`question`, or when it is None or "-" the text on `stdin` (default: sys.stdin),
    refused when that is a terminal; then `clean_question`."""
    if question is None or question == "-":
        stream = stdin if stdin is not None else sys.stdin
        if stream is None or stream.isatty():
            raise ConfigError('no question given: trinity ask "QUESTION" (or pipe it on stdin)')
        question = stream.read()
    return clean_question(question)


def clean_question(question: str) -> str:
    question = question.strip()
    if not question:
        raise ConfigError("the question is empty", 'pass it as an argument or on stdin: trinity ask "..."')
    return question
