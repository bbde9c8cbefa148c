"""The chunk schedule of an in-process llama.cpp prompt (backends/llamacpp.py): where the
batches a prompt is evaluated in end, which of them a later prompt may keep, and the points a
conversation's calls add. Pure functions of the prompt's tokens; the backend gives them its
tokenizer and chat formatter as a `Prompter` (messages -> the prompt tokens it sends).

Prefix reuse in whole chunks. llama-cpp-python keeps the KV cache of the previous call and
evaluates only what follows the longest prefix the next prompt shares with it; but the
logits of a token depend on the batch it was evaluated in, so a reply would depend on the
call before it. Here a prompt is always evaluated in chunks that end at fixed points
(`chunk_points`: every `n_batch` tokens from 0), and a call keeps from the KV cache only
whole chunks of earlier *prompts* that end at the same points in its own prompt (never
generated tokens, which were evaluated one at a time). Every token is then computed in the
same batch as in a call from an empty cache, so a reply is a function of its prompt and
parameters alone: the same in any call order, at any `--parallel`, in any play order
(tests/test_llamacpp_integration.py; what it costs and saves: docs/measurements.md, "Item
order and replies that do not depend on the call before").

A conversation's prompt (one with an assistant message before its last message, called with
`GenParams.split_last`: every call of an episode that continues a conversation) has one more
point: where its last message starts (`boundary`), the chunks before it every `n_batch` from 0
and those after every `n_batch` from it. (Without `split_last`, such a prompt, the conductor's
step asked again after its reply, keeps the old chunks and key.) So everything before a
conversation's next message can be computed before that message is typed
(`LlamaCppBackend.prefill`, which `trinity chat` calls after each answer) and the message's own
call evaluates that message alone. A call given `GenParams.split_before` as well (the new
message's text, which a turn's prompt holds inside its last message, after the earlier
conversation and the instructions: turns/prompts.py) has one more point, `cut_point` of its
last message cut where that text last starts: a prefill of the prompt cut there computes
everything before it. Such calls' rollout keys hold `schedule_tag`'s words (TURN_CHUNKS,
TASK_CHUNKS), so a reply computed with other chunks is never served for them; every other
prompt keeps the chunks, and the keys, it always had.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence

from trinity_cli.messages import ChatMessage, GenParams

Prompter = Callable[[Sequence[ChatMessage]], list[int]]  # messages -> the prompt tokens sent for them

TURN_CHUNKS = "turn-chunks"  # schedule_tag of a conversation's prompt (module docstring)
TASK_CHUNKS = "task-chunks"  # schedule_tag of a prompt also chunked where its new message starts
# What may follow a message's text cut where the new message goes, tried to find the tokens
# that stay the same whatever follows (`cut_point`): a word, a space, a line, a digit, punctuation.
FOLLOWERS = ("zq", " zq", "\nzq", "\n\n", "1", "(", "'", "-", ".")


def chunk_points(length: int, n_batch: int, boundaries: Iterable[int] = ()) -> list[int]:
    """Where the chunks a prompt of `length` tokens is evaluated in end, those up to `length`:
    every `n_batch` tokens from 0; with `boundaries` (those with 0 < boundary < length), every
    `n_batch` from 0 up to the first boundary, the boundary itself, then every `n_batch` from
    it up to the next, and so on. The tokens after the last point form the prompt's last chunk."""
    points: list[int] = []
    start = 0
    for boundary in sorted({b for b in boundaries if 0 < b < length}):
        points += [*range(start + n_batch, boundary, n_batch), boundary]
        start = boundary
    return [*points, *range(start + n_batch, length + 1, n_batch)]


def kept_prefix(previous: Sequence[int], current: Sequence[int], limit: int) -> int:
    """How many evaluated tokens a prompt chunked at `current` may keep from a KV cache whose
    prompt was chunked at `previous`: the last point of the run both lists share from their
    start, at most `limit` (the tokens both prompts share, less the prompt's last)."""
    keep = 0
    for a, b in zip(previous, current, strict=False):
        if a != b or a > limit:
            break
        keep = a
    return keep


def is_conversation(messages: Sequence[ChatMessage]) -> bool:
    return any(m.role == "assistant" for m in messages[:-1])


def boundary(prompt: Prompter, messages: Sequence[ChatMessage], full: list[int] | None = None) -> int | None:
    """Where a conversation's last message starts in its prompt tokens: the tokens its prompt
    shares with the prompt of the messages before it (which ends with the reply's opening
    instead); None for a prompt that is not a conversation's. `full`: its prompt tokens, when made already."""
    if not is_conversation(messages):
        return None
    full = full if full is not None else prompt(messages)
    shared = len(os.path.commonprefix([full, prompt(messages[:-1])]))
    return shared if 0 < shared < len(full) else None


def cut_point(prompt: Prompter, messages: Sequence[ChatMessage], full: list[int] | None = None) -> int:
    """Where the text of `messages`' last message, as given, ends in their prompt tokens: the
    tokens their prompt shares with the prompt of that text followed by each of `FOLLOWERS`
    (its last tokens may merge with what follows it). `full`: their prompt tokens, when made
    already."""
    full = full if full is not None else prompt(messages)
    last = messages[-1]
    return min(len(os.path.commonprefix([full, prompt([*messages[:-1], ChatMessage(last.role, last.content + more)])]))
               for more in FOLLOWERS)


def split_at(messages: Sequence[ChatMessage], params: GenParams) -> int:
    """Where `params.split_before` last starts in the last message's text when the call is split
    there (module docstring), else 0."""
    if not (params.split_last and params.split_before and messages):
        return 0
    return max(messages[-1].content.rfind(params.split_before), 0)


def boundaries(prompt: Prompter | None, messages: Sequence[ChatMessage], params: GenParams) -> list[int]:
    """The points a call of `messages` with `params` is chunked at besides every `n_batch`
    (module docstring): where a conversation's last message starts, and where its new message
    starts (`split_before`'s `cut_point`, when it lies after the first and within the tokens
    the cut prompt shares with the whole)."""
    if not params.split_last or prompt is None:
        return []
    full = prompt(messages)
    points = [b] if (b := boundary(prompt, messages, full)) is not None else []
    at = split_at(messages, params)
    if at:
        last = messages[-1]
        cut = [*messages[:-1], ChatMessage(last.role, last.content[:at])]
        tokens = prompt(cut)
        point = cut_point(prompt, cut, tokens)
        if max(points, default=0) < point <= len(os.path.commonprefix([full, tokens])):
            points.append(point)
    return points


def schedule_tag(messages: Sequence[ChatMessage], params: GenParams) -> str | None:
    """TURN_CHUNKS for a conversation's prompt called with `split_last`, TASK_CHUNKS for a call
    split where its new message starts, both joined by "+" (module docstring); else None."""
    tags = [TURN_CHUNKS] if params.split_last and is_conversation(messages) else []
    if split_at(messages, params):
        tags.append(TASK_CHUNKS)
    return "+".join(tags) or None
