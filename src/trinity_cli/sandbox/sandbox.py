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
and the limits below. It can read and write any file its user can (as root: the run's own
uid can) and use the network (non-root), and, where the run gets no cgroup, a process that
leaves the session *and* clears its environment can outlive the run. Each process that starts
code in this mode says so once, through this module's logger (the CLI prints it as one line
naming the install command).

Both modes limit every process of the run: address space (`memory_mb`), CPU time, processes
(`max_procs`), file size (`file_mb`), open files, no core dumps; the run is killed after
`timeout_s` of wall time, and output is kept up to 32 KiB per stream. The details are in
limits.py's docstring.

Both modes also give each run a cgroup of its own where the kernel allows it (root, or a
delegated cgroup v2: sandbox/cgroups.py), entered before the code's first instruction: it caps
the run's tasks at `max_procs` (the run is killed once a fork is refused) and its memory as a
whole at `memory_mb` plus its tmpfs mounts (`killed_for="memory"` when the kernel killed a
process for it), and every process of the run is killed through it before `run_python`
returns. As root the code runs as a uid of its own (from systemd's dynamic-user range), so
that RLIMIT_NPROC applies too, where that uid can start Python (not when Python lives in a
directory only root can enter, such as /root). Where no cgroup can be made, the poller is the
last resort, and each process that runs code says so once through this module's logger.

Requiring isolation: `run_python(..., strict=True)`, or `TRINITY_SANDBOX=strict` in the
environment, refuses to run code in the limits-only mode or without a cgroup of its own
(`SandboxUnavailable`). A code task item asks for it with `"sandbox": "strict"` in its
reference, a pool with `sandbox: strict`.
"""

from __future__ import annotations

import contextlib
import functools
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

from trinity_cli.errors import SandboxUnavailable
from trinity_cli.sandbox.cgroups import CGROUP_HINT, CgroupUnavailable, RunCgroup
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
    _shm_mb,
    _supervise,
    _user_tasks,
)

log = logging.getLogger(__name__)
_NPROC_SLACK = 4  # RLIMIT_NPROC above the cap: see _rlimits


@dataclass(frozen=True)
class SandboxResult:
    """How a sandboxed run ended.

    `passed` is True when the process exited with status 0 before the timeout.
    `returncode` is the exit status, negative for a signal (-9: killed), None if unknown.
    (Isolated, an exit status above 128 is read as the signal it stands for, as shells do.)
    `killed_for` is "timeout", "processes" (more than `max_procs` processes), "disk" (more
    than `disk_mb` written or too many files, where that is enforced by polling), "memory"
    (the kernel killed a process for the run's memory cap), "unkillable" (processes of the
    run could not all be ended; its cgroup is left aside) or None.
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
    strict = strict or strict_from_env()
    iso = require_isolation() if strict else isolation()
    if iso.bwrap is None:
        _note_fallback(iso)
    marker = secrets.token_hex(12)
    killed_for, started, workdir, cgroup, uid = None, False, None, None, None
    try:
        uid = _take_uid(iso)
        cgroup = _run_cgroup(iso, memory_mb, max_procs, disk_mb, strict)
        workdir = Path(tempfile.mkdtemp(prefix="trinity-sandbox-"))
        main = workdir / "main.py"
        main.write_text(source, encoding="utf-8", errors="replace")
        if uid is not None:
            os.chown(workdir, uid, uid)  # the code's own directory (limits-only: its cwd)
            main.chmod(0o644)
        limits = _rlimits(iso, timeout_s, memory_mb, max_procs, file_mb, max_open_files, uid)
        argv, env, preexec, inner = _command(iso, main, marker, limits, disk_mb, cgroup, uid)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            start = time.monotonic()
            proc = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True, close_fds=True, preexec_fn=preexec)
            started = True
            killed_for = _watch(proc, iso, inner, marker, timeout_s, max_procs, disk_mb, cgroup)
            duration = time.monotonic() - start
            stdout, stderr = _read_capped(out), _read_capped(err)
    finally:
        if cgroup is not None and not started:
            cgroup.end(reuse=True)
        if workdir is not None:
            _remove_tree(workdir)
        _give_back_uid(uid, clean=killed_for != "unkillable")
    returncode = proc.returncode
    if iso.bwrap is not None and returncode is not None and 128 < returncode < 128 + 65:
        returncode = 128 - returncode  # bwrap reports a child killed by signal N as 128 + N
    stderr += _killed_note(killed_for, timeout_s, max_procs, disk_mb)
    return SandboxResult(passed=killed_for is None and returncode == 0, returncode=returncode, stdout=stdout,
                         stderr=stderr, timed_out=killed_for == "timeout", killed_for=killed_for,
                         duration_s=duration, isolated=iso.bwrap is not None)


