"""Resource limits and process control for one sandboxed run: the rlimits set between fork
and exec, the wait with its timeout and process and file caps, counting and killing the run's
processes, capturing its output and removing its directory. `sandbox.run_python` drives it.

Both modes (sandbox/sandbox.py) apply these limits to every process of the run:

    RLIMIT_AS           `memory_mb` of address space per process (allocations beyond it
                        raise MemoryError)
    RLIMIT_CPU          ceil(timeout_s) + 1 CPU seconds per process
    RLIMIT_NPROC        the user's current task count + `max_procs` + a few (see below; left
                        unset where /proc cannot count the user's tasks)
    RLIMIT_FSIZE        `file_mb` per file written, stdout/stderr included (writes beyond it
                        fail with EFBIG)
    RLIMIT_NOFILE       `max_open_files` descriptors
    RLIMIT_CORE         0: no core dumps

The parent waits at most `timeout_s` of wall time and then kills the run; it also kills
whatever is left after a normal exit. Output is captured in unlinked temporary files (so it
is bounded by RLIMIT_FSIZE) and kept up to 32 KiB per stream (head and tail).

Where the run has a cgroup of its own (sandbox/cgroups.py), the kernel caps its tasks there
(`pids.max`: `max_procs`, plus bwrap's two processes) and `_supervise` kills the run as soon as
the cgroup has refused a fork (`pids.events`), checked every few milliseconds. As root the run
also gets a uid of its own (sandbox.py), so that RLIMIT_NPROC applies; it is set a few tasks
above the cgroup's cap, so that the cgroup refuses first. Without a cgroup, the poller is all
that ends the run as root when the code cannot run as another uid (the kernel ignores
RLIMIT_NPROC for root): it checks the system task count every few milliseconds, then counts
the run's processes exactly, and kills the run once it holds more than `max_procs`; a fork
bomb may exceed the cap between two looks.

An isolated run's tmpfs mounts are also watched from outside (`_DiskWatch`): at most 256
files per MiB of each mount (a tmpfs does not count empty files against its size) and, with
a bwrap older than 0.8 that lacks `--size`, at most its size in bytes.

Implementation note: limits are applied in `preexec_fn`, which CPython documents as unsafe
when the parent has other threads (the child could deadlock before exec). Here the
preexec function calls only `setrlimit`, `prctl` and `unshare`; should a child ever hang
there, the timeout kills it and the item scores 0.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

MARKER_ENV = "TRINITY_SANDBOX_RUN"
OUTPUT_KEEP_BYTES = 32 * 1024
FILES_PER_MB = 256  # the file-count cap: one 4 KiB page per file on average
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_POLL_MIN_S = 0.002
_POLL_MAX_S = 0.05


def _child_env(home: str, marker: str, path: str, marker_env: str = MARKER_ENV) -> dict[str, str]:
    """All the environment the code gets: no variable of ours (API keys) reaches it.
    `marker_env` (sandbox.MARKER_ENV) names the variable that marks the run's processes."""
    return {"PATH": path, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            marker_env: marker}


