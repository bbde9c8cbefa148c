"""What both backbone engines share (the transformers `Backbone`, coordinator/backbone.py, and
`NumpyBackbone`, coordinator/numpy_backbone.py): incremental encoding's kept prefixes
(`PrefixReuse`), and `Unsupported`, the numpy engine's refusal of a model, on which
`backbone.load` takes transformers instead.

Incremental encoding: an episode's coordinator texts grow by appending turns (one line
each, before the closing `Next:` line), so each is the previous one plus a line. A text's
token ids are read in blocks, one per line (a block starts at each token that begins a
line; the last block, never shorter than two tokens, holds the penultimate token, whose
state is the feature), each block a forward pass over the KV cache of the blocks before it.
The backbone keeps the KV cache of the last `PREFIX_ENTRIES` texts, and a new text whose
first blocks are the same tokens under the same weights reads them from there: only its
new lines are encoded (a decision in an episode: the new turn and `Next:`). Because a text
is always split the same way, its feature is the same bit for bit whether its prefix came
from a kept cache or was encoded now, so results do not depend on the order episodes run
in; it agrees with a single full pass to float rounding (tests/test_coordinator.py).
`weights_state` names the current weights (coordinator/svf.py sets it when it changes a
matrix): a kept prefix is reused only under the same state.
"""

from __future__ import annotations

from typing import Any


class Unsupported(Exception):
    """A model the numpy engine does not compute (coordinator/numpy_backbone.py): `load` gives
    the transformers `Backbone` instead."""


# KV caches kept for prefix reuse (one per recent text; about 46 KB per token each for
# SmolLM2-135M in float32).
PREFIX_ENTRIES = 4
# A kept text that a new one continues but for at most this many tokens (its closing
# "Next:") is the same episode's previous decision: its cache is taken over, not copied.
TAIL = 8


def line_blocks(text: str, offsets: list[tuple[int, int]]) -> list[int]:
    """Where the blocks of a text's tokens start (module docstring), then the token count:
    at every token that begins a line (its first character follows a newline); the last
    block merged into the one before when it would hold a single token."""
    n = len(offsets)
    starts = [0]
    for i in range(1, n):
        begin = offsets[i][0]
        if begin > 0 and text[begin - 1] == "\n" and begin != offsets[i - 1][0]:
            starts.append(i)
    if len(starts) > 1 and n - starts[-1] < 2:
        starts.pop()
    return [*starts, n]


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PrefixReuse:
    """The kept prefixes of incremental encoding (module docstring), for either engine: a
    subclass says how to make, measure, copy and crop its KV cache."""

    max_tokens: int

    def __init__(self) -> None:
        self.incremental = True  # keep and reuse prefixes' KV caches (module docstring)
        self.weights_state = ""  # names the current weights: "" the loaded ones (svf.py sets it)
        self._prefixes: list[tuple[str, list[int], Any]] = []  # (state, token ids, KV cache), newest last
        self.reused_tokens = 0  # counters: tokens read from a kept prefix / encoded
        self.encoded_tokens = 0

    def _new_cache(self) -> Any:
        raise NotImplementedError

    def _cache_length(self, cache: Any) -> int:
        raise NotImplementedError

    def _copy(self, cache: Any) -> Any:
        raise NotImplementedError

    def _crop(self, cache: Any, length: int) -> Any:
        raise NotImplementedError

    def _take_prefix(self, text: str, ids: list[int], offsets: list[tuple[int, int]]) -> tuple[Any, int, list[int]]:
        """(the KV cache to read `ids` after, how many of them it holds, the blocks' starts):
        the kept prefix sharing the most whole blocks with `ids`, else an empty cache."""
        starts = line_blocks(text, offsets)
        cache: Any = self._new_cache()
        done = 0
        if self.incremental:
            best, shared = None, 0
            for i, (state, kept_ids, _) in enumerate(self._prefixes):
                common = _common_prefix(kept_ids, ids) if state == self.weights_state else 0
                if common > shared:
                    best, shared = i, common
            reusable = max((b for b in starts[:-1] if b <= shared), default=0)  # whole blocks only
            if best is not None and reusable > 0:
                kept = self._prefixes[best]
                if shared >= len(kept[1]) - TAIL:  # the same episode, a turn on: take its cache over
                    cache = self._prefixes.pop(best)[2]
                else:  # another episode sharing the instruction and task: leave it its cache
                    cache = self._copy(kept[2])
                if self._cache_length(cache) > reusable:
                    cache = self._crop(cache, reusable)
                done = reusable
        return cache, done, starts

    def _keep(self, ids: list[int], cache: Any, done: int) -> None:
        """Count an encoded text's tokens and keep its cache for the texts after it."""
        self.reused_tokens += done
        self.encoded_tokens += len(ids) - done
        if self.incremental:
            self._prefixes.append((self.weights_state, ids, cache))
            del self._prefixes[:-PREFIX_ENTRIES]
