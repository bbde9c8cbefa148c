"""How soon `trinity chat` starts answering: seconds from Enter to the first streamed text of
each message's answer, and to the answer's end (the prompt back), driving `trinity chat`
through a pseudo-terminal as a person types, against issue 88's target (the second and later
messages' first text within 1 s of Enter, warm models).

    python scripts/perf/chat_latency.py [--pool local] [--message TEXT ...] [--pause S] [--json]
                                        [-- CHAT OPTIONS]

The chat runs in a fresh TRINITY_HOME (this machine's converted backbones and model files
linked in: helpers.link_home), so no reply comes from the rollout cache. The default messages
are three questions, each followed by one that needs it ("Now say it in French.", ...).
"First text" is the first reply text the chat streams (ask's live view writes it indented
by four spaces on stderr), read off the terminal with its ANSI codes taken out; "answer" is
when the prompt comes back. `--pause S`: each later message is sent S seconds after the
prompt came back, as a person reads the answer and types the next message (the chat computes
the next prompt ahead in that time: backends/llamacpp.py `prefill`); 0 (the default): at once.
Prints one line per message and a summary; exits 1 when a later message's first text took
over 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from helpers import link_home

TARGET_S = 1.0
MESSAGES = [
    "What is the capital of France?",
    "Now say it in French.",
    "Write a two-line poem about the sea.",
    "Make it shorter.",
    "Is 13 a prime number?",
    "What about 17?",
]
ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]|\x1b\][^\x07]*\x07")
STREAMED = re.compile(r" {4}\S")  # nothing else the chat writes holds four spaces
PROMPT = re.compile(r"(?:^|\n)>>> $")


class Chat:
    """`trinity chat` on a pseudo-terminal."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execvpe(args[0], args, env)
        self.text = ""

    def read(self, until: re.Pattern[str], start: int, timeout: float) -> float:
        """Read until `until` matches what came after position `start`; when it did (seconds
        since the epoch of time.monotonic)."""
        end = time.monotonic() + timeout
        while not until.search(self.text[start:]):
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {until.pattern!r} within {timeout:.0f} s:\n{self.text[-1500:]}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.05))
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    raise EOFError(f"trinity chat ended:\n{self.text[-1500:]}")
                self.text += ANSI.sub("", data.decode(errors="replace")).replace("\r", "")
        return time.monotonic()

    def send(self, line: str) -> None:
        os.write(self.fd, (line + "\r").encode())

    def close(self) -> None:
        try:
            self.send("/exit")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    return
                time.sleep(0.1)
            os.kill(self.pid, signal.SIGTERM)
            os.waitpid(self.pid, 0)
        except OSError:
            pass


def measure(pool: str | None, messages: list[str], extra: list[str], timeout: float,
            pause: float = 0.0) -> list[dict[str, float | str]]:
    """Per message: {"message", "first_s", "answer_s"} (module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        link_home(Path(tmp))
        env = {**os.environ, "TRINITY_HOME": tmp, "TERM": os.environ.get("TERM", "xterm"), "COLUMNS": "120"}
        args = [sys.executable, "-m", "trinity_cli", "chat", *(["--pool", pool] if pool else []), *extra]
        chat = Chat(args, env)
        try:
            chat.read(PROMPT, 0, timeout)  # the pool and the head's backbone are loaded
            rows: list[dict[str, float | str]] = []
            for i, message in enumerate(messages):
                if i:
                    time.sleep(pause)
                start = len(chat.text)
                chat.send(message)
                sent = time.monotonic()
                chat.read(re.compile(re.escape(message)), start, timeout)
                echoed = chat.text.index(message, start) + len(message)
                first = chat.read(STREAMED, echoed, timeout)
                done = chat.read(PROMPT, echoed, timeout)
                rows.append({"message": message, "first_s": round(first - sent, 3), "answer_s": round(done - sent, 3)})
            return rows
        finally:
            chat.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", default=None, help="pool file or name (default: trinity's default pool)")
    parser.add_argument("--message", action="append", help="a message to send (repeatable; default: six)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for any one step")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds between an answer and the next message, as a person reads and types")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("extra", nargs="*", help="options for trinity chat, after --")
    args = parser.parse_args()
    rows = measure(args.pool, args.message or MESSAGES, args.extra, args.timeout, args.pause)
    later = [float(r["first_s"]) for r in rows[1:]]
    summary = {"later_first_median_s": statistics.median(later) if later else None,
               "later_first_max_s": max(later) if later else None, "target_s": TARGET_S}
    if args.json:
        print(json.dumps({"rows": rows, **summary}))
    else:
        for row in rows:
            print(f"{row['first_s']:7.2f} s first text  {row['answer_s']:7.2f} s answer  {row['message']}")
        if later:
            print(f"later messages' first text: median {summary['later_first_median_s']:.2f} s, most "
                  f"{summary['later_first_max_s']:.2f} s (target: within {TARGET_S:.0f} s)")
    return 0 if not later or max(later) <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
