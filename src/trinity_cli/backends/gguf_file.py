"""What the two GGUF backends (in process: llamacpp.py; llama.cpp's server: llamaserver.py)
share: the `gguf` member's schema in the pool file (`GGUFModel`), and about its weights file
where it is, how many threads compute with it, and the part of the cache fingerprint that
names the file and how it is loaded. Light on purpose: reading a pool file imports this
module, never llama.cpp."""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from trinity_cli import assets
from trinity_cli.member_config import MemberBase, Strict, Weights

# Smallest reply we still ask for when a prompt nearly fills the context.
MIN_REPLY_TOKENS = 16


class NgramDraft(Strict):
    """llama.cpp's n-gram drafting: tokens proposed from n-grams already in the context."""

    size_n: int = Field(default=12, ge=1)  # the n-gram length looked up
    size_m: int = Field(default=48, ge=1)  # the draft length proposed from a hit
    min_hits: int = Field(default=1, ge=1)


class Speculative(Strict):
    """Speculative decoding for a `runtime: server` member: exactly one of `draft` (a small
    model proposing tokens, its own `weights:` block) or `ngram`. Off unless given: whether
    either pays depends on the machine (docs/measurements.md has the 2-core figures)."""

    draft: Weights | None = None
    ngram: NgramDraft | None = None
    n_max: int = Field(default=16, ge=1)  # most tokens drafted at a time
    n_min: int = Field(default=0, ge=0)
    p_min: float = Field(default=0.75, ge=0, le=1)  # a draft model's tokens below this probability end the draft

    @model_validator(mode="after")
    def _one_source(self) -> Speculative:
        if (self.draft is None) == (self.ngram is None):
            raise ValueError("give exactly one of draft (a weights block) or ngram")
        return self


class GGUFModel(MemberBase):
    """A `gguf` member. `runtime: inprocess` (the default) runs the file with llama-cpp-python
    in this process, one call at a time; `runtime: server` serves it with llama.cpp's own
    server (xllamacpp), started and stopped by the pool, decoding up to `slots` calls together
    (backends/llamaserver.py), optionally with `speculative` decoding."""

    kind: Literal["gguf"]
    runs_locally: ClassVar[bool] = True
    weights: Weights
    n_ctx: int = Field(default=4096, ge=256)
    n_threads: int | None = Field(default=None, ge=1)
    n_batch: int = Field(default=32, ge=1)
    chat_format: str | None = None
    runtime: Literal["inprocess", "server"] = "inprocess"
    slots: int = Field(default=4, ge=1, le=64)
    speculative: Speculative | None = None

    @model_validator(mode="before")
    @classmethod
    def _server_batch(cls, data: Any) -> Any:
        """n_batch defaults to 32 in process (prompts are evaluated in chunks of n_batch at
        fixed positions and only whole chunks are reused: backends/llamacpp.py; why 32:
        docs/measurements.md), and to llama.cpp's own 512 for `runtime: server`, which this
        sets."""
        if isinstance(data, dict) and data.get("runtime") == "server" and data.get("n_batch") is None:
            data = {**data, "n_batch": 512}
        return data

    def load_key(self) -> str:
        """The weights and every setting llama.cpp is loaded with (`runtime: server` members
        sharing a file share one server and its slots)."""
        fields = self.model_dump(include={"weights", "n_ctx", "n_threads", "n_batch", "chat_format", "seed",
                                          "runtime", "slots"})
        return "gguf:" + json.dumps(fields, sort_keys=True, default=str)

    def sized_to(self, cpus: int) -> GGUFModel:
        """Computing with `cpus` threads when the pool file sets no `n_threads`."""
        return self.model_copy(update={"n_threads": cpus}) if self.n_threads is None else self

    @model_validator(mode="after")
    def _speculative_needs_server(self) -> GGUFModel:
        if self.speculative is not None and self.runtime != "server":
            raise ValueError("speculative decoding needs runtime: server (llama.cpp's server drafts, "
                             "llama-cpp-python in process does not)")
        return self


def package_version(distribution: str) -> str:
    """An installed distribution's version, read from its metadata (no import, so no shared
    library load); "none" when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "none"


class GGUFFile:
    """Mixin for backends of a `GGUFModel`: `self.config` must be set by the subclass."""

    config: GGUFModel
    _path: Path | None = None

    def check_files(self) -> None:
        """Locate (assemble, verify) the weights file now (Backend.check_files)."""
        assets.check_gguf(self.path)

    @property
    def path(self) -> Path:
        """The weights file, located (assembled, verified) on first use."""
        if self._path is None:
            path = assets.resolve(self.config.weights)
            assets.check_gguf(path)
            self._path = path
        return self._path

    @property
    def threads(self) -> int:
        """The threads llama.cpp computes with: `n_threads`, or every core by default."""
        return self.config.n_threads or os.cpu_count() or 1

    def file_fingerprint(self, runtime: str) -> str:
        """`gguf:<sha256>|<chat format>|ctx<n_ctx>|<runtime>|batch<n_batch>`, where `runtime`
        names the llama.cpp build ("llama-cpp-python 0.3.36"); computed without loading the
        model (from the sha256 the pool file declares, when it declares one: no file is assembled
        or hashed for a cached reply). Not the threads: llama.cpp splits its work between threads by output rows, so
        each value is summed by one thread in the same order whatever their number (checked on
        the default pool's model: docs/measurements.md), and Ray actors, which compute with fewer threads than a
        serial run, share its replies."""
        fmt = self.config.chat_format or "template"
        digest = assets.declared_sha256(self.config.weights) or assets.fingerprint(self.path)
        return f"gguf:{digest}|{fmt}|ctx{self.config.n_ctx}|{runtime}|batch{self.config.n_batch}"
