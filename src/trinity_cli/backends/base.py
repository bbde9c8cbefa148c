"""The one seam every pool model goes through.

A backend answers `chat(messages, params) -> Completion`. It declares a `fingerprint`
(what makes its replies what they are: a weights file hash or an API model id, never a
key) used in cache keys, its context size, and a token counter used to fit transcripts.
It declares the schema of its member's entry in the pool file (`config_model`, a subclass of
`MemberBase`), and may declare what it can do (the flags and hooks below, each with a
default): the pool asks, never guesses. A kind is registered by name (registry.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from trinity_cli.member_config import MemberBase
from trinity_cli.messages import ChatMessage, Completion, GenParams

__all__ = ["MESSAGE_OVERHEAD_TOKENS", "Backend", "MemberBase"]

# Per-message overhead of chat templates (role markers, separators), in tokens, used when
# estimating whether a prompt fits a context window.
MESSAGE_OVERHEAD_TOKENS = 8


class Backend(ABC):
    """One pool model. Subclasses load lazily: constructing one must be cheap."""

    #: True when the model is loaded in this process and holds memory until `close()`.
    resident: bool = False
    #: True when every reply carries `Completion.logprob_stats` (backends/confidence.py).
    gives_logprobs: bool = False
    #: The member's entry in the pool file: the common fields (`MemberBase`) and the kind's own.
    config_model: ClassVar[type[MemberBase]] = MemberBase
    #: The kind in one line (`trinity pools`); empty: the first sentence of the class's docstring.
    summary: ClassVar[str] = ""

    def __init__(self, name: str, n_ctx: int) -> None:
        self.name = name
        self.n_ctx = n_ctx

    @classmethod
    def create(cls, config: Any) -> Backend:
        """The backend of one member, from its checked entry (`config_model`); constructing it
        must be cheap (nothing loads). By default `cls(config)`."""
        factory: Any = cls  # every backend class is made from its member's config (the contract above)
        backend: Backend = factory(config)
        return backend

    def check_files(self) -> None:  # noqa: B027 - optional hook: most backends need no file
        """Locate (and assemble or verify) the local files a call will need, now, so a missing
        file is reported before any work starts (`Pool.check_assets`). By default none."""

    def supports_json_schema(self) -> bool:
        """Whether `chat` can constrain its reply to `GenParams.json_schema` (a grammar, or the
        server's structured output); a backend that cannot ignores the schema, and callers
        read the reply as free text."""
        return False

    @property
    @abstractmethod
    def fingerprint(self) -> str:
        """Identity of the model for cache keys: changes whenever replies could change."""

    @abstractmethod
    def chat(self, messages: Sequence[ChatMessage], params: GenParams) -> Completion:
        """Answer the conversation. Raises `BackendError` subclasses on failure."""

    def chat_streaming(self, messages: Sequence[ChatMessage], params: GenParams,
                       on_text: Callable[[str], None]) -> Completion:
        """`chat`, with the reply's text handed to `on_text` piece by piece as it is written
        (the pieces joined are the reply's text, before `chat`'s final strip). By default the
        whole reply once, when `chat` returns; a backend that can stream overrides this."""
        completion = self.chat(messages, params)
        on_text(completion.text)
        return completion

    def schedule_tag(self, messages: Sequence[ChatMessage], params: GenParams) -> str | None:
        """A word for the rollout key of a call with `messages` and `params` when the backend
        computes such a call otherwise than its `fingerprint` alone says (llamacpp.py: with
        `params.split_last`, a conversation's prompt is evaluated in chunks that end where its
        last message starts, and where `params.split_before` starts); None (the default): as it
        says. Computed without loading anything."""
        return None

    def prefill(self, messages: Sequence[ChatMessage], stop: Callable[[], bool] | None = None) -> int:
        """Compute ahead, where the backend can, what a later call whose messages begin as
        `messages` do (all but the last as given, the last begun with what its content holds)
        will share with them, so that call starts sooner; how many tokens that evaluated.
        Never changes a reply. A call that arrives while it runs stops it, as `stop()`
        turning true does. Optional: by default nothing (0)."""
        return 0

    def deterministic(self, params: GenParams) -> bool:
        """Whether a call with `params` gives the same reply every time, so it may be cached.

        Here: greedy decoding (temperature 0), or sampling from a fixed seed, which an
        in-process model honours exactly. Backends whose seed is only a hint override this."""
        return params.temperature == 0.0 or params.seed is not None

    def count_tokens(self, text: str) -> int:
        """Token count of `text`; the default is a conservative character estimate."""
        return len(text) // 3 + 1

    def prompt_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self.count_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages)

    def fits_roughly(self, messages: Sequence[ChatMessage], max_tokens: int) -> bool:
        """True when a cheap upper bound (two characters a token) shows the prompt fits;
        False means "count exactly", which may need the model loaded."""
        rough = sum(len(m.content) // 2 + 1 + MESSAGE_OVERHEAD_TOKENS for m in messages)
        return rough + max_tokens <= self.n_ctx

    def fits(self, messages: Sequence[ChatMessage], max_tokens: int) -> bool:
        """Whether the prompt leaves room for at least `max_tokens` of reply. Callers go
        through `Pool.fits`, which loads in-process models only through its LRU."""
        if self.fits_roughly(messages, max_tokens):
            return True
        return self.prompt_tokens(messages) + max_tokens <= self.n_ctx

    def load(self) -> object:
        """Load now what the first call would load (a resident backend's weights; the pool's
        `preload`, which goes through its LRU). Optional: most backends hold nothing."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook: most backends hold nothing
        """Free whatever the backend holds (model weights, connections)."""
