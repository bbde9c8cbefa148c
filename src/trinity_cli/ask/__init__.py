"""`trinity ask`: what a question is asked with (`AskOptions`), what comes back (`AskResult`,
read from the saved run), the question itself (`read_question`) and its episode seed
(`question_seed`). ask/answer.py answers it (its docstring: the run record, seeds, modes, the
turn budget).

Light on purpose: no model code, no numpy. The warm client (serve/warm.py), which sends the
question to a running `trinity serve`, imports this package and nothing that answers.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TextIO

from trinity_cli import seeds
from trinity_cli.conductor.workflow import DEFAULT_DEPTH, ConductorSpec
from trinity_cli.conversation import MAX_CHARS
from trinity_cli.errors import ConfigError
from trinity_cli.messages import ChatMessage, Transcript

if TYPE_CHECKING:
    from trinity_cli.pool_config import PoolConfig

log = logging.getLogger(__name__)
# How long `trinity ask "QUESTION"` waits for a pipe on stdin to send its first byte (or close).
PIPE_WAIT_S = 2.0


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
    system: str | None = None  # a system prompt: the conversation's first message (conversation.py)

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


def kind_of_wording(options: AskOptions, wording: str | None) -> AskOptions:
    """`options` whose answer kind is the one `wording` asks for (`read_piped`'s second value:
    the question, not the piped text), unless a kind is named or `wording` is None."""
    if wording is None or options.kind is not None:
        return options
    from trinity_cli.answer_kinds import detect  # here: the warm client imports this package

    return replace(options, kind=detect(wording) or "short")


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


def read_piped(question: str | None, stdin: TextIO | None = None, cap: int = MAX_CHARS) -> tuple[str, str | None]:
    """What `trinity ask "QUESTION"` is asked when text is piped to it (`cat notes.txt | trinity ask
    "summarize this"`): (the piped text, a blank line, then the question; the question alone)
    as simonw/llm puts them; with nothing piped (a terminal, or empty input), (the question,
    None). With no question (None or "-"), the piped text is the question (`read_question`),
    and (it, None) is returned. The second value is the text whose wording says the answer
    kind: the question, not the file. Piped input over `cap` characters, or that is not
    UTF-8 text (a NUL byte, or bytes UTF-8 cannot decode), is refused with ConfigError. A
    pipe that sends nothing, not even its end, within `PIPE_WAIT_S` is passed over with a
    warning (a parent process holding stdin open)."""
    if question is None or question == "-":
        return read_question(question, stdin), None
    stream = stdin if stdin is not None else sys.stdin
    if stream is None or stream.isatty():
        return clean_question(question), None
    if not _sends(stream):
        log.warning("stdin is a pipe that sent nothing in %.0f s: asking the question without it", PIPE_WAIT_S)
        return clean_question(question), None
    raw = getattr(stream, "buffer", None)
    try:
        data = raw.read(cap * 4 + 1) if raw is not None else stream.read(cap + 1).encode()
    except (OSError, ValueError):  # a closed stdin, or one a test harness will not let be read
        return clean_question(question), None
    if b"\0" in data:
        raise ConfigError("the piped input is not text (it holds a NUL byte: binary data)",
                          "pipe a text file, or convert it to text first")
    try:
        piped = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"the piped input is not UTF-8 text (byte {exc.start} cannot be decoded)",
                          "pipe a text file, or convert it to UTF-8 first (iconv -t utf-8)") from None
    if len(piped) > cap:
        raise ConfigError(f"the piped input is longer than {cap} characters",
                          f"pipe a part of it, e.g. head -c {cap // 2} FILE | trinity ask ...")
    if not piped.strip():
        return clean_question(question), None
    return f"{piped.strip()}\n\n{clean_question(question)}", clean_question(question)


def _sends(stream: TextIO) -> bool:
    """Whether `stream` has input or its end within `PIPE_WAIT_S` (a pipe or socket that a
    parent process holds open and never writes to would otherwise hold `ask` forever); True
    at once for a file, a device or a stream without a file descriptor."""
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, AttributeError):
        return True
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return True
    import select

    return bool(select.select([fd], [], [], PIPE_WAIT_S)[0])


def clean_question(question: str) -> str:
    question = question.strip()
    if not question:
        raise ConfigError("the question is empty", 'pass it as an argument or on stdin: trinity ask "..."')
    return question
