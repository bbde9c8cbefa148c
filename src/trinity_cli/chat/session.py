"""`trinity chat` as a library: one conversation (ask/conversation.py: one run, each exchange
saved as it completes) whose pool and engines are loaded once for the session, as `trinity
serve` loads them (serve/service.ServedPool: the pool's weights and the default head's
backbone at start, any other policy's engine on first use), so the second message and every
later one start at once.

Each message is answered as `trinity ask` answers a question after the conversation so far:
its kind read from its own wording (ask/conversation.follow_up_kind), the kind's own
procedure when no mode is set (ask/answer.kind_default: a free-form message gets the
`drafts` policy), who answers chosen as serve chooses for a request
(service.ServedPool.continue_conversation, which a warm `ask -c` is answered by too).

What the prompt's commands change (`command`), from the next message on:
    /mode [NAME]   who answers: a policy's name (`trinity pools`), "default" for the default;
                   no NAME: say the current one
    /kind [NAME]   the answer kind of every message: a kind's name, "auto" to read it from
                   each message again; no NAME: say the current one
    /reset         a new conversation (a new run from the next message on)
    /system [TEXT] the system prompt of the next messages ("" or none: none)
    /help          these lines
    /exit, /quit   leave (as Ctrl-D does)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from trinity_cli import paths
from trinity_cli.answer_kinds import kind_name
from trinity_cli.ask import AskOptions, AskResult
from trinity_cli.ask import conversation as conv_mod
from trinity_cli.errors import ConfigError
from trinity_cli.events import ProgressFn, quiet
from trinity_cli.policies.registry import answering_kind, policy_names
from trinity_cli.runs.store import RunStore
from trinity_cli.serve.service import ServedPool, ServeOptions

HELP = """/mode [NAME]    who answers: a policy's name, or default
/kind [NAME]    the answer kind: a kind's name, or auto (read from each message)
/system [TEXT]  the system prompt of the next messages (none: none)
/reset          a new conversation, saved as a new run
/exit           leave (Ctrl-D too); Ctrl-C stops an answer and keeps the session
\"\"\"           on a line of its own, or opening a message: a message of several lines, until a
                line that ends with \"\"\""""


class LeaveChat(Exception):
    """/exit or /quit: the session ends."""


def history_file() -> Path:
    """Where the prompt keeps the lines typed at it, between sessions."""
    return paths.home() / "chat-history"


@dataclass
class Said:
    """What a command changed, in one line for the user."""

    text: str


class ChatSession:
    """One conversation at the prompt (module docstring). `conversation`: a run to continue
    ("latest", or a run id), None for a new one. Close it (or use it as a context manager):
    it frees the models."""

    def __init__(self, options: AskOptions, conversation: str | None = None, store: RunStore | None = None,
                 progress: ProgressFn | None = None) -> None:
        if options.mode is not None:
            answering_kind(options.mode)  # refused before anything loads
        kind_name(options.kind)
        self.options = options
        self.store = store or RunStore()
        self.conversation = conv_mod.open_conversation(conversation, self.store, options.system)
        self.served = ServedPool(ServeOptions(pool=options.pool, head=options.head, backbone=options.backbone,
                                              device=options.device, use_cache=options.use_cache,
                                              conductor=options.conductor, conductor_depth=options.conductor_depth),
                                 progress or quiet)

    def __enter__(self) -> ChatSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.served.close()

    @property
    def run_id(self) -> str | None:
        """The conversation's run, once its first exchange is saved."""
        return self.conversation.run_id

    def say(self, message: str, progress: ProgressFn | None = None) -> AskResult:
        """Answer `message` as the conversation's next and save the exchange, on the loaded pool
        (service.ServedPool.continue_conversation; nothing is saved when it fails or is
        interrupted)."""
        return self.served.continue_conversation(None, message, self.options, progress, self.conversation, self.store)

    def command(self, line: str) -> Said:
        """Apply the prompt command `line` ("/mode agree", module docstring); LeaveChat for
        /exit; ConfigError for an unknown command or name."""
        name, _, arg = line.strip().partition(" ")
        arg = arg.strip()
        if name in ("/exit", "/quit"):
            raise LeaveChat
        if name == "/help":
            return Said(HELP)
        if name == "/reset":
            self.conversation = conv_mod.Conversation(self.options.system)
            return Said("a new conversation: the next message starts a new run")
        if name == "/mode":
            return self._mode(arg)
        if name == "/kind":
            return self._kind(arg)
        if name == "/system":
            self.options = replace(self.options, system=arg or None)
            self.conversation.system = arg or None
            return Said(f"system prompt: {arg}" if arg else "no system prompt")
        raise ConfigError(f"unknown command {name!r}", "/help lists the commands")

    def _mode(self, arg: str) -> Said:
        if not arg:
            return Said(f"mode: {self.options.mode or 'default'}")
        mode = None if arg == "default" else arg
        if mode is not None:
            kind = answering_kind(mode)  # unknown: ConfigError with the close names
            if mode not in policy_names(asking=True):
                raise ConfigError(f"{mode} does not answer questions", "/mode with a name from trinity pools")
            kind.check(replace(self.options, mode=mode))
            self.served.engine(mode, None)  # built now: a head that does not fit is refused here
        self.options = replace(self.options, mode=mode)
        return Said(f"mode: {mode or 'default'}")

    def _kind(self, arg: str) -> Said:
        if not arg:
            return Said(f"kind: {self.options.kind or 'auto (read from each message)'}")
        kind = None if arg == "auto" else arg
        kind_name(kind)  # unknown: ConfigError with the close names
        self.options = replace(self.options, kind=kind)
        return Said(f"kind: {kind or 'auto (read from each message)'}")
