"""Where trinity keeps things, and atomic file writes (the one implementation: every
file or directory that must appear whole is written through `atomic_output`).

Layout under the home dir (`TRINITY_HOME`, default: the platform's user data dir):

    cache/rollouts/     diskcache of pool replies (see store.py for the key format)
    cache/hidden/       diskcache of coordinator hidden states
    cache/models/       model files assembled from split packages
    cache/backbones/    coordinator backbones converted once from GGUF
    runs/run-N/         one directory per ask / evolve / bench run
    heads/NAME/         heads written by `trinity evolve`

The pools and heads that ship with trinity live inside the package (`_data/`) when
installed from a wheel, and at the repository root in a source checkout.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def home() -> Path:
    env = os.environ.get("TRINITY_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("trinity-cli", appauthor=False))


def cache_dir(name: str) -> Path:
    path = home() / "cache" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir() -> Path:
    path = home() / "runs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def user_heads_dir() -> Path:
    path = home() / "heads"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _bundled(name: str) -> Path:
    """`pools` or `heads` as shipped: inside the wheel, or at the source checkout's root."""
    packaged = Path(__file__).parent / "_data" / name
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / name


def bundled_pools_dir() -> Path:
    return _bundled("pools")


def bundled_heads_dir() -> Path:
    return _bundled("heads")


@contextlib.contextmanager
def atomic_output(path: Path, directory: bool = False) -> Iterator[Path]:
    """A temporary path beside `path` to write into; when the block ends without an error it
    is moved onto `path` in one rename, so readers see the old file (or directory) or the
    new one, never half of it. A file is flushed to disk before the rename; a directory
    replaces any directory already at `path`. On error the temporary path is removed and
    `path` is left as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{path.name}."
    if directory:
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=prefix, suffix=".tmp"))
    else:
        # Keep the suffix so writers that infer a format from it (matplotlib's savefig) still can.
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp" + path.suffix)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        if directory:
            shutil.rmtree(path, ignore_errors=True)
        else:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if directory:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never half."""
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode())
