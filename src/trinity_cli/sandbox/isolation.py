"""Whether model-written code can run isolated here (Linux, bubblewrap able to create
namespaces), the bwrap command line that isolates it, and the strict mode that requires it.

**Isolated** (see sandbox/sandbox.py for the other mode). The code runs in new user, PID, network,
IPC, UTS (and, where possible, cgroup) namespaces, as uid/gid 65534 with no capabilities, in
a new session, and dies with trinity (`--die-with-parent`, plus PR_SET_PDEATHSIG on bwrap
itself). Its file system is built from nothing:

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
each mount (polled: a tmpfs does not count empty files against its size; limits.py). User
namespaces are disabled inside (`--disable-userns`, bwrap >= 0.8), so the code cannot mount
a tmpfs of its own.

Requiring isolation: `require_isolation()` raises `SandboxUnavailable` where there is none,
or where runs get no cgroup (sandbox/cgroups.py);
`strict_from_env()` reads `TRINITY_SANDBOX=strict` (see sandbox/sandbox.py).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from trinity_cli.errors import ConfigError, SandboxUnavailable
from trinity_cli.sandbox import cgroups
from trinity_cli.sandbox.limits import _child_env, _remove_tree, _shm_mb

SANDBOX_ENV = "TRINITY_SANDBOX"
SANDBOX_UID = 65534  # "nobody": the code's uid and gid inside the namespaces
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
_TOP_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The PID namespace's init: a shell that runs Python (`$0`) and exits with its status. When it
# exits, the kernel kills every process left in the namespace and waits for them *before* the
# outer bwrap sees it exit; bwrap's own init would instead report the program's exit at once
# and let the namespace die afterwards, racing our "nothing is left" guarantee. (A shell, not
# Python itself, is pid 1, because signals the code sends to pid 1 from inside are ignored.)
_INIT = ("/bin/sh", "-c", '"$0" -I -B main.py; exit $?')


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


def require_isolation() -> Isolation:
    """`isolation()`, or `SandboxUnavailable` (one line naming the cause and the fix) if there
    is none, or if runs get no cgroup to cap their processes and memory (sandbox/cgroups.py)."""
    iso = isolation()
    if iso.bwrap is None:
        raise SandboxUnavailable(f"the strict code sandbox is required, but {iso.reason}", hint=iso.hint)
    why = cgroups.probe()
    if why is not None:
        raise SandboxUnavailable(f"the strict code sandbox is required, but {why}", hint=cgroups.CGROUP_HINT)
    return iso


def strict_from_env() -> bool:
    """Whether TRINITY_SANDBOX asks for the strict sandbox ("strict"; "auto" or unset: no)."""
    value = os.environ.get(SANDBOX_ENV, "").strip().lower()
    if value in ("", "auto"):
        return False
    if value == "strict":
        return True
    raise ConfigError(f"{SANDBOX_ENV}={value!r} is not a sandbox mode", hint="use auto or strict")


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
