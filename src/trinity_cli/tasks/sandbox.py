"""Run untrusted Python (code a model wrote) in a separate, resource-limited process.

`run_python(source)` writes `source` to `main.py` in a fresh temporary directory and runs
`python -I -B main.py` there, in a new session (its own process group), with:

    cwd, HOME, TMPDIR   the temporary directory, deleted afterwards
    environment         PATH, HOME, TMPDIR, LANG/LC_ALL and a per-run marker only: no API
                        keys or other variables of ours reach the code
    RLIMIT_AS           `memory_mb` of address space per process (allocations beyond it
                        raise MemoryError)
    RLIMIT_CPU          ceil(timeout_s) + 1 CPU seconds per process
    RLIMIT_NPROC        the user's current task count + `max_procs` (see "as root"; left
                        unset where /proc cannot count the user's tasks)
    RLIMIT_FSIZE        `file_mb` per file written, stdout/stderr included (writes beyond it
                        fail with EFBIG)
    RLIMIT_NOFILE       `max_open_files` descriptors
    RLIMIT_CORE         0: no core dumps
    network             as root, an empty network namespace (no interfaces but a downed
                        loopback); otherwise the network is reachable

The parent waits at most `timeout_s` of wall time, and kills the whole process group with
SIGKILL when the time is up *and* after a normal exit (so children left behind die too).
Processes that left the group (`setsid`) are found afterwards by the marker in their
environment (`/proc/PID/environ`) and killed as well. Output is captured in unlinked
temporary files (so it is bounded by RLIMIT_FSIZE) and kept up to 32 KiB per stream (head
and tail).

As root (how CI runs) the kernel ignores RLIMIT_NPROC, and a root process could raise its
own limits again. The sandbox therefore also counts the processes in the group while it
waits (a cheap check of the system task count every few milliseconds, then an exact count
of the group) and kills the group once it holds more than `max_procs`; a fork bomb is
stopped within one polling interval (at most 50 ms), though it may briefly exceed the cap.

What this does not prevent: the code can read and write any file its user can (root: all
of them) outside the temporary directory, each file capped at `file_mb`; without root it
can use the network; limits rely on POSIX `resource` and Linux `/proc` (elsewhere only
the rlimits, the timeout and the group kill apply). It guards against buggy and runaway
code, not a determined attacker; run trinity as an unprivileged user in a container for
that.

Implementation note: limits are applied in `preexec_fn`, which CPython documents as unsafe
when the parent has other threads (the child could deadlock before exec). Here the
preexec function calls only `setrlimit` and `unshare`; should a child ever hang there, the
timeout kills it and the item scores 0.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

MARKER_ENV = "TRINITY_SANDBOX_RUN"
OUTPUT_KEEP_BYTES = 32 * 1024
_CLONE_NEWNET = 0x40000000
_POLL_MIN_S = 0.002
_POLL_MAX_S = 0.05


@dataclass(frozen=True)
class SandboxResult:
    """How a sandboxed run ended.

    `passed` is True when the process exited with status 0 before the timeout.
    `returncode` is the exit status, negative for a signal (-9: killed), None if unknown.
    `killed_for` is "timeout", "processes" (more than `max_procs` processes) or None.
    """

    passed: bool
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    killed_for: str | None = None
    duration_s: float = 0.0


def run_python(
    source: str,
    timeout_s: float = 10,
    memory_mb: int = 512,
    max_procs: int = 32,
    file_mb: int = 16,
    max_open_files: int = 64,
) -> SandboxResult:
    """Run `source` as a Python script in the sandbox described in the module docstring."""
    marker = secrets.token_hex(12)
    workdir = Path(tempfile.mkdtemp(prefix="trinity-sandbox-"))
    try:
        (workdir / "main.py").write_text(source, encoding="utf-8", errors="replace")
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(workdir),
            "TMPDIR": str(workdir),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            MARKER_ENV: marker,
        }
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
            limits[resource.RLIMIT_NPROC] = max_procs + (user_tasks or 0)
        preexec = _limiter(_clamped(limits), cut_network=is_root)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "main.py"],
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                close_fds=True,
                preexec_fn=preexec,
            )
            try:
                killed_for = _supervise(proc, timeout_s, max_procs)
            finally:
                _kill_group(proc)
                _kill_marked(marker)
            duration = time.monotonic() - start
            stdout, stderr = _read_capped(out), _read_capped(err)
    finally:
        _remove_tree(workdir)
    returncode = proc.returncode
    if killed_for == "processes":
        stderr += f"\n[sandbox] killed: more than {max_procs} processes\n"
    elif killed_for == "timeout":
        stderr += f"\n[sandbox] killed: still running after {timeout_s:g} s\n"
    return SandboxResult(
        passed=killed_for is None and returncode == 0,
        returncode=returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=killed_for == "timeout",
        killed_for=killed_for,
        duration_s=duration,
    )


def _clamped(limits: dict[int, int]) -> dict[int, int]:
    """Each limit lowered to the current hard limit, which an unprivileged process cannot raise."""
    out = {}
    for which, value in limits.items():
        _, hard = resource.getrlimit(which)
        out[which] = value if hard == resource.RLIM_INFINITY else min(value, hard)
    return out


def _limiter(limits: dict[int, int], cut_network: bool) -> Callable[[], None]:
    """The preexec function: runs in the child between fork and exec."""
    unshare = _libc_unshare() if cut_network else None

    def apply() -> None:
        for which, value in limits.items():
            resource.setrlimit(which, (value, value))
        if unshare is not None:
            unshare(_CLONE_NEWNET)  # best effort: a failure leaves the network as it was

    return apply


def _libc_unshare() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        unshare: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).unshare
    except (OSError, AttributeError):
        return None
    return unshare


def _supervise(proc: subprocess.Popen[bytes], timeout_s: float, max_procs: int) -> str | None:
    """Wait for `proc` to exit; return why it had to be killed ("timeout", "processes") or None.

    The child is not reaped here (see `_exited`), so its pid, which is also the process
    group id, cannot be reused before `_kill_group` signals the group.
    """
    deadline = time.monotonic() + timeout_s
    baseline = _system_tasks()
    interval = _POLL_MIN_S
    while not _exited(proc.pid):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        total = _system_tasks()
        if total is not None and baseline is not None and total - baseline > max_procs:
            in_group = _group_size(proc.pid)
            if in_group > max_procs:
                return "processes"
            baseline = total - in_group  # the growth was elsewhere on the machine
        time.sleep(min(interval, remaining))
        interval = min(interval * 2, _POLL_MAX_S)
    return None


def _exited(pid: int) -> bool:
    """Whether child `pid` has exited, leaving it unreaped (a zombie) if so."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _system_tasks() -> int | None:
    """Number of tasks (threads) on the machine, from /proc/loadavg's "running/total" field."""
    try:
        with open("/proc/loadavg", "rb") as fh:
            return int(fh.read().split()[3].split(b"/")[1])
    except (OSError, IndexError, ValueError):
        return None


