"""A conversation kept as one run: what `trinity chat` and `trinity ask -c` / `--conversation`
write and continue.

Each message is answered as `trinity ask` answers a question (ask/answer.py: `ready`, then
`play_ready`), after the conversation so far as chat messages (conversation.py: `messages`,
then `split`, as a served request's `messages` are), and each exchange is saved as it
completes: the run's record is written again, whole and atomically, with the new exchange
appended, so a chat killed at any moment keeps every answer it gave, and an answer stopped
before its end (Ctrl-C) leaves the run as it was. The run directory exists from the first
answered message (a conversation that answered nothing leaves none).

Run record (`runs/run-N/run.json`, kind "chat"):
    {"kind": "chat", "title": the first message's first line, "created", "system": the system
     prompt or null, "pool": the first exchange's pool, "exchanges": [each the record an ask run
     of that message has (ask/answer.py), without "kind" and "title"], "wall_s": the exchanges'
     seconds together, "continues": the ask run a conversation was started from (`ask -c` after
     a plain `ask`: its exchange is the first), absent otherwise}
The keys of the model calls of every exchange go to the run's calls.log, as an ask run's do.

Continuing (`latest`): the latest conversation is the newest run of kind "chat" or "ask"; a
plain ask run is continued by a new conversation that opens with its exchange.

A message's kind: its own wording's when a kind's cues claim it (answer_kinds `claimed`), or
`/kind`/`--kind` when given. A message whose wording claims no kind of its own follows the
exchange before it, said by `KindFollowed` (`follow_up_kind`): a request about a whole answer
("Make it shorter.", "Now say it in French.") gets a whole answer, one about code code, a
question after a short answer ("What about 17?", "And in Fahrenheit?") a short answer; a
non-question after a short answer, and a first message, get what `ask` gives a request no cue
claims: a whole answer (when unsure, the answer that loses nothing).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trinity_cli import conversation
from trinity_cli.answer_kinds import answer_kind, claimed
from trinity_cli.ask import AskOptions, AskResult
from trinity_cli.ask.answer import build, kind_default, play_ready, question_kind, ready
from trinity_cli.errors import NotFound
from trinity_cli.events import KindFollowed, ProgressFn, RunAllocated, quiet
from trinity_cli.keyed_cache import journal_to
from trinity_cli.messages import ChatMessage, Role
from trinity_cli.policies.drafts import draw_order
from trinity_cli.policies.kinds import HeadEngine
from trinity_cli.pool.pool import Pool
from trinity_cli.runs.store import JOURNAL, RunStore
from trinity_cli.turns import prompts

KIND = "chat"


@dataclass
class Conversation:
    """A conversation: its run directory (None until its first exchange is saved), its system
    prompt and its exchanges' records (module docstring)."""

    system: str | None = None
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    run_dir: Path | None = None
    created: float = field(default_factory=time.time)
    continues: str | None = None

    @property
    def run_id(self) -> str | None:
        return None if self.run_dir is None else self.run_dir.name

    def history(self) -> list[conversation.Exchange]:
        """The exchanges so far, each its message and the answer given."""
        return [conversation.Exchange(e["question"], e["answer"]) for e in self.exchanges]

    def record(self) -> dict[str, Any]:
        first = self.exchanges[0]
        return {"kind": KIND, "title": first["question"].splitlines()[0][:100], "created": self.created,
                "system": self.system, "pool": first["pool"], "exchanges": self.exchanges,
                "wall_s": sum(float(e["wall_s"]) for e in self.exchanges),
                **({"continues": self.continues} if self.continues else {})}


def _exchange(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("kind", "title", "id", "created", "status", "via")}


def from_record(run_id: str, record: dict[str, Any], store: RunStore) -> Conversation:
    """The conversation run `run_id` holds (kind "chat"), or a new one opening with the exchange
    of the ask run `run_id` (module docstring); NotFound for a run of another kind."""
    if record.get("kind") == KIND:
        return Conversation(record.get("system"), list(record["exchanges"]), store.path(run_id),
                            float(record.get("created", time.time())), record.get("continues"))
    if record.get("kind") == "ask":
        context = (record.get("transcript") or {}).get("context") or []
        system = next((m["content"] for m in context if m.get("role") == "system"), None)
        return Conversation(system, [_exchange(record)], continues=str(record.get("id", run_id)))
    raise NotFound(f"{run_id} is a {record.get('kind')} run, not a conversation",
                   "continue a chat or ask run: trinity inspect lists them")


def latest(store: RunStore) -> str:
    """The id of the newest chat or ask run (module docstring); NotFound when there is none."""
    for summary in reversed(store.list()):
        if summary.kind in (KIND, "ask") and summary.status == "done":
            return summary.id
    raise NotFound("no conversation to continue: no chat or ask run yet",
                   'start one: trinity chat, or trinity ask "QUESTION"')


def open_conversation(run_id: str | None, store: RunStore, system: str | None = None) -> Conversation:
    """The conversation of run `run_id` ("latest": the newest, `latest`), or a new one with
    `system` as its system prompt (None); `system` given for an existing conversation replaces
    its prompt from the next message on."""
    if run_id is None:
        return Conversation(system)
    found = latest(store) if run_id == "latest" else run_id
    conv = from_record(found, store.load(found), store)
    if system is not None:
        conv.system = system
    return conv


