"""GGUF models served with continuous batching by llama.cpp's own server, which trinity starts
and stops itself (`runtime: server` on a gguf member). The only module that imports xllamacpp.

xllamacpp (a prebuilt wheel on PyPI: `pip install xllamacpp`, or `pip install
trinity-cli[server]`) embeds llama.cpp's C++ server in this process: `xllamacpp.Server`
loads the model, runs llama.cpp's scheduler on its own threads and answers
`handle_chat_completions` with the GIL released, so calls from several episodes at once
(`--parallel`) are decoded together in one batch, up to `slots` sequences; more wait in the
server's queue. It also listens on a loopback port (llama.cpp's HTTP API), used here only to
count tokens (`POST /tokenize`).

Contracts:
* One server per loaded file: members with the same weights and load settings (pool/pool.py's
  `load_key`, which includes `runtime` and `slots`) share this backend, so they share the
  server and its slots. It is resident: `max_resident` counts it, and `close()` (eviction,
  or the pool closing) stops the server and frees the model.
* Every slot holds `n_ctx` tokens (the server is given `n_ctx * slots` and no unified KV
  cache), so a prompt that fits in-process fits here.
* The fingerprint is
  `gguf:<sha256>|<chat format>|ctx<n_ctx>|xllamacpp <version>|batch<n_batch>|slots<k>|server`:
  like the in-process one (llamacpp.py), it names what changes replies without loading
  the model (the llama.cpp build, through xllamacpp's version, the batch size and the
  slots decoded together); `|server` because llama.cpp's server applies the chat
  template with its own engine, and batched decoding is not bit-identical to decoding one
  sequence at a time, so replies are cached apart from in-process ones. Within one
  server, a reply may depend on which other sequences shared its batch (floating-point
  reduction order); the rollout cache then makes every later run read the first reply.
* Speculative decoding (`speculative:` in the pool file, off unless given): a draft model
  or n-gram drafting, set on the server's parameters; its settings (the draft by its
  sha256) are in the fingerprint, since verifying drafted tokens in a batch can change a
  greedy reply.
* Errors: a file llama.cpp cannot load -> `AssetError`; a prompt over the context ->
  `ContextOverflow`; any other server error -> `BackendError`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from trinity_cli import assets
from trinity_cli.backends.base import Backend
from trinity_cli.backends.gguf_file import MIN_REPLY_TOKENS, GGUFFile, GGUFModel, package_version
from trinity_cli.errors import AssetError, BackendError, ContextOverflow
from trinity_cli.messages import ChatMessage, Completion, GenParams


def xllamacpp_version() -> str:
    """The installed xllamacpp's version ("none" when it is not installed)."""
    return package_version("xllamacpp")