def _proc_pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _group_size(pgid: int) -> int:
    count = 0
    for pid in _proc_pids():
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid:
            count += 1
    return count


def _user_tasks(uid: int) -> int | None:
    """Tasks (threads count: RLIMIT_NPROC counts them) of real user `uid`; None without /proc."""
    pids = _proc_pids()
    if not pids:
        return None
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", "rb") as fh:
                status = fh.read()
        except OSError:
            continue
        real_uid = threads = None
        for line in status.splitlines():
            if line.startswith(b"Uid:"):
                real_uid = int(line.split()[1])
            elif line.startswith(b"Threads:"):
                threads = int(line.split()[1])
        if real_uid == uid:
            total += threads or 1
    return total


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group led by `proc`, then reap `proc`.

    The leader is still unreaped when the group is signalled, so the group id cannot belong
    to anyone else yet; the kernel delivers a group kill atomically with respect to fork.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


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


def _read_capped(fh: IO[bytes]) -> str:
    """The captured stream, keeping its head and tail when longer than OUTPUT_KEEP_BYTES."""
    size = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    if size <= OUTPUT_KEEP_BYTES:
        return fh.read().decode("utf-8", "replace")
    half = OUTPUT_KEEP_BYTES // 2
    head = fh.read(half)
    fh.seek(size - half)
    tail = fh.read(half)
    skipped = size - 2 * half
    return (
        head.decode("utf-8", "replace")
        + f"\n[... {skipped} bytes omitted ...]\n"
        + tail.decode("utf-8", "replace")
    )


def _remove_tree(path: Path) -> None:
    """Delete the sandbox directory, even if the code left unreadable directories in it."""
    try:
        shutil.rmtree(path)
        return
    except OSError:
        pass
    # Make every real directory (never a symlink's target) searchable and writable, then retry.
    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IRWXU)
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            child = os.path.join(root, name)
            if not os.path.islink(child):
                with contextlib.suppress(OSError):
                    os.chmod(child, stat.S_IRWXU)
    shutil.rmtree(path, ignore_errors=True)