def follow_up_kind(question: str, earlier: Sequence[dict[str, Any]]) -> tuple[str | None, bool]:
    """The kind a message of a conversation is answered as when none is named (None: the short
    answer), and whether it follows the exchange before it (module docstring)."""
    own, cued = claimed(question)
    if cued or not earlier:
        return own, False
    before = earlier[-1].get("answer_kind")
    if before is None and not question.rstrip().endswith("?"):
        return own, False  # no question after a short answer: the whole answer, as ask gives it
    return before, True


def message_options(conv: Conversation, question: str, options: AskOptions, emit: ProgressFn) -> AskOptions:
    """`options` for `question` as `conv`'s next message: the kind named, else
    `follow_up_kind`'s ("short" for a short answer), `KindFollowed` sent when the kind came
    from the answer before it."""
    if options.kind is not None:
        return options
    kind, followed = follow_up_kind(question, conv.exchanges)
    if followed:
        emit(KindFollowed(kind or "short"))
    return replace(options, kind=kind or "short")


def answer(conv: Conversation, question: str, options: AskOptions, pool: Pool, engine: HeadEngine | None,
           store: RunStore, progress: ProgressFn | None = None) -> AskResult:
    """Answer `question` as the next message of `conv` (its kind: `message_options`) with the
    built `pool` and `engine` (left open) and save the exchange (module docstring). The run's lock is held while it is
    answered: a second process continuing the same conversation at once is refused
    (RunBusy). Nothing is saved when the answer fails or is interrupted."""
    emit = progress or quiet
    if conv.run_dir is not None:
        with store.lock(conv.run_dir):
            fresh = store.load(conv.run_dir.name)  # what another process appended since
            conv.exchanges = list(fresh.get("exchanges", conv.exchanges))
            return _answer(conv, question, options, pool, engine, store, emit)
    return _answer(conv, question, options, pool, engine, store, emit)


def _answer(conv: Conversation, question: str, options: AskOptions, pool: Pool, engine: HeadEngine | None,
            store: RunStore, emit: ProgressFn) -> AskResult:
    options = message_options(conv, question, options, emit)
    task, context = conversation.split(conversation.messages(conv.system, conv.history(), question))
    options = replace(options, system=None)  # the conversation's, in `context`
    prepared = ready(task, options, pool, engine, context, emit)
    if conv.run_dir is None:
        with store.new_run() as run_dir, journal_to(run_dir / JOURNAL):
            emit(RunAllocated(run_dir.name))
            record = _exchange(play_ready(prepared, pool, engine, emit))
            _append(conv, record, run_dir, store)
        conv.run_dir = run_dir
    else:
        with journal_to(conv.run_dir / JOURNAL):
            emit(RunAllocated(conv.run_dir.name))
            record = _exchange(play_ready(prepared, pool, engine, emit))
        _append(conv, record, conv.run_dir, store)
    return AskResult.of_record(conv.run_dir.name, record)


def next_calls(conv: Conversation, options: AskOptions, pool: Pool) -> list[tuple[str, list[ChatMessage]]]:
    """The first calls `conv`'s next message may make, begun as far as they can be before it is
    typed, for `Pool.prefill` (`trinity chat` computes them while the person types): a
    free-form message's first draft, by its drafts' first member (policies/drafts.py
    `draw_order`), the conversation as chat messages before it; and a short answer's first
    turn, a Worker's (the reader's first call: its first member, reason when the pool has
    one, asked alone), whose prompt holds the earlier conversation and the instructions before
    the task (turns/prompts.py). The kind `options` names, else the kind the last exchange was
    answered as, first. None before the first exchange. A wrong guess costs nothing but the
    computing: a call never depends on what was computed ahead of it."""
    if not conv.exchanges:
        return []
    context = conversation.messages(conv.system, conv.history(), "")[:-1]
    drafter = draw_order(pool)[0]
    draft = [(drafter, prompts.build_messages(Role.WORKER, "", [], context, style=pool.style(drafter),
                                              kind=answer_kind("freeform")))]
    worker = next((name for name in pool.names if pool.style(name) == "reason"), pool.names[0])
    asked = prompts.build_messages(Role.WORKER, _TASK_HERE, [], context, style=pool.style(worker), alone=True)
    turn = [(worker, [*asked[:-1], ChatMessage(asked[-1].role, asked[-1].content.split(_TASK_HERE)[0])])]
    kind = options.kind or conv.exchanges[-1].get("answer_kind")
    return draft + turn if kind == "freeform" else turn + draft


_TASK_HERE = "\x00"  # where next_calls' turn prompt is cut: the new message goes there


def _append(conv: Conversation, record: dict[str, Any], run_dir: Path, store: RunStore) -> None:
    """`record` appended to `conv` and the run's record written again whole (atomically); on
    failure `conv` is as it was."""
    conv.exchanges.append(record)
    try:
        store.save(run_dir, conv.record())
    except BaseException:
        conv.exchanges.pop()
        raise


def continue_conversation(run_id: str, question: str, options: AskOptions, progress: ProgressFn | None = None,
                          store: RunStore | None = None) -> AskResult:
    """`trinity ask -c` / `--conversation RUN`: answer `question` as the next message of the
    conversation `run_id` ("latest": `latest`) in this process, the pool built for it and
    closed after, and save the exchange (`answer`). `options.system` given replaces the
    conversation's system prompt."""
    store = store or RunStore()
    emit = progress or quiet
    conv = open_conversation(run_id, store, options.system)
    options = message_options(conv, question, options, emit)
    options = kind_default(options, answer_kind(question_kind(question, options)))
    pool, engine = build(options)
    try:
        return answer(conv, question, options, pool, engine, store, emit)
    finally:
        pool.close()
        if engine is not None:
            engine.close()
