"""What the two GGUF backends (in process: llamacpp.py; llama.cpp's server: llamaserver.py)
share about their weights file: where it is, how many threads compute with it, and the
part of the cache fingerprint that names the file and how it is loaded."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path

from trinity_cli import assets
from trinity_cli.pool_config import GGUFModel

# Smallest reply we still ask for when a prompt nearly fills the context.
MIN_REPLY_TOKENS = 16


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
