"""Where trinity keeps things, and atomic file writes (the one implementation: every
file or directory that must appear whole is written through `atomic_output`).

Layout under the home dir (`TRINITY_HOME`, default: the platform's user data dir):

    cache/rollouts/     diskcache of pool replies (see runs/store.py for the key format)
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
import errno
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trinity_cli.errors import DamagedState, DiskFull

# Write failures that mean "no room": a full disk or quota, or the file-size limit (ulimit -f).
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def home() -> Path:
    env = os.environ.get("TRINITY_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("trinity-cli", appauthor=False))


def _directory(path: Path) -> Path:
    """`path`, created with its parents; DamagedState when it, or a parent, is a file or a
    link to nothing (mkdir would raise FileExistsError on a broken link)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise DamagedState(
            f"{path} cannot be a directory: it or a folder above it is a file or a broken link",
            "remove it (trinity recreates it), or set TRINITY_HOME to another folder",
        ) from None
    return path


REPLAY_ONLY_ENV = "TRINITY_REPLAY_ONLY"


def replay_only() -> bool:
    """Whether model calls must come from the caches (TRINITY_REPLAY_ONLY set to 1, true,
    yes or on; `trinity --replay-only` sets it): a call they do not hold ends the command
    (errors.NotRecorded) instead of loading a model."""
    return os.environ.get(REPLAY_ONLY_ENV, "").strip().lower() in ("1", "true", "yes", "on")


FILL_LOGPROBS_ENV = "TRINITY_FILL_LOGPROBS"


def fill_logprobs() -> bool:
    """Whether a cached reply without log-probabilities is made again to fill them in
    (TRINITY_FILL_LOGPROBS set to 1, true, yes or on): pool/pool.py, "Filling
    log-probabilities"."""
    return os.environ.get(FILL_LOGPROBS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def cache_dir(name: str) -> Path:
    return _directory(home() / "cache" / name)


def runs_dir() -> Path:
    return _directory(home() / "runs")


def user_heads_dir() -> Path:
    return _directory(home() / "heads")


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


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size if path.exists() else 0


def _megabytes(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB" if n >= 1 << 20 else f"{max(n, 1) / 1024:.0f} KB"


def no_space(path: Path, exc: OSError, needed: int | None = None) -> DiskFull:
    """The one-line error for a write to `path` that failed with `exc` for lack of space
    (`is_no_space`), naming the path and the space it needs (`needed` bytes, if known)."""
    why = "the file-size limit (ulimit -f) was reached" if exc.errno == errno.EFBIG else "no space left on the disk"
    need = f"; it needs about {_megabytes(needed)}" if needed else ""
    return DiskFull(f"cannot write {path}: {why}{need}",
                    f"free space under {path.parent} (or raise the limit) and run the command again")


def is_no_space(exc: BaseException) -> bool:
    """Whether `exc` is a write that failed for lack of space (disk, quota, file-size limit)."""
    return isinstance(exc, OSError) and exc.errno in _NO_SPACE


@contextlib.contextmanager
def atomic_output(path: Path, directory: bool = False, size: int | None = None) -> Iterator[Path]:
    """A temporary path beside `path` to write into; when the block ends without an error it
    is moved onto `path` in one rename, so readers see the old file (or directory) or the
    new one, never half of it. A file is flushed to disk before the rename; a directory
    replaces any directory already at `path`. On error the temporary path is removed and
    `path` is left as it was; a write that fails for lack of space raises `DiskFull`
    naming `path` and the space needed (`size` bytes when the caller knows it, else at
    least what was written before the failure)."""
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
    except BaseException as exc:
        written = _size(tmp) if is_no_space(exc) else 0
        if directory:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and is_no_space(exc):
            raise no_space(path, exc, size or written) from None
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the new one, never half."""
    with atomic_output(path, size=len(data)) as tmp:
        tmp.write_bytes(data)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode())


def set_aside(path: Path) -> Path:
    """Move a damaged file or directory out of the way, to `<name>.damaged-<timestamp>`
    beside it (a number added if that exists), and return where it went. Nothing is deleted:
    the user can look at it or remove it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 2
    while target.exists():
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
        n += 1
    os.replace(path, target)
    return target


_this_home = home  # `shown_path`'s parameter `home` hides the function

# Folders of a home that an imported run's recorded paths may lie in (`shown_path`).
HOME_FOLDERS = ("heads", "recipe", "matrices", "runs")
HOME = "TRINITY_HOME"  # how a shown path names the home it lies in


def shown_path(path: str, home: Path | None = None, keep_existing: bool = False) -> str:
    """A path a run recorded, as `inspect` shows it. Under this TRINITY_HOME: relative to it
    ("TRINITY_HOME/heads/x"). Else, when it names a folder of a recording or of a home (an
    imported run's paths are those of the machine that made it): from that folder on
    ("recordings/local/heads/x", "TRINITY_HOME/recipe/local-recipe/search", the home that
    made the run). Anything else (relative paths, files elsewhere) as recorded.
    `keep_existing`: a path that exists here is shown as recorded (the terminal, where it
    is something to type)."""
    p = Path(path)
    if not p.is_absolute() or (keep_existing and p.exists()):
        return path
    here = home or _this_home()
    for root in (here, here.resolve()):
        if p.is_relative_to(root):
            return "/".join((HOME, *p.relative_to(root).parts))
    parts = p.parts
    for i, part in enumerate(parts[:-1]):
        if part == "recordings":
            return "/".join(parts[i:])
        if part in HOME_FOLDERS:
            return "/".join((HOME, *parts[i:]))
    return path