class LlamaServerBackend(GGUFFile, Backend):
    resident = True

    def __init__(self, config: GGUFModel) -> None:
        super().__init__(config.name, config.n_ctx)
        self.config = config
        self._server: Any = None
        self._http: httpx.Client | None = None
        self._path: Path | None = None
        self._fingerprint: str | None = None
        self._lock = threading.RLock()  # guards starting and stopping, never a call

    @property
    def fingerprint(self) -> str:
        """See the module docstring; computed without starting the server."""
        if self._fingerprint is None:
            self._fingerprint = (
                self.file_fingerprint(f"xllamacpp {xllamacpp_version()}") + f"|slots{self.config.slots}|server"
                + self._speculative_fingerprint()
            )
        return self._fingerprint

    def _speculative_fingerprint(self) -> str:
        """`|spec:<settings>` with speculative decoding (a draft named by its sha256): batch
        verification of drafted tokens can change a greedy reply, so such replies are
        cached apart; "" without."""
        spec = self.config.speculative
        if spec is None:
            return ""
        source = (f"draft={assets.fingerprint(assets.resolve(spec.draft))[:16]}" if spec.draft is not None
                  else f"ngram={spec.ngram.size_n},{spec.ngram.size_m},{spec.ngram.min_hits}" if spec.ngram else "")
        return f"|spec:{source},n{spec.n_min}-{spec.n_max},p{spec.p_min}"

    def _speculate(self, xllamacpp: Any, params: Any) -> None:
        """Set llama.cpp's speculative decoding from the member's `speculative:` block."""
        spec = self.config.speculative
        if spec is None:
            return
        kinds = xllamacpp.common_speculative_type
        params.speculative.draft.n_max = spec.n_max
        params.speculative.draft.n_min = spec.n_min
        params.speculative.draft.p_min = spec.p_min
        if spec.draft is not None:
            params.speculative.types = [kinds.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
            params.speculative.draft.mparams.path = str(assets.resolve(spec.draft))
            params.speculative.draft.cpuparams.n_threads = self.threads
            params.speculative.draft.cpuparams_batch.n_threads = self.threads
        elif spec.ngram is not None:
            params.speculative.types = [kinds.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
            params.speculative.ngram_simple.size_n = spec.ngram.size_n
            params.speculative.ngram_simple.size_m = spec.ngram.size_m
            params.speculative.ngram_simple.min_hits = spec.ngram.min_hits

    @property
    def loaded(self) -> bool:
        return self._server is not None

    @property
    def address(self) -> str:
        """The server's HTTP root (http://127.0.0.1:PORT), starting it if needed."""
        return str(self.load().listening_address).rstrip("/")

    def load(self) -> Any:
        """Start the server (loading the model) once; later calls return it."""
        with self._lock:
            if self._server is None:
                try:
                    import xllamacpp  # type: ignore[import-untyped]
                except ImportError:
                    raise BackendError(
                        f"model {self.name!r} has runtime: server, which needs xllamacpp",
                        "pip install xllamacpp (or set runtime: inprocess in the pool file)",
                    ) from None
                params = xllamacpp.CommonParams()
                params.model.path = str(self.path)
                params.n_parallel = self.config.slots
                params.n_ctx = self.config.n_ctx * self.config.slots
                if hasattr(params, "kv_unified"):
                    params.kv_unified = False  # each slot its own n_ctx
                params.n_batch = self.config.n_batch
                params.cpuparams.n_threads = self.threads
                params.cpuparams_batch.n_threads = self.threads
                params.sampling.seed = self.config.seed if self.config.seed is not None else 0
                params.use_jinja = True
                if self.config.chat_format:
                    params.chat_template = self.config.chat_format
                params.warmup = False
                self._speculate(xllamacpp, params)
                try:
                    self._server = xllamacpp.Server(params)
                except Exception as exc:  # a C++ runtime_error: load or bind failed
                    raise AssetError(
                        f"model {self.name!r}: llama.cpp's server could not start on {self.path} ({exc})",
                        "the file is truncated or not a GGUF model, or too many slots for memory: "
                        "re-download it or lower slots",
                    ) from None
            return self._server

    def count_tokens(self, text: str) -> int:
        address = self.address
        with self._lock:
            if self._http is None:
                self._http = httpx.Client(timeout=60.0)
            client = self._http
        try:
            response = client.post(f"{address}/tokenize", json={"content": text, "add_special": False})
            tokens = response.json()["tokens"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            raise BackendError(f"model {self.name!r}: llama.cpp's server could not count tokens") from None
        return len(tokens)

    def chat(self, messages: Sequence[ChatMessage], params: GenParams) -> Completion:
        server = self.load()
        prompt_tokens = self.prompt_tokens(messages)
        room = self.n_ctx - prompt_tokens
        if room < MIN_REPLY_TOKENS:
            raise ContextOverflow(
                f"model {self.name!r}: the prompt needs about {prompt_tokens} tokens, its context holds {self.n_ctx}",
                "shorten the question, or raise n_ctx for this model in the pool file",
            )
        request: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": min(params.max_tokens, room),
            "temperature": params.temperature,
            "top_p": params.top_p,
            "cache_prompt": True,
        }
        if params.seed is not None:
            request["seed"] = params.seed
        if params.stop:
            request["stop"] = list(params.stop)
        start = time.perf_counter()
        out = server.handle_chat_completions(request)  # releases the GIL; batched with other calls
        latency = time.perf_counter() - start
        choices = out.get("choices") if isinstance(out, dict) else None
        if not choices:
            error = out.get("error", out) if isinstance(out, dict) else out
            message = str(error.get("message", error) if isinstance(error, dict) else error)[:200]
            if "context" in message.lower() or "exceed" in message.lower():
                raise ContextOverflow(f"model {self.name!r}: {message}",
                                      "shorten the question, or raise n_ctx for this model in the pool file")
            raise BackendError(f"model {self.name!r}: llama.cpp's server failed: {message}")
        choice = choices[0]
        usage = out.get("usage") or {}
        p_tok = int(usage.get("prompt_tokens", prompt_tokens))
        c_tok = int(usage.get("completion_tokens", 0))
        price = self.config.price
        return Completion(
            text=((choice.get("message") or {}).get("content") or "").strip(),
            prompt_tokens=p_tok,
            completion_tokens=c_tok,
            latency_s=latency,
            finish_reason=choice.get("finish_reason") or "stop",
            cost_usd=price.cost(p_tok, c_tok) if price else None,
        )

    def close(self) -> None:
        """Stop the server and free the model (xllamacpp stops it when the object goes)."""
        with self._lock:
            if self._http is not None:
                self._http.close()
                self._http = None
            self._server = None
