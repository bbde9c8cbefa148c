"""Run untrusted Python (code a model wrote) in a separate, isolated, resource-limited process.

`run_python(source)` runs `source` as `main.py` with `python -I -B main.py` in a fresh
directory and returns a `SandboxResult` (exit status, captured output, why it was killed).
It works in one of two modes, chosen once per process by `isolation()`:

**Isolated** (Linux with bubblewrap, `bwrap`, able to create namespaces). The code runs in
new user, PID, network, IPC, UTS (and, where possible, cgroup) namespaces, as uid/gid 65534
with no capabilities, in a new session, and dies with trinity (`--die-with-parent`, plus
PR_SET_PDEATHSIG on bwrap itself). Its file system is built from nothing:

    /usr, /bin, /lib*       the host's, read-only
    Python's prefixes       sys.prefix, sys.base_prefix (and exec prefixes), read-only
    /etc                    only ld.so.cache, ld.so.conf(.d) and localtime, read-only
    /proc, /dev             its own: only its own processes; null, zero, random, ... (read-only)
    /tmp                    a private tmpfs of `disk_mb` MiB, the only writable place with
                            /dev/shm; the code's directory (cwd, HOME, TMPDIR) is inside it,
                            holding main.py (read-only)
    /dev/shm                a private tmpfs of disk_mb / 8 MiB (at least 1), so that
                            multiprocessing's semaphores work
    /                       read-only; nothing else of the host exists (no /home, /root,
                            /etc/shadow, the host's /tmp, sockets, ...)

Hence the code cannot read the parent's environment or any file that is not listed, cannot
write outside its tmpfs, cannot signal or see host processes, and has no network (only its
own loopback). Every process it starts, including ones that call `setsid` or clear their
environment, is killed when the run ends: the PID namespace dies with its first process.
What it writes is capped in total at `disk_mb` MiB plus /dev/shm's eighth (tmpfs `--size`;
with a bwrap older than 0.8 that lacks `--size`, by polling the mounts and killing the run,
which may overshoot by what it writes in one polling interval) and at 256 files per MiB of
each mount (polled: a tmpfs does not count empty files against its size). User namespaces
are disabled inside (`--disable-userns`, bwrap >= 0.8), so the code cannot mount a tmpfs of
its own.

**Limits only** (macOS, no `bwrap`, or bwrap unable to create namespaces, as in some
containers). The code runs in a new session, in a temporary directory of the host's, with a
minimal environment (no API keys), a separate network namespace when trinity runs as root,
and the limits below. It can read and write any file its user can and use the network
(non-root), and a process that leaves the session *and* clears its environment can outlive
the run. Each process that starts code in this mode says so once, through this module's
logger (the CLI prints it as one line naming the install command).

Both modes apply these limits to every process of the run:

    RLIMIT_AS           `memory_mb` of address space per process (allocations beyond it
                        raise MemoryError)
    RLIMIT_CPU          ceil(timeout_s) + 1 CPU seconds per process
    RLIMIT_NPROC        the user's current task count + `max_procs` (see "as root"; left
                        unset where /proc cannot count the user's tasks)
    RLIMIT_FSIZE        `file_mb` per file written, stdout/stderr included (writes beyond it
                        fail with EFBIG)
    RLIMIT_NOFILE       `max_open_files` descriptors
    RLIMIT_CORE         0: no core dumps

The parent waits at most `timeout_s` of wall time and then kills the run; it also kills
whatever is left after a normal exit. Output is captured in unlinked temporary files (so it
is bounded by RLIMIT_FSIZE) and kept up to 32 KiB per stream (head and tail).

As root (how CI runs) the kernel ignores RLIMIT_NPROC. The sandbox therefore also counts the
run's processes while it waits (a cheap check of the system task count every few
milliseconds, then an exact count) and kills the run once it holds more than `max_procs`; a
fork bomb is stopped within one polling interval (at most 50 ms), though it may briefly
exceed the cap.

Requiring isolation: `run_python(..., strict=True)`, or `TRINITY_SANDBOX=strict` in the
environment, refuses to run code in the limits-only mode (`SandboxUnavailable`). A code task
item asks for it with `"sandbox": "strict"` in its reference, a pool with `sandbox: strict`.

Implementation note: limits are applied in `preexec_fn`, which CPython documents as unsafe
when the parent has other threads (the child could deadlock before exec). Here the
preexec function calls only `setrlimit`, `prctl` and `unshare`; should a child ever hang
there, the timeout kills it and the item scores 0.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from trinity_cli.errors import ConfigError, SandboxUnavailable

log = logging.getLogger(__name__)

MARKER_ENV = "TRINITY_SANDBOX_RUN"
SANDBOX_ENV = "TRINITY_SANDBOX"
OUTPUT_KEEP_BYTES = 32 * 1024
FILES_PER_MB = 256  # the file-count cap: one 4 KiB page per file on average
SANDBOX_UID = 65534  # "nobody": the code's uid and gid inside the namespaces
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_POLL_MIN_S = 0.002
_POLL_MAX_S = 0.05
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
_TOP_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The PID namespace's init: a shell that runs Python (`$0`) and exits with its status. When it
# exits, the kernel kills every process left in the namespace and waits for them *before* the
# outer bwrap sees it exit; bwrap's own init would instead report the program's exit at once
# and let the namespace die afterwards, racing our "nothing is left" guarantee. (A shell, not
# Python itself, is pid 1, because signals the code sends to pid 1 from inside are ignored.)
_INIT = ("/bin/sh", "-c", '"$0" -I -B main.py; exit $?')


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


@dataclass(frozen=True)
class Isolation:
    """Whether code can run isolated here: `bwrap` is its path when it can, else None and
    `reason` says why not and `hint` what to do about it. `tmpfs_size`: bwrap has `--size`
    (0.8+); `disable_userns`: bwrap has `--disable-userns` (0.8+)."""

    bwrap: str | None
    reason: str = ""
    hint: str = ""
    tmpfs_size: bool = False
    disable_userns: bool = False


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
        if iso.bwrap is not None:
            inner = f"/tmp/trinity-run-{marker[:16]}"
            env = _child_env(inner, marker, path=f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin")
            argv = [*_bwrap_argv(iso, main, inner, env, disk_mb), *_INIT, sys.executable]
            cwd, popen_env = workdir, env
            preexec = _limiter(_clamped(limits), cut_network=False)
        else:
            env = _child_env(str(workdir), marker, path=os.environ.get("PATH", os.defpath))
            argv = [sys.executable, "-I", "-B", "main.py"]
            cwd, popen_env = workdir, env
            preexec = _limiter(_clamped(limits), cut_network=is_root)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=popen_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                close_fds=True,
                preexec_fn=preexec,
            )
            try:
                if iso.bwrap is not None:
                    watch = _DiskWatch(proc.pid, f"{inner}/main.py", disk_mb, polled_bytes=not iso.tmpfs_size)
                    killed_for = _supervise(proc, timeout_s, max_procs, lambda: _sandbox_size(proc.pid), watch)
                else:
                    killed_for = _supervise(proc, timeout_s, max_procs, lambda: _group_size(proc.pid), None)
            finally:
                if iso.bwrap is not None:
                    _kill_sandbox(proc)
                else:
                    _kill_group(proc)
                    _kill_marked(marker)
            duration = time.monotonic() - start
            stdout, stderr = _read_capped(out), _read_capped(err)
    finally:
        _remove_tree(workdir)
    returncode = proc.returncode
    if iso.bwrap is not None and returncode is not None and 128 < returncode < 128 + 65:
        returncode = 128 - returncode  # bwrap reports a child killed by signal N as 128 + N
    if killed_for == "processes":
        stderr += f"\n[sandbox] killed: more than {max_procs} processes\n"
    elif killed_for == "timeout":
        stderr += f"\n[sandbox] killed: still running after {timeout_s:g} s\n"
    elif killed_for == "disk":
        stderr += f"\n[sandbox] killed: wrote more than {disk_mb} MiB or {disk_mb * FILES_PER_MB} files\n"
    return SandboxResult(
        passed=killed_for is None and returncode == 0,
        returncode=returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=killed_for == "timeout",
        killed_for=killed_for,
        duration_s=duration,
        isolated=iso.bwrap is not None,
    )


def require_isolation() -> Isolation:
    """`isolation()`, or `SandboxUnavailable` (one line naming the cause and the fix) if none."""
    iso = isolation()
    if iso.bwrap is None:
        raise SandboxUnavailable(f"the strict code sandbox is required, but {iso.reason}", hint=iso.hint)
    return iso


def strict_from_env() -> bool:
    """Whether TRINITY_SANDBOX asks for the strict sandbox ("strict"; "auto" or unset: no)."""
    value = os.environ.get(SANDBOX_ENV, "").strip().lower()
    if value in ("", "auto"):
        return False
    if value == "strict":
        return True
    raise ConfigError(f"{SANDBOX_ENV}={value!r} is not a sandbox mode", hint="use auto or strict")


# --------------------------------------------------------------------------- isolation


def isolation() -> Isolation:
    """Whether code runs isolated here; bwrap is looked up on PATH and probed once per path."""
    if not sys.platform.startswith("linux"):
        return Isolation(None, "bubblewrap (bwrap) is Linux-only",
                         "for isolation run trinity in a Linux VM or container")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Isolation(None, "bubblewrap (bwrap) is not on PATH", _install_hint())
    return _probe(bwrap)


@functools.lru_cache(maxsize=8)
def _probe(bwrap: str) -> Isolation:
    """Run an empty program the way `run_python` would; an Isolation saying whether it worked."""
    try:
        helptext = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return Isolation(None, f"bwrap does not run ({exc})", _install_hint())
    iso = Isolation(bwrap, tmpfs_size="--size" in helptext, disable_userns="--disable-userns" in helptext)
    workdir = Path(tempfile.mkdtemp(prefix="trinity-sandbox-probe-"))
    try:
        main = workdir / "main.py"
        main.write_text("", encoding="utf-8")
        inner = "/tmp/trinity-probe"
        env = _child_env(inner, "probe", path="/usr/bin:/bin")
        argv = [*_bwrap_argv(iso, main, inner, env, 1), *_INIT, sys.executable]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                                  env=env, start_new_session=True)
        except (OSError, subprocess.SubprocessError) as exc:
            return Isolation(None, f"bwrap could not start ({exc})", _install_hint())
    finally:
        _remove_tree(workdir)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        why = lines[-1].strip() if lines else f"exit status {done.returncode}"
        return Isolation(None, f"bwrap cannot create its sandbox here ({why})",
                         "allow unprivileged user namespaces (README, Troubleshooting)")
    return iso


def _install_hint() -> str:
    for tool, command in (("apt-get", "sudo apt-get install bubblewrap"), ("dnf", "sudo dnf install bubblewrap"),
                          ("pacman", "sudo pacman -S bubblewrap"), ("zypper", "sudo zypper install bubblewrap"),
                          ("apk", "sudo apk add bubblewrap")):
        if shutil.which(tool):
            return f"install it: {command}"
    return "install the bubblewrap package (e.g. sudo apt-get install bubblewrap)"


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


def _child_env(home: str, marker: str, path: str) -> dict[str, str]:
    """All the environment the code gets: no variable of ours (API keys) reaches it."""
    return {"PATH": path, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            MARKER_ENV: marker}


def _python_dirs() -> list[str]:
    """The directories the interpreter needs (venv and base installation), outermost first."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    dirs: list[str] = []
    for path in sorted({os.path.realpath(p) for p in candidates} | candidates, key=len):
        if not os.path.isdir(path) or path in ("/", "/usr") or path.startswith("/usr/"):
            continue
        if any(path == d or path.startswith(d + "/") for d in dirs):
            continue
        dirs.append(path)
    return dirs


