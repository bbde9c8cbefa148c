"""`trinity chat` at the terminal: the prompt (stdlib readline, its history in the home dir),
each answer streamed as `trinity ask` streams it (terminal.LiveTurns: every reply on stderr as
it is written) and then the answer on stdout (not again when it is the reply just streamed to
the same screen), the prompt's commands (chat/session.py), and a
conversation run replayed exchange by exchange (`trinity inspect RUN`).

Keys: Enter sends a line; a line that opens with `\"\"\"` starts a message of several lines,
sent at the line that ends with `\"\"\"`; Ctrl-C while an answer is written stops it (nothing
of it is saved, the session goes on), at the prompt it clears the line; Ctrl-D on an empty
line, /exit or /quit leave.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable
from typing import Any

from rich.text import Text

from trinity_cli.errors import TrinityError
from trinity_cli.events import AskStarted, Event, ServeLoading
from trinity_cli.render import console, terminal

PROMPT = ">>> "
MORE = "... "
QUOTES = '"""'


def loading(event: Event) -> None:
    """The session's start-up (serve/service.ServedPool's events)."""
    if isinstance(event, ServeLoading):
        console.note(terminal.SERVE_LOADING.get(event.step, event.step + " {what}…").format(what=event.what))


class ChatTurns(terminal.LiveTurns):
    """ask's live view, but the pool's header once per session: each message says only who
    answers it."""

    def __call__(self, event: Event) -> None:
        if isinstance(event, AskStarted):
            if not self.quiet:
                who = event.procedure or (f"head {event.head}" if event.head else f"conductor {event.conductor}")
                console.note(f"· {who}")
            return
        super().__call__(event)


def _history(path: Any) -> Callable[[], None]:
    """Load the prompt's history from `path` (readline, where this Python has it); the
    function that saves it."""
    try:
        import readline
    except ImportError:  # no readline (Windows): input() without history
        return lambda: None
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(1000)

    def save() -> None:
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(path)

    return save


def read_message(read: Callable[[str], str] = input) -> str:
    """The next message typed at the prompt: one line, or the lines between a line that opens
    with three double quotes and one that ends with them. EOFError at Ctrl-D,
    KeyboardInterrupt at Ctrl-C."""
    line = read(PROMPT)
    if not line.lstrip().startswith(QUOTES):
        return line
    first = line.lstrip()[len(QUOTES):]
    if first.rstrip().endswith(QUOTES):
        return first.rstrip()[: -len(QUOTES)]
    lines = [first] if first.strip() else []
    while True:
        more = read(MORE)
        if more.rstrip().endswith(QUOTES):
            lines.append(more.rstrip()[: -len(QUOTES)])
            return "\n".join(lines)
        lines.append(more)


def converse(session: Any, quiet: bool = False, read: Callable[[str], str] = input) -> None:
    """The prompt loop of `trinity chat` on `session` (a chat.session.ChatSession) until Ctrl-D
    or /exit (module docstring)."""
    from trinity_cli.chat.session import LeaveChat, history_file

    save = _history(history_file())
    _ctrl_c_interrupts()
    pool = session.served.config
    console.err.print(Text(f"trinity chat · pool {pool.name}: {', '.join(pool.names)}", style="bold"), soft_wrap=True)
    if session.run_id is not None:
        console.note(f"continuing {session.run_id} ({len(session.conversation.exchanges)} exchanges so far)")
    console.note('Ctrl-D or /exit leaves, Ctrl-C stops an answer, """ opens a message of several lines, /help')
    try:
        while True:
            try:
                message = read_message(read)
            except EOFError:
                console.err.print()
                return
            except KeyboardInterrupt:
                console.err.print()
                continue
            if not message.strip():
                continue
            if message.strip().startswith("/"):
                try:
                    console.note(session.command(message).text)
                except LeaveChat:
                    return
                except TrinityError as exc:
                    console.error(exc.message, exc.hint)
                continue
            _answer(session, message, quiet)
    finally:
        save()
        if session.run_id is not None and not quiet:
            console.note(f"saved as {session.run_id}: trinity inspect {session.run_id}; "
                         f'trinity ask -c "..." continues it')


def _ctrl_c_interrupts() -> None:
    """Make Ctrl-C stop an answer even where this process was started with SIGINT ignored or
    blocked (a shell's background job, a test runner): both are inherited across exec, and
    Python then leaves SIGINT as it found it."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _answer(session: Any, message: str, quiet: bool) -> None:
    try:
        with ChatTurns(quiet=quiet) as live:
            result = session.say(message, live)
    except KeyboardInterrupt:
        console.warning("stopped: that answer is not saved (the conversation goes on without it)")
        return
    except TrinityError as exc:
        console.error(exc.message, exc.hint)
        return
    if not quiet:
        count = len(session.conversation.exchanges)
        console.note(f"{result.run_id} · message {count}: {len(result.transcript.turns)} turns, {result.wall_s:.1f}s")
    # A whole answer streamed just above is not written again on the same screen (redirected, it is).
    shown = not quiet and console.out.is_terminal and console.err.is_terminal
    if not (shown and result.answer.strip() == (result.transcript.answer or "").strip()):
        console.out.print(result.answer, markup=False, highlight=False)


def replay_chat(record: dict[str, Any]) -> None:
    """`trinity inspect RUN` of a conversation: each exchange replayed turn by turn as an ask
    run is (terminal.replay_ask), under its number."""
    exchanges = record.get("exchanges") or []
    said = f"{record['id']} · conversation of {len(exchanges)} messages"
    if record.get("continues"):
        said += f" (continues {record['continues']})"
    console.out.print(Text(said, style="bold"))
    if record.get("system"):
        console.out.print(Text("System: ", style="bold").append(str(record["system"])))
    for i, exchange in enumerate(exchanges, 1):
        console.out.rule(Text(f"message {i}", style="bold"))
        terminal.replay_ask({**exchange, "id": f"{record['id']} message {i}"})