def _run_cgroup(iso: Isolation, memory_mb: int, max_procs: int, disk_mb: int, strict: bool) -> RunCgroup | None:
    """The run's cgroup: `max_procs` tasks (plus bwrap's two), and `memory_mb` plus what its
    tmpfs mounts may hold in all; None where there is none (said once per process; strict
    mode refuses)."""
    pids_max = max_procs + (2 if iso.bwrap is not None else 0)
    memory_bytes = (memory_mb + disk_mb + _shm_mb(disk_mb)) * 1024 * 1024
    try:
        return RunCgroup.create(pids_max, memory_bytes)
    except CgroupUnavailable as exc:
        if strict:
            raise SandboxUnavailable(f"the strict code sandbox is required, but {exc}", hint=CGROUP_HINT) from None
        _note_uncapped(str(exc))
        return None


def _rlimits(iso: Isolation, timeout_s: float, memory_mb: int, max_procs: int, file_mb: int,
             max_open_files: int, uid: int | None = None) -> dict[int, int]:
    """The resource limits of one run (the process count only where it can be counted: as
    root, or with the user's tasks known; the user is `uid` where the run switches to it)."""
    is_root = os.geteuid() == 0 and uid is None
    limits = {
        resource.RLIMIT_AS: memory_mb * 1024 * 1024,
        resource.RLIMIT_CPU: math.ceil(timeout_s) + 1,
        resource.RLIMIT_FSIZE: file_mb * 1024 * 1024,
        resource.RLIMIT_NOFILE: max_open_files,
        resource.RLIMIT_CORE: 0,
    }
    user_tasks = None if is_root else _user_tasks(os.getuid() if uid is None else uid)
    if is_root or user_tasks is not None:
        # bwrap itself takes two processes (the outer one and the namespace's init). A few more
        # than the cap, so that what refuses a fork first is the run's cgroup, which the
        # sandbox watches, or without one a count above `max_procs` that the poller can see
        # (it looks only once the machine's task count has grown by more than `max_procs`).
        limits[resource.RLIMIT_NPROC] = max_procs + _NPROC_SLACK + (user_tasks or 0) + (2 if iso.bwrap else 0)
    return limits


def _command(iso: Isolation, main: Path, marker: str, limits: dict[int, int], disk_mb: int,
             cgroup: RunCgroup | None = None,
             uid: int | None = None) -> tuple[list[str], dict[str, str], Callable[[], None], str]:
    """(argv, environment, pre-exec function, the run's directory inside the jail) of a run of
    `main`: under bubblewrap when `iso` has it, else Python isolated in its work directory
    (the network cut there too when root can); in `cgroup` and as `uid` where given."""
    workdir = main.parent
    enter = cgroup.enter if cgroup is not None else None
    if iso.bwrap is not None:
        inner = f"/tmp/trinity-run-{marker[:16]}"
        env = _child_env(inner, marker, path=f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
                         marker_env=MARKER_ENV)
        argv = [*_bwrap_argv(iso, main, inner, env, disk_mb), *_INIT, sys.executable]
        return argv, env, _limiter(_clamped(limits), cut_network=False, enter=enter, uid=uid), inner
    env = _child_env(str(workdir), marker, path=os.environ.get("PATH", os.defpath), marker_env=MARKER_ENV)
    argv = [sys.executable, "-I", "-B", "main.py"]
    return argv, env, _limiter(_clamped(limits), cut_network=os.geteuid() == 0, enter=enter, uid=uid), str(workdir)


