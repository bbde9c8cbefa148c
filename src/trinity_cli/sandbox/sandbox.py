"""Run untrusted Python (code a model wrote) in a separate, isolated, resource-limited process.

`run_python(source)` runs `source` as `main.py` with `python -I -B main.py` in a fresh
directory and returns a `SandboxResult` (exit status, captured output, why it was killed).
This module owns that call and the choice of mode; isolation.py owns bubblewrap (whether it
works here, its command line, strict mode) and limits.py the resource limits and process
control. It works in one of two modes, chosen once per process by `isolation()`:

**Isolated** (Linux with bubblewrap, `bwrap`, able to create namespaces). The code runs in
new namespaces as an unprivileged user, on a file system built from nothing but the host's
read-only system directories, Python and a private size-capped tmpfs; it cannot see the
parent's environment, files or processes and has no network. Every process it starts is
killed when the run ends. The details are in isolation.py's docstring.

**Limits only** (macOS, no `bwrap`, or bwrap unable to create namespaces, as in some
containers). The code runs in a new session, in a temporary directory of the host's, with a
minimal environment (no API keys), a separate network namespace when trinity runs as root,
and the limits below. It can read and write any file its user can and use the network
(non-root), and a process that leaves the session *and* clears its environment can outlive
the run. Each process that starts code in this mode says so once, through this module's
logger (the CLI prints it as one line naming the install command).

Both modes limit every process of the run: address space (`memory_mb`), CPU time, processes
(`max_procs`), file size (`file_mb`), open files, no core dumps; the run is killed after
`timeout_s` of wall time, and output is kept up to 32 KiB per stream. The details are in
limits.py's docstring.

Requiring isolation: `run_python(..., strict=True)`, or `TRINITY_SANDBOX=strict` in the
environment, refuses to run code in the limits-only mode (`SandboxUnavailable`). A code task
item asks for it with `"sandbox": "strict"` in its reference, a pool with `sandbox: strict`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trinity_cli.sandbox.isolation import (
    _INIT,
    Isolation,
    _bwrap_argv,
    isolation,
    require_isolation,
    strict_from_env,
)
from trinity_cli.sandbox.limits import (
    FILES_PER_MB,
    MARKER_ENV,
    _child_env,
    _clamped,
    _DiskWatch,
    _group_size,
    _kill_group,
    _kill_sandbox,
    _limiter,
    _proc_pids,
    _read_capped,
    _remove_tree,
    _sandbox_size,
    _supervise,
    _user_tasks,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SandboxResult:
    """How a sandboxed run ended.

    `passed` is True when the process exited with status 0 before the timeout.
    `returncode` is the exit status, negative for a signal (-9: killed), None if unknown.
    (Isolated, an exit status above 128 is read as the signal it stands for, as shells do.)
    `killed_for` is "timeout", "processes" (more than `max_procs` processes), "disk" (more
    than `disk_mb` written or too many files, where that is enforced by polling) or None.
    `isolated` says whether the code ran under bubblewrap (see the module docstring).
    """

    passed: bool
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    killed_for: str | None = None
    duration_s: float = 0.0
    isolated: bool = False


def run_python(
    source: str,
    timeout_s: float = 10,
    memory_mb: int = 512,
    max_procs: int = 32,
    file_mb: int = 16,
    max_open_files: int = 64,
    disk_mb: int = 64,
    strict: bool = False,
) -> SandboxResult:
    """Run `source` as a Python script in the sandbox described in the module docstring.

    `strict` (or TRINITY_SANDBOX=strict) raises `SandboxUnavailable` instead of running
    without isolation; `ConfigError` if TRINITY_SANDBOX holds anything but auto or strict.
    """
    iso = require_isolation() if strict or strict_from_env() else isolation()
    if iso.bwrap is None:
        _note_fallback(iso)
    marker = secrets.token_hex(12)
    workdir = Path(tempfile.mkdtemp(prefix="trinity-sandbox-"))
    try:
        main = workdir / "main.py"
        main.write_text(source, encoding="utf-8", errors="replace")
        limits = _rlimits(iso, timeout_s, memory_mb, max_procs, file_mb, max_open_files)
        argv, env, preexec, inner = _command(iso, main, marker, limits, disk_mb)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            proc = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True, close_fds=True, preexec_fn=preexec)
            killed_for = _watch(proc, iso, inner, marker, timeout_s, max_procs, disk_mb)
            duration = time.monotonic() - start
            stdout, stderr = _read_capped(out), _read_capped(err)
    finally:
        _remove_tree(workdir)
    returncode = proc.returncode
    if iso.bwrap is not None and returncode is not None and 128 < returncode < 128 + 65:
        returncode = 128 - returncode  # bwrap reports a child killed by signal N as 128 + N
    stderr += _killed_note(killed_for, timeout_s, max_procs, disk_mb)
    return SandboxResult(passed=killed_for is None and returncode == 0, returncode=returncode, stdout=stdout,
                         stderr=stderr, timed_out=killed_for == "timeout", killed_for=killed_for,
                         duration_s=duration, isolated=iso.bwrap is not None)


def _rlimits(iso: Isolation, timeout_s: float, memory_mb: int, max_procs: int, file_mb: int,
             max_open_files: int) -> dict[int, int]:
    """The resource limits of one run (the process count only where it can be counted: as
    root, or with this user's tasks known)."""
    is_root = os.geteuid() == 0
    limits = {
        resource.RLIMIT_AS: memory_mb * 1024 * 1024,
        resource.RLIMIT_CPU: math.ceil(timeout_s) + 1,
        resource.RLIMIT_FSIZE: file_mb * 1024 * 1024,
        resource.RLIMIT_NOFILE: max_open_files,
        resource.RLIMIT_CORE: 0,
    }
    user_tasks = None if is_root else _user_tasks(os.getuid())
    if is_root or user_tasks is not None:
        # bwrap itself takes two processes (the outer one and the namespace's init).
        limits[resource.RLIMIT_NPROC] = max_procs + (user_tasks or 0) + (2 if iso.bwrap else 0)
    return limits


def _command(iso: Isolation, main: Path, marker: str, limits: dict[int, int],
             disk_mb: int) -> tuple[list[str], dict[str, str], Callable[[], None], str]:
    """(argv, environment, pre-exec function, the run's directory inside the jail) of a run of
    `main`: under bubblewrap when `iso` has it, else Python isolated in its work directory
    (the network cut there too when root can)."""
    workdir = main.parent
    if iso.bwrap is not None:
        inner = f"/tmp/trinity-run-{marker[:16]}"
        env = _child_env(inner, marker, path=f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
                         marker_env=MARKER_ENV)
        argv = [*_bwrap_argv(iso, main, inner, env, disk_mb), *_INIT, sys.executable]
        return argv, env, _limiter(_clamped(limits), cut_network=False), inner
    env = _child_env(str(workdir), marker, path=os.environ.get("PATH", os.defpath), marker_env=MARKER_ENV)
    argv = [sys.executable, "-I", "-B", "main.py"]
    return argv, env, _limiter(_clamped(limits), cut_network=os.geteuid() == 0), str(workdir)


def _watch(proc: subprocess.Popen, iso: Isolation, inner: str, marker: str, timeout_s: float, max_procs: int,
           disk_mb: int) -> str | None:
    """Police a started run to its end (what killed it, or None), then kill whatever of it is left."""
    try:
        if iso.bwrap is not None:
            watch = _DiskWatch(proc.pid, f"{inner}/main.py", disk_mb, polled_bytes=not iso.tmpfs_size)
            return _supervise(proc, timeout_s, max_procs, lambda: _sandbox_size(proc.pid), watch)
        return _supervise(proc, timeout_s, max_procs, lambda: _group_size(proc.pid), None)
    finally:
        if iso.bwrap is not None:
            _kill_sandbox(proc)
        else:
            _kill_group(proc)
            _kill_marked(marker)


def _killed_note(killed_for: str | None, timeout_s: float, max_procs: int, disk_mb: int) -> str:
    """The line added to stderr when the sandbox killed the run."""
    if killed_for == "processes":
        return f"\n[sandbox] killed: more than {max_procs} processes\n"
    if killed_for == "timeout":
        return f"\n[sandbox] killed: still running after {timeout_s:g} s\n"
    if killed_for == "disk":
        return f"\n[sandbox] killed: wrote more than {disk_mb} MiB or {disk_mb * FILES_PER_MB} files\n"
    return ""


_noted: set[str] = set()
_noted_lock = threading.Lock()


def _note_fallback(iso: Isolation) -> None:
    """Say once per process (one CLI command) that code runs without isolation, and why."""
    with _noted_lock:
        if iso.reason in _noted:
            return
        _noted.add(iso.reason)
    log.warning("model-written code runs WITHOUT isolation (only time, memory and process limits): "
                "%s — %s; TRINITY_SANDBOX=strict refuses to run it", iso.reason, iso.hint)


def marked_pids(marker: str | None = None) -> list[int]:
    """Processes whose environment holds the sandbox marker (any run's, or run `marker`'s)."""
    needle = f"{MARKER_ENV}={marker}\0" if marker else f"{MARKER_ENV}="
    found = []
    for pid in _proc_pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            continue
        if needle.encode() in environ:
            found.append(pid)
    return found


def _kill_marked(marker: str) -> None:
    """Kill stragglers that escaped the process group; repeat while new ones appear."""
    for _ in range(5):
        pids = marked_pids(marker)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
