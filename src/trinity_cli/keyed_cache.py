"""A disk cache with content keys that damage never stops: the one way trinity opens the
SQLite-backed caches under `cache/` (rollouts, hidden states, sandbox runs).

Keys: `content_key(tag, payload)` = tag + sha256 of the payload's canonical JSON (sorted
keys, no whitespace, UTF-8): every cache builds its keys this way, so a key changes exactly
when something in its payload does. Values: whatever diskcache stores (JSON-able dicts,
bytes).

Damage: a cache is checked when it is opened (its `cache.db` must be an SQLite file whose
header agrees with its size: a file overwritten at its start or truncated fails this), and
every read and write catches SQLite's "not a database" / "malformed" errors where they
happen. A damaged cache directory is moved aside to `<dir>.damaged-<timestamp>` (paths.set_aside),
one warning says which file, why, and that the calls it held will be made again, and the
command goes on with a fresh, empty cache. Losing a cache costs time, never correctness.
A write that fails for lack of space raises `DiskFull` naming the cache file.

Journal: a command that writes a run (bench, evolve) opens `journal_to(run_dir / "calls.log")`
for its duration; every key a journaled cache (rollouts, hidden states) answers or stores
meanwhile is appended to that file, one key per line, each key once. That file is how a
recording is made from one run (recordings/). It is append-only and flushed per line, so
a killed run keeps the keys of every call that finished; a torn last line is skipped by
`read_journal`. One journal per process: calls made by Ray actors in other processes are
not in it (export the whole cache for those).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trinity_cli import paths

log = logging.getLogger("trinity_cli.pool.rollout_cache")

DB_FILE = "cache.db"  # diskcache's SQLite file in the cache directory
_HEADER = b"SQLite format 3\x00"


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the text every content key hashes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_key(tag: str, payload: Any) -> str:
    """`tag` + the sha256 hex digest of `payload`'s canonical JSON."""
    return tag + hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def db_damage(db: Path) -> str | None:
    """Why the SQLite file `db` is damaged, or None when it looks whole (or does not exist
    yet). Reads its 100-byte header only: the magic string, and the page size times the
    page count it records against the file's size."""
    try:
        size = db.stat().st_size
        with open(db, "rb") as fh:
            header = fh.read(100)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read: {exc.strerror}"
    if size == 0:
        return None  # created, never written: SQLite initialises it
    if len(header) < 100 or not header.startswith(_HEADER):
        return "it is not an SQLite database (its header is overwritten or missing)"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if pages and size < page_size * pages:
        return f"it is truncated ({size:,} bytes of the {page_size * pages:,} its header records)"
    return None


FRESH_S = 5.0  # a database file changed this recently may be one another process is creating
FRESH_WAIT_S = 0.5


def _fresh(db: Path) -> bool:
    try:
        return time.time() - db.stat().st_mtime < FRESH_S
    except OSError:
        return False


def _damage_error(exc: sqlite3.DatabaseError) -> bool:
    """Whether an error from SQLite means the file itself is damaged (not busy, not full)."""
    text = str(exc).lower()
    return any(word in text for word in ("not a database", "malformed", "corrupt"))


def _full(exc: sqlite3.DatabaseError, directory: Path) -> OSError | None:
    """The space error behind an SQLite write error, or None when it is not one. SQLite
    says SQLITE_FULL for a full disk, but only "disk I/O error" when a write is refused
    outright (a file-size limit): that counts when a limit is set or the disk is nearly full."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name == "SQLITE_FULL" or "full" in str(exc).lower():
        return OSError(errno.ENOSPC, str(exc))
    if not (name.startswith("SQLITE_IOERR") or "disk i/o error" in str(exc).lower()):
        return None
    try:
        import resource

        if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY:
            return OSError(errno.EFBIG, str(exc))
    except ImportError:  # no rlimits on this OS
        pass
    if shutil.disk_usage(directory).free < 64 << 20:
        return OSError(errno.ENOSPC, str(exc))
    return None


class Journal:
    """The keys a command's journaled caches read or wrote, appended to `path` (module
    docstring). Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen = set(read_journal(path))
        self._lock = threading.Lock()
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())

    def add(self, key: str) -> None:
        with self._lock:
            if key in self._seen or self._fh.closed:
                return
            self._seen.add(key)
            self._fh.write(key + "\n")
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()