def _bwrap_argv(iso: Isolation, main: Path, inner: str, env: dict[str, str], disk_mb: int) -> list[str]:
    """bwrap and its options, up to the command (see the module docstring)."""
    assert iso.bwrap is not None
    argv = [iso.bwrap, "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    if iso.disable_userns:
        argv.append("--disable-userns")
    argv += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
             "--hostname", "sandbox", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--as-pid-1",
             "--ro-bind", "/usr", "/usr"]
    for top in _TOP_DIRS:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for path in _ETC_FILES:
        argv += ["--ro-bind-try", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    for mount, mb in (("/dev/shm", _shm_mb(disk_mb)), ("/tmp", disk_mb)):
        if iso.tmpfs_size:
            argv += ["--size", str(mb * 1024 * 1024)]
        argv += ["--tmpfs", mount]
    argv += ["--dir", inner, "--ro-bind", str(main), f"{inner}/main.py", "--chdir", inner]
    for path in _python_dirs():  # after /tmp's tmpfs, which would hide a Python living under /tmp
        argv += ["--ro-bind", path, path]
    argv += ["--remount-ro", "/dev", "--remount-ro", "/", "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return [*argv, "--"]


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


def _limiter(limits: dict[int, int], cut_network: bool) -> Callable[[], None]:
    """The preexec function: runs in the child between fork and exec."""
    libc = _libc()
    unshare = libc.unshare if libc is not None and cut_network else None
    prctl = libc.prctl if libc is not None else None

    def apply() -> None:
        for which, value in limits.items():
            resource.setrlimit(which, (value, value))
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # trinity dies: so does the run
        if unshare is not None:
            unshare(_CLONE_NEWNET)  # best effort: a failure leaves the network as it was

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
) -> str | None:
    """Wait for `proc` to exit; return why it had to be killed ("timeout", "processes",
    "disk") or None. `count()` is the number of the run's processes.

    The child is not reaped here (see `_exited`), so its pid, which is also the process
    group id, cannot be reused before it is signalled.
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
            in_run = count()
            if in_run > max_procs:
                return "processes"
            baseline = total - in_run  # the growth was elsewhere on the machine
        if disk is not None and disk.over():
            return "disk"
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
    """End an isolated run: SIGKILL the PID namespace's init (`_INIT`), whose death makes the
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