def _watch(proc: subprocess.Popen, iso: Isolation, inner: str, marker: str, timeout_s: float, max_procs: int,
           disk_mb: int, cgroup: RunCgroup | None = None) -> str | None:
    """Police a started run to its end (what killed it, or None), then kill whatever of it is
    left: through its cgroup where it has one, which is then checked empty ("unkillable" if
    it cannot be emptied), else through the PID namespace or the process group and marker."""
    killed_for = None
    try:
        disk = (_DiskWatch(proc.pid, f"{inner}/main.py", disk_mb, polled_bytes=not iso.tmpfs_size)
                if iso.bwrap is not None else None)
        if cgroup is not None:
            killed_for = _supervise(proc, timeout_s, max_procs, lambda: 0, disk, at_cap=cgroup.at_cap)
        elif iso.bwrap is not None:
            killed_for = _supervise(proc, timeout_s, max_procs, lambda: _sandbox_size(proc.pid), disk)
        else:
            killed_for = _supervise(proc, timeout_s, max_procs, lambda: _group_size(proc.pid), None)
    finally:
        if cgroup is not None:
            if iso.bwrap is not None:
                # The rest first: the namespace's init then dies while the outer bwrap, its
                # parent, is alive to reap it, rather than as an orphan left to the host's init.
                cgroup.kill(spare=proc.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=1)
            cgroup.kill()
            proc.wait()
            if killed_for is None and cgroup.oom_killed():
                killed_for = "memory"
            if not cgroup.end(reuse=True):
                killed_for = "unkillable"
        elif iso.bwrap is not None:
            _kill_sandbox(proc)
        else:
            _kill_group(proc)
            _kill_marked(marker)
    return killed_for


def _killed_note(killed_for: str | None, timeout_s: float, max_procs: int, disk_mb: int) -> str:
    """The line added to stderr when the sandbox killed the run."""
    if killed_for == "processes":
        return f"\n[sandbox] killed: more than {max_procs} processes\n"
    if killed_for == "timeout":
        return f"\n[sandbox] killed: still running after {timeout_s:g} s\n"
    if killed_for == "memory":
        return "\n[sandbox] killed: the run's processes used more memory than its cap\n"
    if killed_for == "unkillable":
        return "\n[sandbox] processes of the run could not all be ended; their cgroup is left aside\n"
    if killed_for == "disk":
        return f"\n[sandbox] killed: wrote more than {disk_mb} MiB or {disk_mb * FILES_PER_MB} files\n"
    return ""


_UIDS = range(61184, 65520)  # systemd's range for dynamic users: no file of the host is theirs
_uids_taken: set[int] = set()  # in use by a run of this process, or left with processes that survived
_uid_lock = threading.Lock()


def _take_uid(iso: Isolation) -> int | None:
    """As root, a uid of its own for the run (real, effective and saved), so that the kernel
    applies RLIMIT_NPROC to it; None when not root or where such a uid cannot run the code
    here (Python unreadable to it, or bwrap unable to create namespaces for it)."""
    if os.geteuid() != 0 or not _uid_can_run(iso.bwrap, sys.executable):
        return None
    with _uid_lock:
        start = secrets.randbelow(len(_UIDS))
        for i in range(len(_UIDS)):
            uid = _UIDS[(start + i) % len(_UIDS)]
            if uid not in _uids_taken:
                _uids_taken.add(uid)
                return uid
    return None


def _give_back_uid(uid: int | None, clean: bool) -> None:
    """Return `uid` for reuse, unless processes of its run survived (`clean` False)."""
    if uid is not None and clean:
        with _uid_lock:
            _uids_taken.discard(uid)


@functools.lru_cache(maxsize=8)
def _uid_can_run(bwrap: str | None, python: str) -> bool:
    """Whether an unprivileged uid can start `python` (under `bwrap` where given) here."""
    uid = _UIDS[0]
    tries = [[python, "-I", "-S", "-c", "pass"]]  # Python first: a bwrap whose command fails leaves a zombie
    if bwrap is not None:
        # No PID namespace here: its init would be left a zombie, the outer bwrap exiting first.
        tries.append([bwrap, "--unshare-user", "--dev-bind", "/", "/", "--", *tries[0]])
    for argv in tries:
        try:
            done = subprocess.run(argv, cwd="/", stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                                  preexec_fn=_limiter({}, cut_network=False, uid=uid))
        except (OSError, subprocess.SubprocessError) as exc:
            log.debug("sandboxed runs stay root here: uid %d cannot run %s: %s", uid, argv[0], exc)
            return False
        if done.returncode != 0:
            log.debug("sandboxed runs stay root here: uid %d cannot run %s: %s", uid, argv[0], done.stderr[-300:])
            return False
    return True


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


def _note_uncapped(reason: str) -> None:
    """Say once per process (one CLI command) that runs get no cgroup here, and what holds instead."""
    with _noted_lock:
        if "cgroup:" + reason in _noted:
            return
        _noted.add("cgroup:" + reason)
    held = "RLIMIT_NPROC and polling" if os.geteuid() != 0 or _uid_can_run(isolation().bwrap, sys.executable) \
        else "polling"
    log.warning("model-written code runs without a cgroup of its own (%s): fork bombs are contained only by %s "
                "and memory only per process — %s; TRINITY_SANDBOX=strict refuses to run it", reason, held,
                CGROUP_HINT)


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
