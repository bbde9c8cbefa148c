"""A conversation as chat messages: the one model `trinity serve`, `trinity chat` and `trinity ask
-c` share.

A conversation is an optional system prompt, the exchanges so far (each a user's message and
the answer given to it) and the new message. `messages` lays it out as OpenAI-style chat
messages; `split` turns any such list (a served request's `messages`, or the list `messages`
made) into what an episode is asked: the task (the last user message) and its context (every
message before it). Whatever asked, the same list gives the same task and context, so the
same episode.

When a context is too long for a member, `shortenings` says what is left out: the oldest
messages first, system messages never, and never so that an assistant's message comes first
(chat templates that want user and assistant in turn would refuse it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from trinity_cli.messages import ChatMessage

# The most characters a conversation holds, all messages together: a served request's `messages`
# (serve/protocol.py), text piped to `trinity ask` with its question (ask/__init__.py).
MAX_CHARS = 200_000


@dataclass(frozen=True)
class Exchange:
    """One exchange of a conversation: the user's message and the answer given (the answer
    alone, as `trinity ask` prints it and a served completion's message holds it)."""

    question: str
    answer: str


def messages(system: str | None, exchanges: Sequence[Exchange], question: str) -> list[ChatMessage]:
    """The conversation as chat messages: the system prompt (when given), each exchange as a
    user and an assistant message, the new `question` last."""
    out = [ChatMessage("system", system)] if system else []
    for exchange in exchanges:
        out += [ChatMessage("user", exchange.question), ChatMessage("assistant", exchange.answer)]
    return [*out, ChatMessage("user", question)]


def split(conversation: Sequence[ChatMessage]) -> tuple[str, list[ChatMessage]]:
    """(task, context): the last message, which must be the user's and not blank (stripped), and
    every message before it. ValueError, saying what is wrong, otherwise."""
    if not any(m.role == "user" for m in conversation):
        raise ValueError("no user message: the last user message is the task")
    if conversation[-1].role != "user":
        raise ValueError("the last message must be the user's: it is the task, earlier messages are context")
    task = conversation[-1].content.strip()
    if not task:
        raise ValueError("the last user message is empty")
    return task, list(conversation[:-1])


def shortenings(context: Sequence[ChatMessage]) -> Iterator[tuple[list[ChatMessage], int]]:
    """Ever shorter forms of `context`, longest (all of it) first, each with how many messages
    it leaves out: the oldest non-system message goes first, and any assistant message left at
    the front of what remains goes with it; system messages stay. The last form holds the
    system messages alone (a shortened form puts them first, as they came)."""
    yield list(context), 0
    system = [m for m in context if m.role == "system"]
    rest = [m for m in context if m.role != "system"]
    start = 0
    while start < len(rest):
        start += 1
        while start < len(rest) and rest[start].role == "assistant":
            start += 1
        yield [*system, *rest[start:]], start