_journal: Journal | None = None


def read_journal(path: Path) -> list[str]:
    """The keys in a journal file, in the order first written (a torn last line skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    return [line for line in lines[:-1] if ":" in line]  # the part after the last newline is torn


@contextmanager
def journal_to(path: Path) -> Iterator[Journal]:
    """Journal the keys of this process's journaled caches to `path` during the block."""
    global _journal
    journal = Journal(path)
    previous, _journal = _journal, journal
    try:
        yield journal
    finally:
        _journal = previous
        journal.close()


def _note(key: str) -> None:
    journal = _journal
    if journal is not None:
        journal.add(key)


class KeyedCache:
    """A diskcache under `directory`, opened and used so that damage sets it aside (module
    docstring). Thread-safe as diskcache is; `what` names it in warnings ("rollout cache");
    `journaled`: its hits and writes go to the command's journal."""

    def __init__(self, directory: Path, what: str, size_limit: int, journaled: bool = False) -> None:
        self.directory = directory
        self.what = what
        self.size_limit = size_limit
        self.journaled = journaled
        self._lock = threading.Lock()
        self._cache: Any = None
        self._open()

    def _open(self) -> None:
        why = db_damage(self.directory / DB_FILE)
        if why is not None and _fresh(self.directory / DB_FILE):
            # Another process may be writing a new database's first pages right now: a file
            # that is still damaged a moment later is damaged.
            time.sleep(FRESH_WAIT_S)
            why = db_damage(self.directory / DB_FILE)
        if why is None:
            try:
                self._cache = self._diskcache()
                return
            except sqlite3.DatabaseError as exc:
                if not _damage_error(exc):
                    raise
                why = str(exc)
        self._set_aside(why)
        self._cache = self._diskcache()

    def _diskcache(self) -> Any:
        """diskcache.Cache on the directory (opening one writes its tables and settings)."""
        import diskcache

        try:
            return diskcache.Cache(str(self.directory), size_limit=self.size_limit)
        except sqlite3.DatabaseError as exc:
            full = _full(exc, self.directory)
            if full is not None:
                raise paths.no_space(self.directory / DB_FILE, full) from None
            raise

    def _set_aside(self, why: str) -> None:
        if self._cache is not None:
            try:
                self._cache.close()
            except sqlite3.Error:
                pass
        moved = paths.set_aside(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        log.warning("the %s %s is damaged (%s): set aside as %s; its calls will be made again",
                    self.what, self.directory / DB_FILE, why, moved.name)

    def _recover(self, exc: sqlite3.DatabaseError) -> None:
        """A read or write hit damage: set the cache aside and open a fresh one."""
        with self._lock:
            self._set_aside(str(exc))
            self._cache = self._diskcache()

    def get(self, key: str) -> Any:
        """The value stored under `key`, or None (also when the cache turned out damaged)."""
        try:
            value = self._cache.get(key)
            if value is not None and self.journaled:
                _note(key)
            return value
        except sqlite3.DatabaseError as exc:
            if not _damage_error(exc):
                raise
            self._recover(exc)
            return None

    def set(self, key: str, value: Any) -> None:
        """Store `value` under `key` (diskcache: one SQLite transaction, whole or not at all)."""
        try:
            self._cache.set(key, value)
            if self.journaled:
                _note(key)
        except sqlite3.DatabaseError as exc:
            full = _full(exc, self.directory)
            if full is not None:
                raise paths.no_space(self.directory / DB_FILE, full) from None
            if not _damage_error(exc):
                raise
            self._recover(exc)
            self._cache.set(key, value)
        except OSError as exc:  # a large value diskcache writes as a file of its own
            if paths.is_no_space(exc):
                raise paths.no_space(self.directory, exc) from None
            raise

    def __len__(self) -> int:
        return len(self._cache)

    def keys(self) -> list[str]:
        """Every key held, sorted."""
        return sorted(str(k) for k in self._cache.iterkeys())

    def close(self) -> None:
        self._cache.close()