def _shm_mb(disk_mb: int) -> int:
    """The size of the run's /dev/shm (POSIX semaphores and shared memory, for multiprocessing)."""
    return max(1, disk_mb // 8)


class _DiskWatch:
    """Reads the run's tmpfs mounts (/tmp: `disk_mb`, /dev/shm: `_shm_mb(disk_mb)`) from outside,
    through /proc/PID/root of the namespace's init: `over()` is True once one holds more files
    than FILES_PER_MB per MiB of its size, or, when `polled_bytes` (bwrap without `--size`), more
    bytes than its size."""

    def __init__(self, bwrap_pid: int, ready: str, disk_mb: int, polled_bytes: bool) -> None:
        self.bwrap_pid = bwrap_pid
        self.ready = ready  # exists under the root only once bwrap has set the sandbox up
        self.caps = [(mount, mb * FILES_PER_MB, mb * 1024 * 1024 if polled_bytes else None)
                     for mount, mb in (("/tmp", disk_mb), ("/dev/shm", _shm_mb(disk_mb)))]
        self.root: str | None = None

    def over(self) -> bool:
        if self.root is None:
            for child in _children(self.bwrap_pid):
                root = f"/proc/{child}/root"
                with contextlib.suppress(OSError):
                    if os.path.exists(root + self.ready):
                        self.root = root
            if self.root is None:
                return False
        for mount, max_files, max_bytes in self.caps:
            try:
                st = os.statvfs(self.root + mount)
            except OSError:
                continue
            if st.f_files and st.f_files - st.f_ffree > max_files:
                return True
            if max_bytes is not None and (st.f_blocks - st.f_bfree) * st.f_frsize > max_bytes:
                return True
        return False


# --------------------------------------------------------------------------- limits


def _clamped(limits: dict[int, int]) -> dict[int, int]:
    """Each limit lowered to the current hard limit, which an unprivileged process cannot raise."""
    out = {}
    for which, value in limits.items():
        _, hard = resource.getrlimit(which)
        out[which] = value if hard == resource.RLIM_INFINITY else min(value, hard)
    return out


def _limiter(limits: dict[int, int], cut_network: bool, enter: Callable[[], None] | None = None,
             uid: int | None = None) -> Callable[[], None]:
    """The preexec function: runs in the child between fork and exec. In order: `enter` (the
    run's cgroup, so that everything after, the code's first instruction included, is held by
    it), the limits, the network cut, the switch to real, effective and saved `uid` (and gid;
    no supplementary groups) and the parent-death signal (a change of uid clears it)."""
    libc = _libc()
    unshare = libc.unshare if libc is not None and cut_network else None
    prctl = libc.prctl if libc is not None else None

    def apply() -> None:
        if enter is not None:
            enter()
        for which, value in limits.items():
            resource.setrlimit(which, (value, value))
        if unshare is not None:
            unshare(_CLONE_NEWNET)  # best effort: a failure leaves the network as it was
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # trinity dies: so does the run

    return apply


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.unshare, libc.prctl  # noqa: B018  (both exist on Linux; fail here, not in the child)
    except (OSError, AttributeError):
        return None
    return libc


# --------------------------------------------------------------------------- supervision


def _supervise(
    proc: subprocess.Popen[bytes],
    timeout_s: float,
    max_procs: int,
    count: Callable[[], int],
    disk: _DiskWatch | None,
    at_cap: Callable[[], bool] | None = None,
) -> str | None:
    """Wait for `proc` to exit; return why it had to be killed ("timeout", "processes",
    "disk") or None. `at_cap()`, where the kernel caps the run's processes (its cgroup),
    says whether a fork was refused for the cap; else `count()`, the number of the run's
    processes, is taken whenever the machine's task count grew by more than `max_procs`.

    The child is not reaped here (see `_exited`), so its pid, which is also the process
    group id, cannot be reused before it is signalled.
    """
    deadline = time.monotonic() + timeout_s
    baseline = _system_tasks()
    interval = _POLL_MIN_S
    with _exit_waiter(proc.pid) as wait:
        return _police(proc, deadline, max_procs, count, disk, at_cap, baseline, interval, wait)


def _police(proc: subprocess.Popen[bytes], deadline: float, max_procs: int, count: Callable[[], int],
            disk: _DiskWatch | None, at_cap: Callable[[], bool] | None, baseline: int | None, interval: float,
            wait: Callable[[float], None]) -> str | None:
    while not _exited(proc.pid):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        if at_cap is not None:
            if at_cap():
                return "processes"
        elif (total := _system_tasks()) is not None and baseline is not None and total - baseline > max_procs:
            in_run = count()
            if in_run > max_procs:
                return "processes"
            baseline = total - in_run  # the growth was elsewhere on the machine
        if disk is not None and disk.over():
            return "disk"
        wait(min(interval, remaining))
        interval = min(interval * 2, _POLL_MAX_S)
    return None


@contextlib.contextmanager
def _exit_waiter(pid: int) -> Iterator[Callable[[float], None]]:
    """A function that sleeps up to its argument in seconds, returning early once child `pid`
    exits (through a pidfd, Linux 5.3+; elsewhere it just sleeps)."""
    try:
        fd = os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        yield time.sleep
        return
    try:
        yield lambda seconds: select.select([fd], [], [], seconds) and None
    finally:
        os.close(fd)


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


def _stat_fields(pid: int) -> list[bytes]:
    """/proc/PID/stat after the command name: state, ppid, pgrp, ...; [] if unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _group_size(pgid: int) -> int:
    count = 0
    for pid in _proc_pids():
        fields = _stat_fields(pid)
        if len(fields) > 2 and int(fields[2]) == pgid:
            count += 1
    return count


def _children(parent: int) -> list[int]:
    out = []
    for pid in _proc_pids():
        fields = _stat_fields(pid)
        if len(fields) > 1 and int(fields[1]) == parent:
            out.append(pid)
    return out


def _descendants(root: int) -> list[int]:
    """Every live descendant of `root` (setsid does not change a parent; orphans in a PID
    namespace are adopted by its init, itself a descendant)."""
    kids: dict[int, list[int]] = {}
    for pid in _proc_pids():
        fields = _stat_fields(pid)
        if len(fields) > 1:
            kids.setdefault(int(fields[1]), []).append(pid)
    out, todo = [], [root]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _sandbox_size(bwrap_pid: int) -> int:
    """Processes of an isolated run: the outer bwrap's descendants but the namespace's init."""
    return max(0, len(_descendants(bwrap_pid)) - 1)


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


def _kill_sandbox(proc: subprocess.Popen[bytes]) -> None:
    """End an isolated run: SIGKILL the PID namespace's init (`isolation._INIT`), whose death makes the
    kernel kill every process in the namespace and wait for them before the outer bwrap (our
    child) sees it exit; then kill and reap the outer bwrap. After a normal exit the init has
    already gone the same way."""
    if not _exited(proc.pid):
        for pid in _children(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    _kill_group(proc)


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
