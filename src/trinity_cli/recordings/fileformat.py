"""The recording file: cache entries with their requests, compressed, append-only.

File (`calls.jsonl.gz` in a recording folder): one or more gzip members (RFC 1952, each
written with mtime 0 and no file name, so the same entries give the same bytes), each
holding UTF-8 JSON lines:

    {"format": "trinity-recording/1", "entries": N}           first line of each member
    {"cache": "rollouts" | "hidden" | "sandbox", "key": K, "request": R, "value": V, "sum": S}   N lines

  rollouts  K = "r2:" + sha256(canonical JSON of R) (pool/rollout_cache.py: R holds the
            backend fingerprint, the messages and every generation parameter);
            V = the reply (Completion fields: text, prompt_tokens, completion_tokens,
            latency_s, finish_reason, cost_usd)
  hidden    K = "h2:" + sha256(canonical JSON of R) (coordinator/policy.py: R holds the
            backbone fingerprint, dtype, coordinator version, SVF and the transcript text);
            V = {"float32": base64 of the feature's little-endian float32 bytes}
  sandbox   K = "s1:" + sha256(canonical JSON of R) (sandbox/recorded.py: R holds the program,
            its limits, whether it ran isolated and the Python version);
            V = the run's result (SandboxResult fields)
  S = the first 16 hex digits of sha256(canonical JSON of {"cache", "key", "request", "value"}).

Lines within a member are sorted by key. Appending writes one new member holding only the
keys the file does not hold yet, and the entries that fill a held one in (`fills`: the same
reply with an output it lacked, such as `logprob_stats`; a later entry of a key that fills
the earlier one is the one read), so earlier bytes never change (git stores the growth, not a
new file) and exporting the same calls to an empty folder gives the same bytes. Reading
checks each entry: a key that is not the hash of its request (filed under the wrong key) or
a sum that does not match (edited or damaged text) refuses that entry, naming its key and
line; a member that is not gzip or JSON ends the read with `RecordingError` naming the
file and the line.

Segments (a recording folder): `calls.jsonl.gz` is the first segment and each later export
into the folder writes the next, `calls-0001.jsonl.gz`, `calls-0002.jsonl.gz`..., holding only
what the earlier segments lack (`segments`, `append_segment`): an export never rewrites a file
that exists, so git stores each export once, as one new file. A folder is read segment by
segment in that order, as if they were one file.

Why no tool version in the file: whatever shapes a reply is in its request (the backend
fingerprint), so a recording made by an older trinity imports wherever the keys agree.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.errors import RecordingError
from trinity_cli.keyed_cache import canonical_json, content_key

FORMAT = "trinity-recording/1"
# Outputs of a call that a recorded reply may lack and the same call made again fills in
# (backends/confidence.py); every other reply field must be equal for an entry to fill one.
FILLED = ("logprob_stats",)
# How long a call took is not part of what it gave: made again, it differs there.
TIMING = ("latency_s", "duration_s")
CALLS_FILE = "calls.jsonl.gz"
SEGMENT = "calls-{:04d}.jsonl.gz"  # a folder's later segments (module docstring)
SEGMENT_GLOB = "calls-[0-9][0-9][0-9][0-9].jsonl.gz"
TAGS = {"rollouts": "r2:", "hidden": "h2:", "sandbox": "s1:"}  # cache -> the key tag its entries carry


@dataclass(frozen=True)
class Entry:
    """One cache entry as a recording holds it (module docstring)."""

    cache: str
    key: str
    request: dict[str, Any]
    value: dict[str, Any]

    def checksum(self) -> str:
        body = {"cache": self.cache, "key": self.key, "request": self.request, "value": self.value}
        return hashlib.sha256(canonical_json(body).encode()).hexdigest()[:16]

    def line(self) -> str:
        return canonical_json({"cache": self.cache, "key": self.key, "request": self.request,
                               "value": self.value, "sum": self.checksum()})


@dataclass(frozen=True)
class Refused:
    """An entry a reader would not take: where it is, its key, and why."""

    line: int
    key: str
    why: str


def vector_value(data: bytes) -> dict[str, Any]:
    """A hidden state's float32 bytes as a recording value."""
    return {"float32": base64.b64encode(data).decode("ascii")}


def vector_bytes(value: dict[str, Any]) -> bytes:
    return base64.b64decode(value["float32"])


def fills(new: Entry, old: Entry) -> bool:
    """Whether `new` is `old`'s reply with an output it lacked (`FILLED`) filled in."""
    if new.cache != "rollouts" or new.key != old.key:
        return False
    if not any(old.value.get(f) is None and new.value.get(f) is not None for f in FILLED):
        return False
    skip = set(FILLED) | set(TIMING)
    keys = (set(new.value) | set(old.value)) - skip
    return all(new.value.get(k) == old.value.get(k) for k in keys)


