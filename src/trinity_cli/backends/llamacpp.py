"""GGUF models run in process by llama-cpp-python. The only module that imports llama_cpp.

The model loads on first use and stays loaded until `close()`; the pool decides when to
evict it (`max_resident`). One llama.cpp context is not thread-safe, so calls are
serialised with a lock. llama.cpp's own logging is silenced (`verbose=False`).

How prompts are evaluated: in chunks that end at fixed points, keeping only whole chunks of
earlier prompts, so a reply is a function of its prompt and parameters alone
(backends/chunk_schedule.py, which also says what a conversation's calls add and what
`prefill` computes ahead).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trinity_cli.backends import chunk_schedule, confidence, native_check
from trinity_cli.backends.base import Backend
from trinity_cli.backends.gguf_file import MIN_REPLY_TOKENS, GGUFFile, GGUFModel, package_version
from trinity_cli.errors import AssetError, BackendError, ContextOverflow
from trinity_cli.member_config import Weights
from trinity_cli.messages import ChatMessage, Completion, GenParams

if TYPE_CHECKING:  # numpy loads with the model (`load`), not when a pool file names a GGUF member
    import numpy as np


class GreedyGrammarSampler:
    """Greedy decoding under a grammar, choosing exactly the token llama-cpp-python's sampler
    chain (neutral penalties, grammar, greedy) chooses, without checking the whole vocabulary
    against the grammar at every token.

    The chain sets every token the grammar rejects to -inf, then takes the first token of
    highest logit. So when the first token of highest logit over the whole vocabulary is one
    the grammar accepts, it is the chain's choice; only when the grammar rejects it is the
    whole vocabulary checked (the chain's own work). Most tokens thus cost one check instead of
    one per vocabulary entry (about 150,000 for Qwen2.5; what it saves: docs/measurements.md).
    Contract: `sample(ctx, idx)` returns the token and advances the grammar by it, as
    `LlamaSampler.sample` does."""

    def __init__(self, vocab: Any, grammar: Any) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._sampler = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not self._sampler:
            raise BackendError("llama.cpp could not build a grammar from the JSON schema")
        self._n_vocab = int(llama_cpp.llama_vocab_n_tokens(vocab))
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all: np.ndarray | None = None  # the whole vocabulary, made on first need

    def sample(self, ctx: Any, idx: int = -1) -> int:
        import numpy as np

        lib = self._lib
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,))
        token = int(np.argmax(logits))  # the first of the highest, as llama.cpp's greedy sampler
        self._one[0] = lib.llama_token_data(token, float(logits[token]), 0.0)
        lib.llama_sampler_apply(self._sampler, ctypes.byref(lib.llama_token_data_array(self._one, 1, -1, False)))
        if self._one[0].logit == -np.inf:
            token = self._best_accepted(logits)
        lib.llama_sampler_accept(self._sampler, token)
        return token

    def _best_accepted(self, logits: np.ndarray) -> int:
        import numpy as np

        """The first token of highest logit among those the grammar accepts (the chain's choice)."""
        lib = self._lib
        if self._all is None:  # ids and p are set once: the grammar changes only logits
            self._all = np.zeros(self._n_vocab, dtype=np.dtype(
                [("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True))
            self._all["id"] = np.arange(self._n_vocab, dtype=np.int32)
        cands = self._all
        cands["logit"] = logits
        data = ctypes.cast(cands.ctypes.data, ctypes.POINTER(lib.llama_token_data))
        lib.llama_sampler_apply(self._sampler, ctypes.byref(lib.llama_token_data_array(data, self._n_vocab, -1, False)))
        return int(cands["id"][int(np.argmax(cands["logit"]))])

    def __del__(self) -> None:
        if getattr(self, "_sampler", None):
            self._lib.llama_sampler_free(self._sampler)
            self._sampler = None


class LogprobRecorder:
    """A sampler that draws as the sampler it wraps does and notes, for each drawn token, its
    log-probability under the model (log-softmax of the raw logits it was drawn from, before
    temperature, top-p or a grammar), that distribution's entropy and its self-certainty
    (KL(uniform || p) = log-sum-exp - mean logit - log V); end-of-generation tokens
    are left out. It only reads the logits, so the reply is the one the wrapped sampler gives.
    Contract: `sample(ctx, idx)` as `LlamaSampler.sample`."""

    def __init__(self, inner: Any, vocab: Any) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._inner = inner
        self._vocab = vocab
        self._n_vocab = int(llama_cpp.llama_vocab_n_tokens(vocab))
        self.logprobs: list[float] = []
        self.entropies: list[float] = []
        self.certainties: list[float] = []
        self._log_vocab = math.log(self._n_vocab)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        import numpy as np

        lib = self._lib
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,))
        top = float(logits.max())
        shifted = np.exp(logits - top)  # float32, like the logits; one pass over the vocabulary
        total = float(shifted.sum())
        log_total = top + float(np.log(total))
        entropy = log_total - float(np.dot(shifted, logits)) / total
        token = int(self._inner.sample(ctx, idx))
        if not lib.llama_vocab_is_eog(self._vocab, token):
            self.logprobs.append(float(logits[token]) - log_total)
            self.entropies.append(entropy)
            self.certainties.append(log_total - float(logits.mean(dtype=np.float64)) - self._log_vocab)
        return token


def _plain_greedy(settings: dict[str, Any]) -> bool:
    """Whether llama-cpp-python's sampler chain for these settings is grammar then greedy
    alone: temperature 0, no logits processor, penalties that change nothing."""
    return (settings.get("grammar") is not None and settings.get("temp") == 0.0
            and settings.get("logits_processor") is None and settings.get("repeat_penalty", 1.0) == 1.0
            and settings.get("frequency_penalty", 0.0) == 0.0 and settings.get("presence_penalty", 0.0) == 0.0)


SAVED_PROMPTS = 2  # prompts computed ahead and kept aside (`prefill`): a free-form draft's and a turn's


def _formatter(llm: Any) -> Any:
    """The chat formatter llama-cpp-python's `create_chat_completion` formats `llm`'s prompts
    with (found as that method finds its handler; the formatter is what the handler closes
    over), or None where it cannot be found: then nothing is prefilled or bounded."""
    from llama_cpp import llama_chat_format

    handler = (llm.chat_handler or llm._chat_handlers.get(llm.chat_format)
               or llama_chat_format.get_chat_completion_handler(llm.chat_format))
    for cell in getattr(handler, "__closure__", None) or ():
        value = cell.cell_contents
        if isinstance(value, llama_chat_format.Jinja2ChatFormatter) or (
                callable(value) and getattr(value, "__name__", "").startswith("format_")):
            return value
    return None


def _prompter(llm: Any) -> chunk_schedule.Prompter | None:
    """The prompt tokens `create_chat_completion` sends for some messages (as its handler makes
    them), or None where its formatter cannot be found (`_formatter`)."""
    formatter = _formatter(llm)
    if formatter is None:
        return None

    def prompt(messages: Sequence[ChatMessage]) -> list[int]:
        result = formatter(messages=[{"role": m.role, "content": m.content} for m in messages])
        return list(llm.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True))

    return prompt


def _chunked_llama() -> type:
    """llama_cpp.Llama whose `generate` evaluates prompts in chunks that end at fixed points
    and keeps only whole chunks of earlier prompts (module docstring), and whose greedy
    calls under a grammar use `GreedyGrammarSampler`; imported lazily, like llama_cpp itself."""
    from llama_cpp import Llama

    class ChunkedLlama(Llama):  # type: ignore[misc]
        points: list[int] = []  # noqa: RUF012 - replaced, never changed in place: the chunk ends in the KV cache
        saved: list[tuple[list[int], Any]] = []  # noqa: RUF012 - replaced: (points, LlamaState) computed ahead, newest first
        boundaries: list[int] = []  # noqa: RUF012 - replaced: the next call's chunk_schedule.boundaries (set around a call)
        fast_grammar = True  # False: llama-cpp-python's own chain (tests compare the two)
        recorder: LogprobRecorder | None = None  # the last generation's (chat reads it)

        def _init_sampler(self, **settings: Any) -> Any:  # type: ignore[override]  # called with keywords
            if self.fast_grammar and _plain_greedy(settings):
                inner = GreedyGrammarSampler(self._model.vocab, settings["grammar"])
            else:
                inner = super()._init_sampler(**settings)
            self.recorder = LogprobRecorder(inner, self._model.vocab)
            return self.recorder

        def advance(self, tokens: Sequence[int], points: Sequence[int], upto: int,
                    stop: Callable[[], bool] | None = None) -> int:
            """Keep what the KV cache holds of `tokens` in whole chunks (chunk_schedule.kept_prefix), then
            evaluate `tokens` chunk by chunk at `points` through the last point at most
            `upto` (before each chunk, `stop()` may end it); how many tokens it evaluated."""
            def keeps(ids: list[int], chunks: Sequence[int]) -> int:
                shared = len(os.path.commonprefix([ids, list(tokens)]))
                return chunk_schedule.kept_prefix(chunks, points, min(shared, upto))

            keep = keeps(self._input_ids.tolist(), self.points) if self.n_tokens else 0
            for chunks, state in self.saved:  # a prompt computed ahead that keeps more: its KV cache back
                kept = keeps(state.input_ids[: state.n_tokens].tolist(), chunks)
                if kept > keep:
                    self.load_state(state)
                    self.points, keep = list(chunks), kept
            if keep == 0:
                self.reset()
                self._ctx.kv_cache_clear()
            else:
                self.n_tokens = keep
                self._ctx.kv_cache_seq_rm(-1, keep, -1)
            self.points = [p for p in points if p <= keep]
            at = keep
            for point in points:
                if point <= at:
                    continue
                if point > upto or (stop is not None and stop()):
                    break
                self.eval(tokens[at:point])
                self.points = [*self.points, point]
                at = point
            return at - keep

        def generate(self, tokens: Sequence[int], **kwargs: Any) -> Any:  # type: ignore[override]  # called with keywords
            tokens = list(tokens)
            if kwargs.get("reset", True):
                points = chunk_schedule.chunk_points(len(tokens), self.n_batch, self.boundaries)
                # At least the prompt's last token is evaluated by generate itself: its logits
                # pick the first reply token; what is left is at most one chunk.
                self.advance(tokens, points, len(tokens) - 1)
                reply = super().generate(tokens, **kwargs)
                self.points = [p for p in points if p <= len(tokens)]
                return reply
            self.points = []
            return super().generate(tokens, **kwargs)

    return ChunkedLlama


def llama_cpp_version() -> str:
    """The installed llama-cpp-python's version ("none" when it is not installed)."""
    return package_version("llama-cpp-python")


class LlamaCppBackend(GGUFFile, Backend):
    resident = True
    gives_logprobs = True  # LogprobRecorder, on every call
    config_model = GGUFModel
    summary = "a GGUF model run by llama.cpp: in this process, or by llama.cpp's server (runtime: server)"

    @classmethod
    def create(cls, config: Any) -> Backend:
        """`runtime: server` members are served by llama.cpp's server (llamaserver.py)."""
        if config.runtime == "server":
            from trinity_cli.backends.llamaserver import LlamaServerBackend

            return LlamaServerBackend(config)
        return cls(config)

    def __init__(self, config: GGUFModel) -> None:
        super().__init__(config.name, config.n_ctx)
        self.config = config
        self._llm: Any = None
        self._path: Path | None = None
        self._fingerprint: str | None = None
        self._lock = threading.RLock()
        self._wanted = threading.Event()  # a call waits for the lock: a prefill stops at its next chunk

    @property
    def fingerprint(self) -> str:
        """`gguf:<sha256>|<chat format>|ctx<n_ctx>|llama-cpp-python <version>|batch<n_batch>|chunked`.

        Besides the weights and the chat template, the reply depends on the llama.cpp build
        (kernels and sampling change between releases) and, through the batches its tokens
        are evaluated in, on n_batch (not on the threads: gguf_file.py; not on the call
        before it: `chunked`, the module docstring); so a cache filled by another
        llama-cpp-python, with another n_batch, or before prompts were evaluated in fixed
        chunks (replies that depended on the call before) is not reused. Computed without
        loading the model, so a cached reply needs no load."""
        if self._fingerprint is None:
            self._fingerprint = self.file_fingerprint(f"llama-cpp-python {llama_cpp_version()}") + "|chunked"
        return self._fingerprint

    @property
    def loaded(self) -> bool:
        return self._llm is not None

    def load(self) -> Any:
        with self._lock:
            if self._llm is None:
                # Once per llama.cpp build, before it is loaded here: a child process decodes,
                # so a native crash is named, not this process killed (native_check.py).
                native_check.ensure_decodes(child=__name__, fallback=self.path)
                try:
                    llama_class = _chunked_llama()
                except ImportError:
                    raise BackendError(
                        "llama-cpp-python is not installed, so GGUF models cannot run",
                        "pip install llama-cpp-python",
                    ) from None

                try:
                    self._llm = llama_class(
                        model_path=str(self.path),
                        n_ctx=self.config.n_ctx,
                        n_threads=self.threads,
                        n_batch=self.config.n_batch,
                        seed=self.config.seed if self.config.seed is not None else 0,
                        chat_format=self.config.chat_format,
                        verbose=False,
                    )
                except ValueError as exc:
                    raise AssetError(
                        f"model {self.name!r}: llama.cpp could not load {self.path} ({exc})",
                        "the file is truncated or not a GGUF model: re-download it",
                    ) from None
            return self._llm

    def count_tokens(self, text: str) -> int:
        llm = self.load()
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def supports_json_schema(self) -> bool:
        """llama-cpp-python turns a JSON schema into a grammar that decoding follows."""
        return True

    def schedule_tag(self, messages: Sequence[ChatMessage], params: GenParams) -> str | None:
        """chunk_schedule.schedule_tag: a conversation's calls' chunks are not the fingerprint's alone."""
        return chunk_schedule.schedule_tag(messages, params)

    def prefill(self, messages: Sequence[ChatMessage], stop: Callable[[], bool] | None = None) -> int:
        """Evaluate now the chunks a later call whose messages begin as `messages` do will keep
        (module docstring): for a conversation's prompt, everything before its last message;
        otherwise everything up to chunk_schedule.cut_point of the last message's text as given, where a call
        split before its new message (`split_before`) ends a chunk. Stops at the next chunk when
        a call arrives (`_complete`) or the model is closed; how many tokens it evaluated."""
        def stopped() -> bool:
            return self._wanted.is_set() or (stop is not None and stop())

        if not messages or stopped():
            return 0
        with self._lock:
            llm = self._llm
            if stopped() or llm is None:  # a model let go is not loaded again for this
                return 0
            prompt = _prompter(llm)
            if prompt is None:
                return 0
            tokens = prompt(messages)
            boundary = chunk_schedule.boundary(prompt, messages, tokens)
            upto = boundary if boundary is not None else chunk_schedule.cut_point(prompt, messages, tokens)
            points = chunk_schedule.chunk_points(len(tokens), llm.n_batch, [upto])
            evaluated = int(llm.advance(tokens, points, upto, stopped))
            # Kept aside, so computing another prompt ahead (or a call) does not lose it; an older
            # state of the same prompt, which this one extends, goes.
            ids = llm._input_ids.tolist()
            older = [(c, st) for c, st in llm.saved
                     if st.input_ids[: st.n_tokens].tolist() != ids[: st.n_tokens]]
            llm.saved = [(list(llm.points), llm.save_state()), *older][:SAVED_PROMPTS]
            return evaluated

    def chat(self, messages: Sequence[ChatMessage], params: GenParams) -> Completion:
        return self._complete(messages, params, None)

    def chat_streaming(self, messages: Sequence[ChatMessage], params: GenParams,
                       on_text: Callable[[str], None]) -> Completion:
        """`chat`, decoding the same tokens, with each piece handed to `on_text` as it is
        decoded (llama-cpp-python's `stream=True`)."""
        return self._complete(messages, params, on_text)

    def _complete(self, messages: Sequence[ChatMessage], params: GenParams,
                  on_text: Callable[[str], None] | None) -> Completion:
        self._wanted.set()  # a prefill running stops at its next chunk
        with self._lock:
            self._wanted.clear()
            llm = self.load()
            prompt_tokens = self.prompt_tokens(messages)
            room = self.n_ctx - prompt_tokens
            if room < MIN_REPLY_TOKENS:
                raise ContextOverflow(
                    f"model {self.name!r}: the prompt needs about {prompt_tokens} tokens, "
                    f"its context holds {self.n_ctx}",
                    "shorten the question, or raise n_ctx for this model in the pool file",
                )
            start = time.perf_counter()
            llm.recorder = None
            llm.boundaries = chunk_schedule.boundaries(_prompter(llm), messages, params)
            try:
                out = llm.create_chat_completion(
                    messages=[{"role": m.role, "content": m.content} for m in messages],
                    max_tokens=min(params.max_tokens, room),
                    temperature=params.temperature,
                    top_p=params.top_p,
                    seed=params.seed,
                    stop=list(params.stop) or None,
                    response_format=({"type": "json_object", "schema": json.loads(params.json_schema)}
                                     if params.json_schema is not None else None),
                    stream=on_text is not None,
                )
                if on_text is not None:
                    out = _gathered(out, on_text)
            except ValueError as exc:
                if "context window" in str(exc) or "exceed" in str(exc):
                    raise ContextOverflow(
                        f"model {self.name!r}: {exc}",
                        "shorten the question, or raise n_ctx for this model in the pool file",
                    ) from None
                raise BackendError(f"model {self.name!r}: llama.cpp failed: {exc}") from None
            finally:
                llm.boundaries = []
            latency = time.perf_counter() - start
            choice = out["choices"][0]
            usage = out.get("usage") or {}
            recorder = llm.recorder
            text = (choice["message"].get("content") or "").strip()
            p_tok = int(usage.get("prompt_tokens", prompt_tokens))
            counted = (len(recorder.logprobs) if recorder is not None
                       else len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)))
            c_tok = int(usage.get("completion_tokens", counted))
            price = self.config.price
            return Completion(
                text=text,
                prompt_tokens=p_tok,
                completion_tokens=c_tok,
                latency_s=latency,
                finish_reason=choice.get("finish_reason") or "stop",
                cost_usd=price.cost(p_tok, c_tok) if price else None,
                logprob_stats=(confidence.summarize(recorder.logprobs, recorder.entropies, recorder.certainties)
                               if recorder is not None else None),
            )

    def close(self) -> None:
        self._wanted.set()  # a prefill running stops at its next chunk
        with self._lock:
            self._wanted.clear()
            if self._llm is not None:
                try:
                    self._llm.close()
                except AttributeError:  # older llama-cpp-python: freed on garbage collection
                    pass
                self._llm = None


def _gathered(chunks: Iterable[dict[str, Any]], on_text: Callable[[str], None]) -> dict[str, Any]:
    """A streamed chat completion's chunks, each content piece handed to `on_text`, gathered
    into the shape of a whole one (no usage: the caller counts the tokens)."""
    pieces: list[str] = []
    finish = None
    for chunk in chunks:
        choice = chunk["choices"][0]
        piece = choice.get("delta", {}).get("content")
        if piece:
            pieces.append(piece)
            on_text(piece)
        finish = choice.get("finish_reason") or finish
    return {"choices": [{"message": {"content": "".join(pieces)}, "finish_reason": finish}]}


def decode_probe(argv: Sequence[str] | None = None) -> int:
    """native_check.py's child (`python -m trinity_cli.backends.llamacpp FILE`): decode two
    tokens of `native_check.PROBE_PROMPT` from the GGUF file argv[0] through this backend (its
    own check skipped: `ensure_decodes` sets TRINITY_SKIP_NATIVE_CHECK). A crash is the answer
    sought, so it leaves no core file behind."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass
    backend = LlamaCppBackend(GGUFModel(kind="gguf", name="native-check", weights=Weights(path=args[0]), n_ctx=512))
    try:
        backend.chat([ChatMessage(role="user", content=native_check.PROBE_PROMPT)], GenParams(max_tokens=2))
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(decode_probe())
