"""Recorded sandbox runs: a program that already ran in the sandbox with the same limits, in
the same mode and interpreter, is not run again; its recorded result is returned. This is
what lets an episode replayed from the rollout cache (a bench or an evolve generation run
again) skip its programs too: a program turn's code and a code item's test program are
functions of the cached reply. Used by program turns (turns/program.py) and the code scorer
(tasks/code.py); `sandbox.run_python` itself never reads it.

Sandbox run cache (diskcache under `cache/sandbox/`): one entry per distinct run.
    key   = "s1:" + sha256(canonical JSON of
              {"v": RUN_CACHE_VERSION, "source": the program, each of its `secrets`
               replaced by "\\x00<i>\\x00" (i: its position),
               "limits": {timeout_s, memory_mb, max_procs, file_mb, max_open_files, disk_mb},
               "isolated": whether it runs under bubblewrap, "python": sys.version})
    value = {"request": the payload above, "result": the SandboxResult's fields, secrets in
             stdout and stderr replaced the same way} (older entries: the fields alone); the
             request is kept so a recording can carry the run (recordings/)
Secrets are the random markers a caller puts in the program so that model-written code
cannot forge them (the answer marker, the tests' sentinel): fresh each call, so they are
keyed and stored as placeholders and the current call's are put back on a hit.

Not recorded: runs killed for their timeout (how long a program takes depends on the
machine's load as much as on the program, so a timeout is run again next time). A strict
run (`strict`, TRINITY_SANDBOX=strict) still refuses, before any lookup, where isolation is
unavailable. `TRINITY_SANDBOX_CACHE=off` turns recording and lookup off (every program
runs); a program that reads the clock or draws unseeded random numbers replays its first
result, as a cached reply does.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from trinity_cli import paths
from trinity_cli.keyed_cache import KeyedCache, content_key
from trinity_cli.sandbox import sandbox
from trinity_cli.sandbox.sandbox import SandboxResult

RUN_CACHE_VERSION = 1
ENV = "TRINITY_SANDBOX_CACHE"

_RUN_PYTHON = inspect.signature(sandbox.run_python)  # its parameters and defaults: the key's limits
_open: dict[str, KeyedCache] = {}  # cache directory -> its cache, opened once per process
_lock = threading.Lock()


def enabled() -> bool:
    """Whether runs are recorded and looked up (TRINITY_SANDBOX_CACHE is not "off")."""
    return os.environ.get(ENV, "").strip().lower() not in ("off", "0", "false", "no")


def _cache() -> KeyedCache:
    directory = paths.cache_dir("sandbox")
    with _lock:
        cache = _open.get(str(directory))
        if cache is None:
            cache = _open[str(directory)] = KeyedCache(directory, "sandbox run cache", size_limit=1 << 30,
                                                       journaled=True)
        return cache


def _hide(text: str, secrets: Sequence[str]) -> str:
    for i, secret in enumerate(secrets):
        text = text.replace(secret, f"\x00{i}\x00")
    return text


def _show(text: str, secrets: Sequence[str]) -> str:
    for i, secret in enumerate(secrets):
        text = text.replace(f"\x00{i}\x00", secret)
    return text


KEY_TAG = f"s{RUN_CACHE_VERSION}:"


def run_request(source: str, secrets: Sequence[str], limits: dict[str, Any], isolated: bool) -> dict[str, Any]:
    """The payload a run's cache key hashes (module docstring)."""
    return {"v": RUN_CACHE_VERSION, "source": _hide(source, secrets), "limits": limits,
            "isolated": isolated, "python": sys.version}


def run_python_recorded(source: str, secrets: Sequence[str] = (), **options: Any) -> SandboxResult:
    """`sandbox.run_python(source, **options)`, answered from the record when this run was
    made before (module docstring); `secrets`: the random strings the caller put in `source`.
    The key's limits are every run_python parameter but `source` and `strict`, defaults
    filled in, so a limit added there is keyed here without a change."""
    if not enabled():
        return sandbox.run_python(source, **options)
    bound = _RUN_PYTHON.bind(source, **options)
    bound.apply_defaults()
    limits = {name: value for name, value in bound.arguments.items() if name not in ("source", "strict")}
    strict = bool(bound.arguments["strict"])
    # Looked up through the module, as run_python does, so the same mode decides both.
    iso = sandbox.require_isolation() if strict or sandbox.strict_from_env() else sandbox.isolation()
    request = run_request(source, secrets, limits, iso.bwrap is not None)
    key = content_key(KEY_TAG, request)
    cache = _cache()
    recorded = cache.get(key)
    if recorded is not None and "result" not in recorded:  # an older entry: keep its request now
        cache.set(key, {"request": request, "result": recorded})
    if recorded is not None:
        recorded = recorded.get("result", recorded)
        return SandboxResult(**{**recorded, "stdout": _show(recorded["stdout"], secrets),
                                "stderr": _show(recorded["stderr"], secrets)})
    result = sandbox.run_python(source, **options)
    if not result.timed_out:
        data = dataclasses.asdict(result)
        data["stdout"], data["stderr"] = _hide(result.stdout, secrets), _hide(result.stderr, secrets)
        cache.set(key, {"request": request, "result": data})
    return result
