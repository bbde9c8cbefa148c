"""Export cache entries to a recording, import a recording into the caches, and say which
installed pool each recorded call applies to.

A recording folder holds `calls.jsonl.gz` and its later segments (recordings/fileformat.py)
and, when runs were
carried, `runs/run-N/` (recordings/carry.py). Export reads the rollout and hidden-state
caches of this `TRINITY_HOME`: the entries a run's journal names (`runs/run-N/calls.log`,
keyed_cache.journal_to), or every entry. Import writes each entry the caches do not hold,
marked `"source": "recording"` so a command can count the calls it replayed; it never
overwrites a different reply held under the same key (a conflict, reported), and importing
the same recording twice changes nothing.

Which pool a call applies to: a rollout's request names its backend fingerprint, which is
compared with the fingerprint every member of every installed pool has here (no model file
is assembled or loaded for that: backends/gguf_file.py). A call no member matches is counted
with the reason, read off the fingerprints: the weights are in no installed pool, or which
setting differs (the llama.cpp build, n_batch, n_ctx, chat format...).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.errors import NotFound, RecordingError
from trinity_cli.keyed_cache import KeyedCache, read_journal
from trinity_cli.recordings import carry, fileformat
from trinity_cli.recordings.fileformat import CALLS_FILE, Entry, Refused
from trinity_cli.runs.store import JOURNAL, RunStore

log = logging.getLogger(__name__)

# As pool/rollout_cache.py, coordinator/policy.py and sandbox/recorded.py open them.
SIZE_LIMITS = {"rollouts": 8 << 30, "hidden": 2 << 30, "sandbox": 1 << 30}
WHAT = {"rollouts": "rollout cache", "hidden": "hidden-state cache", "sandbox": "sandbox run cache"}
_TIMING = fileformat.TIMING


def open_cache(name: str) -> KeyedCache:
    return KeyedCache(paths.cache_dir(name), WHAT[name], size_limit=SIZE_LIMITS[name])


def calls_path(target: Path) -> Path:
    """The (first) calls file of a recording given as a folder or as the file itself."""
    return target if target.name.endswith(".gz") else target / CALLS_FILE


def recording_files(target: Path) -> list[Path]:
    """The calls files of a recording, in reading order: a file alone, or a folder's segments
    (fileformat.segments; its first file named even when absent, so a read says it is missing)."""
    if target.name.endswith(".gz"):
        return [target]
    return fileformat.segments(target) or [target / CALLS_FILE]


def read_recording(target: Path) -> tuple[list[Entry], list[Refused]]:
    """Every entry of the recording at `target` (a folder's segments read as one file)."""
    return fileformat.read_many(recording_files(target))


@dataclass
class ExportResult:
    path: Path
    entries: int  # entries the sources name that the caches hold with their request
    added: int  # of those, new to the file
    missing: int  # keys a journal names that the caches no longer hold
    no_request: int  # entries written before requests were kept: they cannot travel
    bytes: int  # what the export wrote: the new segment (a folder) or the file after it (a .gz)
    total: int  # entries the file holds after the export
    runs: list[str] = field(default_factory=list)  # run directories carried (carry.py)


def _entry(cache_name: str, key: str, stored: Any) -> Entry | None:
    """The recording entry of a stored cache value, or None when it holds no request."""
    if not isinstance(stored, dict) or "request" not in stored:
        return None
    if cache_name == "rollouts":
        reply = {k: v for k, v in stored["reply"].items() if k not in ("cached", "recorded")}
        return Entry(cache_name, key, stored["request"], reply)
    if cache_name == "sandbox":
        return Entry(cache_name, key, stored["request"], stored["result"])
    return Entry(cache_name, key, stored["request"], fileformat.vector_value(stored["vector"]))


def _cache_of(key: str) -> str | None:
    return next((name for name, tag in fileformat.TAGS.items() if key.startswith(tag)), None)


def collect(keys: Iterable[str] | None) -> tuple[list[Entry], int, int]:
    """(entries, keys not held, entries without a request) for `keys`, or for every entry of
    both caches when `keys` is None."""
    entries: list[Entry] = []
    missing = no_request = 0
    caches = {name: open_cache(name) for name in fileformat.TAGS}
    try:
        wanted: Iterable[tuple[str, str]]
        if keys is None:
            wanted = [(name, key) for name, cache in caches.items() for key in cache.keys()]
        else:
            wanted = [(name, key) for key in keys if (name := _cache_of(key)) is not None]
        for name, key in wanted:
            stored = caches[name].get(key)
            if stored is None:
                missing += 1
                continue
            entry = _entry(name, key, stored)
            if entry is None:
                no_request += 1
            else:
                entries.append(entry)
    finally:
        for cache in caches.values():
            cache.close()
    return entries, missing, no_request


def run_keys(run_ids: Iterable[str], store: RunStore | None = None) -> list[str]:
    """The keys the journals of these runs name, each once, in journal order."""
    store = store or RunStore()
    keys: dict[str, None] = {}
    for run_id in run_ids:
        run_dir = _run_dir(store, run_id)
        journal = run_dir / JOURNAL
        if not journal.is_file():
            raise NotFound(f"{run_dir.name} has no {JOURNAL}: it was made before runs kept the keys of their calls",
                           "export the whole cache instead (--all)")
        keys.update(dict.fromkeys(read_journal(journal)))
    return list(keys)


def _run_dir(store: RunStore, run_id: str) -> Path:
    run_id = f"run-{run_id}" if run_id.isdigit() else run_id
    path = store.root / run_id
    if not path.is_dir():
        store.path(run_id)  # raises NotFound with the close matches
    return path


def export(target: Path, run_ids: list[str] | None, carry_runs: bool = True) -> ExportResult:
    """Add to the recording at `target` (a folder, created if needed: a new segment; or a .gz
    file: a new gzip member) the calls of `run_ids` (their journals), or of the whole caches
    when `run_ids` is None, that it does not hold yet (fileformat.py); with
    `carry_runs` and a folder, the runs' directories go into it too (carry.py)."""
    check_target(target)
    keys = None if run_ids is None else run_keys(run_ids)
    entries, missing, no_request = collect(keys)
    if target.name.endswith(".gz"):
        path = target
        path.parent.mkdir(parents=True, exist_ok=True)
        added, total = fileformat.append(path, entries)
        size = path.stat().st_size if path.exists() else 0
    else:
        written, added, total = fileformat.append_segment(target, entries)
        path = written or calls_path(target)
        size = written.stat().st_size if written else 0
    result = ExportResult(path, len(entries), added, missing, no_request, size, total)
    if run_ids and carry_runs and not target.name.endswith(".gz"):
        result.runs = carry.export_runs(run_ids, target)
    return result


@dataclass
class ImportResult:
    path: Path
    entries: int  # entries read whole
    added: Counter[str] = field(default_factory=Counter)  # cache -> entries written
    held: Counter[str] = field(default_factory=Counter)  # cache -> already held with the same reply
    filled: int = 0  # of the held replies, those the recording filled in (fileformat.fills)
    conflicts: list[str] = field(default_factory=list)  # keys held here with a different reply
    refused: list[Refused] = field(default_factory=list)
    applies: Counter[str] = field(default_factory=Counter)  # pool -> rollout calls one of its members makes
    members: dict[str, list[str]] = field(default_factory=dict)  # pool -> its members those calls belong to
    other: Counter[str] = field(default_factory=Counter)  # why calls match no installed member -> count
    backbones: Counter[str] = field(default_factory=Counter)  # backbone (or why none) -> hidden states
    sandbox: int = 0  # recorded runs of model-written programs
    runs: list[carry.Carried] = field(default_factory=list)  # run directories brought (carry.py)


def _same(cache_name: str, held: Any, entry: Entry) -> bool:
    if cache_name == "sandbox":  # what a program printed and how it ended, not how long it took
        result = held.get("result", held)
        return all(result.get(k) == v for k, v in entry.value.items() if k not in _TIMING)
    if cache_name == "hidden":
        vector = held["vector"] if isinstance(held, dict) else held
        return bool(vector == fileformat.vector_bytes(entry.value))
    reply = held["reply"] if "reply" in held else held
    keep = [k for k in entry.value if k not in _TIMING and k not in fileformat.FILLED]
    return all(reply.get(k) == entry.value[k] for k in keep)


def _fills_held(held: Any, entry: Entry) -> bool:
    """Whether `entry` fills in an output the held rollout lacks (fileformat.fills)."""
    if entry.cache != "rollouts" or not isinstance(held, dict) or "request" not in held:
        return False
    return fileformat.fills(entry, Entry(entry.cache, entry.key, held["request"], held["reply"]))


def _stored(entry: Entry) -> dict[str, Any]:
    if entry.cache == "rollouts":
        return {"request": entry.request, "reply": entry.value, "source": "recording"}
    if entry.cache == "sandbox":
        return {"request": entry.request, "result": entry.value, "source": "recording"}
    return {"request": entry.request, "vector": fileformat.vector_bytes(entry.value), "source": "recording"}


def import_recording(target: Path) -> ImportResult:
    """Import the calls of the recording at `target` into this home's caches (module
    docstring), and a folder's runs into its runs/ (carry.py); idempotent."""
    entries, refused = read_recording(target)
    result = ImportResult(calls_path(target), len(entries), refused=refused)
    caches = {name: open_cache(name) for name in fileformat.TAGS}
    try:
        for entry in entries:
            cache = caches[entry.cache]
            held = cache.get(entry.key)
            if held is None:
                cache.set(entry.key, _stored(entry))
                result.added[entry.cache] += 1
            elif _fills_held(held, entry):
                stored = _stored(entry)
                if "source" not in held:  # made here: it stays a call of this home's
                    del stored["source"]
                cache.set(entry.key, stored)
                result.held[entry.cache] += 1
                result.filled += 1
            elif _same(entry.cache, held, entry):
                result.held[entry.cache] += 1
            else:
                result.conflicts.append(entry.key)
    finally:
        for cache in caches.values():
            cache.close()
    _where(entries, result)
    if target.is_dir():
        result.runs = carry.import_runs(target)
    return result


def describe_file(target: Path) -> ImportResult:
    """What importing `target` would bring, without writing anything: entries, refusals and
    which installed pool each call applies to (`added`/`held`/`conflicts` stay empty)."""
    entries, refused = read_recording(target)
    result = ImportResult(calls_path(target), len(entries), refused=refused)
    _where(entries, result)
    return result


def _where(entries: list[Entry], result: ImportResult) -> None:
    """Fill `applies`, `other` and `backbones`: the pools and backbones installed here that
    the recorded calls belong to (module docstring)."""
    members = installed_members()
    backbones = installed_backbones() if any(e.cache == "hidden" for e in entries) else {}
    for entry in entries:
        if entry.cache == "sandbox":
            result.sandbox += 1
            continue
        if entry.cache == "hidden":
            fp = str(entry.request.get("backbone", ""))
            result.backbones[backbones.get(fp) or "another backbone (not installed here)"] += 1
            continue
        fp = str(entry.request.get("fingerprint", ""))
        owners = members.get(fp)
        if owners:
            for pool in sorted({pool for pool, _ in owners}):
                result.applies[pool] += 1
                names = result.members.setdefault(pool, [])
                names.extend(m for p, m in owners if p == pool and m not in names)
        else:
            result.other[why_other(fp, members)] += 1


def installed_members() -> dict[str, list[tuple[str, str]]]:
    """Backend fingerprint -> [(pool, member)] over every installed pool (pool_config.
    available_pools). A member whose fingerprint cannot be computed here (its weights file
    is missing) is left out."""
    from trinity_cli.backends import registry
    from trinity_cli.errors import TrinityError
    from trinity_cli.pool_config import available_pools, load_pool

    out: dict[str, list[tuple[str, str]]] = {}
    for name, path in available_pools().items():
        try:
            config = load_pool(str(path))
        except TrinityError:
            continue
        for model in config.models:
            try:
                fingerprint = registry.create(model).fingerprint
            except TrinityError as exc:
                log.debug("no fingerprint for %s/%s: %s", name, model.name, exc)
                continue
            out.setdefault(fingerprint, []).append((name, model.name))
    return out


def installed_backbones() -> dict[str, str]:
    """Backbone fingerprint -> name, for the backbones embedded in this install (from the
    declared sha256 where there is one: no file is assembled for it)."""
    from trinity_cli import assets
    from trinity_cli.coordinator.backbone_refs import EMBEDDED, describe
    from trinity_cli.errors import TrinityError

    out: dict[str, str] = {}
    for ref, weights in EMBEDDED.items():
        declared = assets.declared_sha256(weights)
        try:
            out[f"gguf:{declared}" if declared else describe(ref)[0]] = ref
        except TrinityError:
            continue
    return out


def _fields(fingerprint: str) -> tuple[str, list[str]]:
    head, _, rest = fingerprint.partition("|")
    return head, rest.split("|") if rest else []


def why_other(fingerprint: str, members: dict[str, list[tuple[str, str]]]) -> str:
    """Why a call recorded under `fingerprint` applies to no installed member, in words."""
    head, parts = _fields(fingerprint)
    if head.startswith("gguf:"):
        alike = [fp for fp in members if _fields(fp)[0] == head]
        if not alike:
            return f"GGUF weights {head[5:17]}... are in no installed pool"
        theirs = _fields(alike[0])[1]
        diffs = [f"{a or 'nothing'} (installed: {b or 'nothing'})" for a, b in _pad(parts, theirs) if a != b]
        return "same weights, recorded with " + "; ".join(diffs)
    if head.startswith("openai:") or fingerprint.startswith("openai"):
        return f"API model {fingerprint} is in no installed pool"
    return f"backend {fingerprint[:40]} is in no installed pool"


def _pad(a: list[str], b: list[str]) -> Iterator[tuple[str, str]]:
    for i in range(max(len(a), len(b))):
        yield (a[i] if i < len(a) else ""), (b[i] if i < len(b) else "")


def check_target(target: Path) -> None:
    """Refuse a recording path that cannot be one: an existing file that is not .gz."""
    if target.is_file() and not target.name.endswith(".gz"):
        raise RecordingError(f"{target} is a file, not a recording folder or a .gz recording",
                             "give a folder (it will hold calls.jsonl.gz) or a path ending in .gz")
