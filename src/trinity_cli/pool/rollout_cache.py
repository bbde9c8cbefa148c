"""The rollout cache: one diskcache entry per pool call, keyed by everything that shapes
the reply. Used by the pool (pool/pool.py); the run store lives in runs/store.py.

Rollout cache (diskcache under `cache/rollouts/`): one entry per pool call.
    key   = "r2:" + sha256(canonical JSON of
              {"v": CACHE_VERSION, "fingerprint": backend fingerprint,
               "messages": [[role, content], ...],
               "params": {max_tokens, temperature, top_p, seed, stop[, json_schema]}
               [, "schedule": the backend's schedule_tag]})
          (json_schema present only for a call constrained to a schema; schedule only where
          the backend computes the call otherwise than its fingerprint says: "turn-chunks",
          a conversation's prompt called with GenParams.split_last, evaluated in chunks that
          end where its last message starts; "task-chunks", such a call's prompt also chunked
          where its new message (GenParams.split_before) starts; both joined by "+" where both
          apply: backends/chunk_schedule.py)
    value = {"request": the payload above, "reply": Completion.to_dict() without `cached`
             and `recorded`, "source": "recording" for an entry imported from a recording
             (recordings/), else absent}
             (entries written before the request was kept hold the reply dict alone: they
             are read, but a recording cannot carry them)
Canonical JSON: sorted keys, no whitespace, UTF-8. Changing anything that shapes a reply
changes the key; bump CACHE_VERSION when the format itself changes. The prompt version is
not part of the key: a reply is a function of the messages sent, which the key holds in
full, so a new prompt version re-computes exactly the calls whose wording changed and keeps
every other. The backend
fingerprint carries what shapes a reply besides messages and parameters:
    gguf     weights sha256, chat format, n_ctx, llama-cpp-python version and n_batch
             (llama.cpp's sums, so its replies, depend on it; not on the threads:
             backends/gguf_file.py);
             `runtime: server` members: xllamacpp's version and the slots instead of
             llama-cpp-python's version, and `|server` (backends/llamaserver.py)
    openai   base URL and model id (never the key: fingerprints hold no secrets)
    scripted a hash of the rules
Which calls are cached (`Backend.deterministic`): only calls whose reply is a function of
their parameters. Greedy calls (temperature 0) always are. A sampled call (temperature > 0)
is cached only when its seed is set and the backend honours it: llama.cpp (in process, or
its server, where a batch's other sequences may still shift a reply: llamaserver.py) and
scripted models. API models are cached only at temperature 0, since servers treat the
seed as a hint. diskcache writes each entry in one SQLite transaction, so a crash leaves
either the whole entry or none; a damaged cache file is set aside and replaced by an empty
one (keyed_cache.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from trinity_cli import paths
from trinity_cli.keyed_cache import KeyedCache
from trinity_cli.messages import ChatMessage, Completion, GenParams

CACHE_VERSION = 2


def rollout_request(fingerprint: str, messages: list[ChatMessage], params: GenParams,
                    schedule: str | None = None) -> dict[str, Any]:
    """The payload a rollout key hashes: the request itself, kept beside the reply so that a
    recording can carry the call and its importer recompute the key (module docstring)."""
    fields: dict[str, Any] = {
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "seed": params.seed,
        "stop": list(params.stop),
    }
    if params.json_schema is not None:
        fields["json_schema"] = params.json_schema
    return {
        "v": CACHE_VERSION,
        "fingerprint": fingerprint,
        "messages": [[m.role, m.content] for m in messages],
        "params": fields,
        **({"schedule": schedule} if schedule is not None else {}),
    }


KEY_TAG = f"r{CACHE_VERSION}:"


class ReplyCache(Protocol):
    """What a pool reads and writes replies through: `RolloutCache` (a directory on disk) or a
    Ray actor's view of the driver's cache (evaluators/ray_cache.KeeperCache)."""

    def get(self, key: str) -> Completion | None: ...

    def put(self, key: str, completion: Completion, request: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def stored_reply(value: dict[str, Any]) -> dict[str, Any]:
    """The reply dict of a stored value (either layout of the module docstring)."""
    return value["reply"] if "reply" in value else value


class RolloutCache:
    """Pool replies on disk (a KeyedCache: damage sets it aside; its reads and writes go to
    the command's journal: keyed_cache.journal_to)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or paths.cache_dir("rollouts")
        self._cache = KeyedCache(self.directory, "rollout cache", size_limit=8 << 30, journaled=True)

    def get(self, key: str) -> Completion | None:
        raw = self._cache.get(key)
        if raw is None:
            return None
        completion = Completion.from_dict(stored_reply(raw))
        completion.cached = True
        completion.recorded = raw.get("source") == "recording"
        return completion

    def put(self, key: str, completion: Completion, request: dict[str, Any]) -> None:
        data = completion.to_dict()
        data.pop("cached", None)
        data.pop("recorded", None)
        self._cache.set(key, {"request": request, "reply": data})

    @property
    def store(self) -> KeyedCache:
        """The KeyedCache underneath (recordings/ reads and fills it entry by entry)."""
        return self._cache

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        self._cache.close()
