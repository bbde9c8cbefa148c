"""The kernel's own caps for one sandboxed run: a cgroup per run that caps its processes
(`pids.max`) and its memory as a whole (`memory.max` / `memory.limit_in_bytes`), that the
run's first process enters before it executes anything, and through which every process of
the run is ended (`cgroup.kill` on v2; freeze, SIGKILL every member, thaw on v1).

Where a run's cgroup is made (`RunCgroup.create`), as a child of trinity's *current* cgroup
(read from /proc/self/cgroup at each run, so that a cgroup trinity is put in also holds its
runs):

    cgroup v2           where the pids controller is enabled for trinity's cgroup's
                        children, or can be: trinity is root or its cgroup is delegated to its
                        user (e.g. `systemd-run --user --scope -p Delegate=yes`); a cgroup that
                        holds processes cannot enable controllers for its children, so trinity
                        then first moves itself into a leaf `trinity-<pid>` of its own cgroup;
                        failing that, under the nearest ancestor that enables pids and that
                        trinity may write to (root under systemd: its slice)
    cgroup v1           the `pids` hierarchy, writable (as root); `memory` and `freezer`
                        hierarchies too where mounted and writable (else the memory is capped
                        per process only, and the run is ended by killing until it is empty)
    neither             no cgroup (`probe()` says why): sandbox.py falls back to polling

A run's cgroup is named `trinity-run-<pid>-<n>`; once empty it is kept for the next run of
the same process (its limits written again, its event counters read afresh) and removed when
the process exits. One that cannot be emptied within `END_WAIT_S` is left in place and never
reused (`end()` returns False; sandbox.py reports the run `killed_for="unkillable"`). Empty
ones left by a trinity process that was killed are removed by the next process that makes one
beside them, when it makes its first and when it exits.

`enclose()` moves the calling process into a new capped cgroup of its own (tests and
scripts/perf/ run fork bombs only inside one).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CGROUP_HINT = ("run trinity as root, or in a cgroup v2 delegated to you: "
               "systemd-run --user --scope -p Delegate=yes trinity ...")
END_WAIT_S = 5.0  # how long `end()` waits for the run's processes to go
_RUN_PREFIX = "trinity-run-"
_counter = itertools.count()
_lock = threading.Lock()
_swept: set[str] = set()
_free: dict[tuple[str, ...], list[RunCgroup]] = {}  # empty run cgroups kept for reuse, by parents


@atexit.register
def _remove_free(under: tuple[str, ...] | None = None) -> None:
    """Remove the run cgroups kept for reuse (only those made under `under`, where given)."""
    with _lock:
        keys = [key for key in _free if under is None or key == under]
        kept = [cgroup for key in keys for cgroup in _free.pop(key)]
    for cgroup in kept:
        cgroup._remove()
    if under is None:  # at exit: also what trinity processes killed meanwhile left behind
        with _lock:
            parents = list(_swept)
        for parent in parents:
            _sweep(Path(parent), again=True)


class CgroupUnavailable(Exception):
    """No cgroup for a run can be made here; the message says why."""


@dataclass(frozen=True)
class _Place:
    """Where run cgroups go: cgroup `version`, and per controller ("pids", "memory", "freezer";
    v2: "unified" for all) the parent directory."""

    version: int
    dirs: dict[str, Path]


# --------------------------------------------------------------------------- where


@functools.lru_cache(maxsize=1)
def _mounts() -> dict[str, tuple[str, str]]:
    """Controller ("pids", ...; "unified" for cgroup2) -> (mount point, mount's root)."""
    found: dict[str, tuple[str, str]] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, point = fields[3], fields[4].replace("\\040", " ")
        if tail[0] == "cgroup2":
            found.setdefault("unified", (point, root))
        elif tail[0] == "cgroup":
            for option in tail[2].split(","):
                if option in ("pids", "memory", "freezer"):
                    found.setdefault(option, (point, root))
    return found


def _own() -> dict[str, str]:
    """Controller ("pids", ...; "unified") -> this process's cgroup path, from /proc/self/cgroup."""
    own: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return own
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            own["unified"] = parts[2]
        for controller in parts[1].split(","):
            if controller in ("pids", "memory", "freezer"):
                own[controller] = parts[2]
    return own


def _directory(mount: tuple[str, str], path: str) -> Path | None:
    point, root = mount
    if root != "/" and not (path == root or path.startswith(root + "/")):
        return None  # our cgroup is outside what is mounted here
    rel = path[len(root):] if root != "/" else path
    directory = Path(point + rel.rstrip("/"))
    return directory if directory.is_dir() else None


def _read(path: Path) -> str:
    """The file's text; "" if it cannot be read."""
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _place() -> _Place:
    """Where this process's runs get their cgroups now; CgroupUnavailable if nowhere."""
    mounts, own = _mounts(), _own()
    if "pids" in mounts and "pids" in own:  # v1's pids hierarchy
        dirs: dict[str, Path] = {}
        for controller in ("pids", "memory", "freezer"):
            if controller in mounts and controller in own:
                directory = _directory(mounts[controller], own[controller])
                if directory is not None and os.access(directory, os.W_OK):
                    dirs[controller] = directory
        if "pids" in dirs:
            return _Place(1, dirs)
        reason_v1 = "cgroup v1's pids hierarchy is not writable (not root)"
    else:
        reason_v1 = "no cgroup v1 pids hierarchy"
    if "unified" in mounts and "unified" in own:
        directory = _directory(mounts["unified"], own["unified"])
        if directory is not None:
            return _Place(2, {"unified": _v2_parent(directory, Path(mounts["unified"][0]))})
    raise CgroupUnavailable(f"{reason_v1}, and no cgroup v2 mounted")


@functools.lru_cache(maxsize=16)
def _v2_parent(directory: Path, top: Path) -> Path:
    """The v2 cgroup whose children get the pids controller: `directory` itself, or its parent
    when `directory` is the leaf this process moved into; moves into such a leaf if needed. As
    a last resort, the nearest ancestor (below the mount point `top`) that already enables
    pids for its children and that this process may write to."""
    leaf = f"trinity-{os.getpid()}"
    if directory.name == leaf and "pids" in _read(directory.parent / "cgroup.subtree_control").split():
        return directory.parent
    if "pids" in _read(directory / "cgroup.subtree_control").split():
        return directory
    try:
        return _v2_enable_here(directory, leaf)
    except CgroupUnavailable:
        for ancestor in directory.parents:
            if not str(ancestor).startswith(str(top)):
                break
            if "pids" in _read(ancestor / "cgroup.subtree_control").split() and os.access(ancestor, os.W_OK):
                return ancestor
        raise


def _v2_enable_here(directory: Path, leaf: str) -> Path:
    if "pids" not in _read(directory / "cgroup.controllers").split():
        raise CgroupUnavailable(f"cgroup v2's pids controller is not available to {directory}")
    if not os.access(directory / "cgroup.subtree_control", os.W_OK):
        raise CgroupUnavailable(f"cgroup {directory} is not delegated to this user")
    if _enable(directory):
        return directory
    # Processes in `directory` keep it from enabling controllers for children: move into a leaf.
    try:
        (directory / leaf).mkdir(exist_ok=True)
        _write(directory / leaf / "cgroup.procs", str(os.getpid()))
    except OSError as exc:
        with contextlib.suppress(OSError):
            (directory / leaf).rmdir()
        raise CgroupUnavailable(f"cannot make a cgroup v2 leaf in {directory} ({exc.strerror})") from None
    if _enable(directory):
        return directory
    with contextlib.suppress(OSError):
        _write(directory / "cgroup.procs", str(os.getpid()))
        (directory / leaf).rmdir()
    raise CgroupUnavailable(f"cgroup {directory} holds other processes: cannot enable its pids controller")


def _enable(directory: Path) -> bool:
    try:
        _write(directory / "cgroup.subtree_control", "+pids")
    except OSError:
        return False
    with contextlib.suppress(OSError):  # memory is welcome, not required
        _write(directory / "cgroup.subtree_control", "+memory")
    return True


def probe() -> str | None:
    """None if runs get a cgroup here, else why not (one line). Makes and removes one cgroup
    the first time for each cgroup this process is in."""
    return _probe(Path("/proc/self/cgroup").read_text() if os.path.exists("/proc/self/cgroup") else "")


@functools.lru_cache(maxsize=16)
def _probe(own: str) -> str | None:
    try:
        cgroup = RunCgroup.create(pids_max=1, memory_bytes=None)
    except CgroupUnavailable as exc:
        return str(exc)
    cgroup.end()
    return None


# --------------------------------------------------------------------------- one run


class RunCgroup:
    """One run's cgroup (one directory per v1 hierarchy, or one v2 directory)."""

    def __init__(self, version: int, dirs: dict[str, Path]) -> None:
        self.version = version
        self.dirs = dirs
        main = dirs["unified"] if version == 2 else dirs["pids"]
        self.main = main
        self.procs_files = [str(d / "cgroup.procs") for d in dict.fromkeys(dirs.values())]
        self.caps: tuple[int, int | None] | None = None
        self._refused = self._oom_kills = 0  # the counters when this run began (a cgroup is reused)

    @classmethod
    def create(cls, pids_max: int, memory_bytes: int | None) -> RunCgroup:
        """A cgroup capped at `pids_max` tasks (threads count) and `memory_bytes` of memory
        (swap included where the kernel can say so), empty: a new one, or one that an earlier
        run of this process left empty (`end(reuse=True)`); CgroupUnavailable if none can be made."""
        place = _place()
        key = tuple(str(d) for d in place.dirs.values())
        with _lock:
            cgroup = _free.get(key, []).pop() if _free.get(key) else None
        if cgroup is None:
            cgroup = cls._make(place, pids_max)
        cgroup._cap(pids_max, memory_bytes)
        return cgroup

    def _cap(self, pids_max: int, memory_bytes: int | None) -> None:
        if self.caps != (pids_max, memory_bytes):
            _write(self.main / "pids.max", str(pids_max))
            if memory_bytes is not None:
                self._cap_memory(memory_bytes)
            self.caps = (pids_max, memory_bytes)
        self._refused, self._oom_kills = self._count("max"), self._count("oom_kill")

    @classmethod
    def _make(cls, place: _Place, pids_max: int) -> RunCgroup:
        name = f"{_RUN_PREFIX}{os.getpid()}-{next(_counter)}"
        made: dict[str, Path] = {}
        try:
            for controller, parent in place.dirs.items():
                _sweep(parent)
                (parent / name).mkdir()
                made[controller] = parent / name
            cgroup = cls(place.version, made)
            _write(cgroup.main / "pids.max", str(pids_max))
        except OSError as exc:
            for directory in made.values():
                with contextlib.suppress(OSError):
                    directory.rmdir()
            raise CgroupUnavailable(f"cannot make a cgroup under {parent} ({exc.strerror})") from None
        return cgroup

    def _cap_memory(self, limit: int) -> None:
        if self.version == 2:
            files = [("memory.max", limit), ("memory.swap.max", 0)]
            directory = self.dirs["unified"]
        elif "memory" in self.dirs:
            files = [("memory.limit_in_bytes", limit), ("memory.memsw.limit_in_bytes", limit)]
            directory = self.dirs["memory"]
        else:
            return
        for filename, value in files:
            if (directory / filename).exists():
                with contextlib.suppress(OSError):
                    _write(directory / filename, str(value))

    @property
    def caps_memory(self) -> bool:
        """Whether the run's memory is capped as a whole."""
        directory = self.dirs.get("unified", self.dirs.get("memory"))
        return directory is not None and (directory / ("memory.max" if self.version == 2
                                                       else "memory.limit_in_bytes")).exists()

    def enter(self) -> None:
        """Move the calling process into this cgroup (run in the child between fork and exec)."""
        for path in self.procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def at_cap(self) -> bool:
        """Whether a fork or thread of the run has been refused for the process cap."""
        return self._count("max") > self._refused

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the run for the memory cap."""
        return self._count("oom_kill") > self._oom_kills

    def _count(self, key: str) -> int:
        """A counter of pids.events ("max") or of the memory events ("oom_kill"); 0 if unknown."""
        if key == "max":
            path: Path | None = self.main / "pids.events"
        else:
            directory = self.dirs.get("unified", self.dirs.get("memory"))
            path = None if directory is None else \
                directory / ("memory.events" if self.version == 2 else "memory.oom_control")
        for line in _read(path).splitlines() if path is not None else []:
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
        return 0

    def pids(self) -> list[int]:
        return [int(p) for p in _read(self.main / "cgroup.procs").split() if p.isdigit()]

    def kill(self, spare: int | None = None) -> None:
        """SIGKILL every process in the cgroup (but `spare`), atomically with respect to fork
        where the kernel can (cgroup.kill, or freezing it first), else repeatedly."""
        if spare is None and self.version == 2 and (self.main / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.main / "cgroup.kill", "1")
                return
        if not self.pids():
            return
        freezer = self._freeze()
        try:
            self._kill_members(spare)
        finally:
            if freezer is not None:
                with contextlib.suppress(OSError):
                    _write(*freezer)

    def _freeze(self) -> tuple[Path, str] | None:
        """Freeze the cgroup (waiting up to 1 s); (file, value) that thaws it, or None."""
        if self.version == 2:
            path, frozen, thawed = self.main / "cgroup.freeze", "1", "0"
        elif "freezer" in self.dirs:
            path, frozen, thawed = self.dirs["freezer"] / "freezer.state", "FROZEN", "THAWED"
        else:
            return None
        try:
            _write(path, frozen)
        except OSError:
            return None
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            state = _read(self.main / "cgroup.events") if self.version == 2 else _read(path)
            if ("frozen 1" in state) if self.version == 2 else state.strip() == "FROZEN":
                break
            time.sleep(0.001)
        return path, thawed

    def _kill_members(self, spare: int | None = None) -> None:
        for pid in self.pids():
            if pid == spare:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def end(self, wait_s: float = END_WAIT_S, reuse: bool = False) -> bool:
        """Kill what is left, wait until the cgroup is empty and remove it (or, `reuse`, keep it
        for a later run of this process); False (and the cgroup left in place, never reused) if
        its processes did not all go within `wait_s`."""
        self.kill()
        deadline = time.monotonic() + wait_s
        pause = 0.0005
        while True:
            if not self.pids() and (self._keep() if reuse else self._remove()):
                return True
            if time.monotonic() > deadline:
                return False
            self._kill_members()  # a v1 run without a freezer may still have been forking
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _keep(self) -> bool:
        with _lock:
            _free.setdefault(tuple(str(d.parent) for d in self.dirs.values()), []).append(self)
        return True

    def _remove(self) -> bool:
        for directory in list(self.dirs.values()):
            try:
                directory.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                return False  # busy: a task not yet released (an unreaped zombie counts)
        return True


def _sweep(parent: Path, again: bool = False) -> None:
    """Remove the empty run cgroups of trinity processes that no longer exist (once per parent,
    unless `again`)."""
    with _lock:
        if str(parent) in _swept and not again:
            return
        _swept.add(str(parent))
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            if not entry.name.startswith(_RUN_PREFIX):
                continue
            owner = entry.name[len(_RUN_PREFIX):].split("-")[0]
            if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)


# --------------------------------------------------------------------------- a cap of one's own


@contextlib.contextmanager
def enclose(pids_max: int, memory_bytes: int | None = None) -> Iterator[RunCgroup]:
    """Run the body with this whole process moved into a new cgroup capped at `pids_max`
    tasks (and `memory_bytes`), a child of its current one; moved back and removed afterwards.
    CgroupUnavailable (why) where none can be made. For tests and measurements that run fork
    bombs: whatever escaped the sandbox would still be held by this cap."""
    cgroup = RunCgroup.create(pids_max, memory_bytes)  # first: on v2 it may move us into a leaf
    mounts, own = _mounts(), _own()
    home = [directory for controller in ("pids", "memory", "freezer", "unified")
            if controller in mounts and controller in own
            and (directory := _directory(mounts[controller], own[controller])) is not None]
    try:
        for procs in cgroup.procs_files:
            _write(Path(procs), str(os.getpid()))
    except OSError as exc:
        _leave(home)
        cgroup.end()
        raise CgroupUnavailable(f"cannot enter a cgroup of its own ({exc.strerror})") from None
    try:
        yield cgroup
    finally:
        _leave(home)
        _v2_parent.cache_clear()
        _remove_free(under=tuple(str(d) for d in cgroup.dirs.values()))  # the runs' cgroups kept in it
        for directory in cgroup.dirs.values():  # a v2 leaf this process moved into, if any
            with contextlib.suppress(OSError):
                (directory / f"trinity-{os.getpid()}").rmdir()
        if os.getpid() in cgroup.pids():
            raise CgroupUnavailable("could not move back out of its own cgroup")
        if not cgroup.end():
            raise CgroupUnavailable(f"processes were left in {cgroup.main} and could not be ended")


def _leave(home: list[Path]) -> None:
    """Move this process back into the cgroups it was in (`home`)."""
    for directory in home:
        with contextlib.suppress(OSError):
            _write(directory / "cgroup.procs", str(os.getpid()))