def check(entry: Entry) -> str | None:
    """Why `entry` cannot be imported as it stands, or None (its key must be its request's)."""
    tag = TAGS.get(entry.cache)
    if tag is None:
        return f"unknown cache {entry.cache!r} (this trinity reads {', '.join(TAGS)})"
    if not entry.key.startswith(tag):
        return f"its key is not a {entry.cache} key of this version ({tag}...)"
    if content_key(tag, entry.request) != entry.key:
        return "filed under the wrong key (the key is not the hash of its request)"
    return None


def read(path: Path) -> tuple[list[Entry], list[Refused]]:
    """Every entry of the recording file `path` that passes its checks, and those refused.
    A later copy of a key already read is skipped unless it fills the earlier one in
    (`fills`), which it then replaces."""
    return read_many([path])


def read_many(files: list[Path]) -> tuple[list[Entry], list[Refused]]:
    """`read` over several files in order, as if they were one (a folder's segments)."""
    entries: list[Entry] = []
    refused: list[Refused] = []
    seen: dict[str, int] = {}  # key -> its position in `entries`
    for path in files:
        _read_into(path, entries, refused, seen)
    return entries, refused


def _read_into(path: Path, entries: list[Entry], refused: list[Refused], seen: dict[str, int]) -> None:
    for number, raw in _lines(path):
        try:
            data = json.loads(raw)
        except ValueError:
            raise RecordingError(f"{path}: line {number} is not JSON: the file is damaged",
                                 "export the recording again from the home that made it") from None
        if "format" in data:
            if data["format"] != FORMAT:
                raise RecordingError(f"{path}: line {number} is a {data['format']!r} header; this trinity "
                                     f"reads {FORMAT!r}", "upgrade trinity-cli")
            continue
        key = str(data.get("key", "?"))
        try:
            entry = Entry(str(data["cache"]), key, dict(data["request"]), dict(data["value"]))
        except (KeyError, TypeError, ValueError):
            refused.append(Refused(number, key, "an entry without cache, key, request and value"))
            continue
        if data.get("sum") != entry.checksum():
            refused.append(Refused(number, key, "its checksum does not match: the entry was changed or damaged"))
            continue
        why = check(entry)
        if why is not None:
            refused.append(Refused(number, key, why))
            continue
        if key not in seen:
            seen[key] = len(entries)
            entries.append(entry)
        elif fills(entry, entries[seen[key]]):
            entries[seen[key]] = entry


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for number, raw in enumerate(fh, 1):
                if raw.strip():
                    yield number, raw
    except FileNotFoundError:
        raise RecordingError(f"no recording file {path}", "give a recording folder or its calls.jsonl.gz") from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise RecordingError(f"{path} is not a whole recording ({exc}): it is damaged or truncated",
                             "export the recording again from the home that made it") from None


def member(entries: Iterable[Entry]) -> bytes:
    """One gzip member holding `entries` sorted by key, header first (module docstring)."""
    ordered = sorted(entries, key=lambda e: e.key)
    text = "\n".join([canonical_json({"format": FORMAT, "entries": len(ordered)})]
                     + [e.line() for e in ordered]) + "\n"
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
        gz.write(text.encode("utf-8"))
    return buffer.getvalue()


def segments(folder: Path) -> list[Path]:
    """The segment files of a recording folder, in reading order (module docstring)."""
    numbered = sorted(p for p in folder.glob(SEGMENT_GLOB) if p.name[6:10].isdigit())
    first = folder / CALLS_FILE
    return ([first] if first.is_file() else []) + numbered


def append_segment(folder: Path, entries: Iterable[Entry]) -> tuple[Path | None, int, int]:
    """Write to a new segment of `folder` the entries its segments do not hold, and those
    that fill a held entry in; nothing when there are none. Returns the segment written (or
    None), how many entries it holds, and how many keys the folder holds after."""
    files = segments(folder)
    held = {e.key: e for e in read_many(files)[0]}
    new = {e.key: e for e in entries if e.key not in held or fills(e, held[e.key])}
    if not new:
        return None, 0, len(held)
    last = max((int(p.name[6:10]) for p in files if p.name != CALLS_FILE), default=0)
    path = folder / (SEGMENT.format(last + 1) if files else CALLS_FILE)
    folder.mkdir(parents=True, exist_ok=True)
    paths.atomic_write_bytes(path, member(new.values()))
    return path, len(new), len(set(held) | set(new))


def append(path: Path, entries: Iterable[Entry]) -> tuple[int, int]:
    """Add to the file at `path` (created if absent) the entries whose keys it does not hold,
    and those that fill a held entry in (`fills`), as one new member; the file is replaced
    atomically. Returns how many were added and how many keys the file holds after."""
    held: dict[str, Entry] = {}
    if path.exists():
        held = {e.key: e for e in read(path)[0]}
    new = {e.key: e for e in entries if e.key not in held or fills(e, held[e.key])}
    if not new:
        return 0, len(held)
    old = path.read_bytes() if path.exists() else b""
    paths.atomic_write_bytes(path, old + member(new.values()))
    return len(new), len(set(held) | set(new))
