"""The kernel's caps on a sandboxed run (issue 85): its cgroup holds an unbounded fork bomb, a
thread bomb and a memory bomb spread over many processes, and nothing of a run is alive after
`run_python` returns (a double-forked orphan, a `setsid` sleeper).

Every bomb runs only inside a protective cgroup of the test's own (`guard`: at most
GUARD_PIDS tasks and GUARD_MEMORY bytes, checked from /proc/self/cgroup before any bomb), so
that a sandbox that failed to hold it could not take the machine down; where none can be made
(not root, no delegated cgroup v2) these tests skip, saying why.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from trinity_cli.errors import SandboxUnavailable
from trinity_cli.sandbox import cgroups, sandbox
from trinity_cli.sandbox.cgroups import CgroupUnavailable, RunCgroup
from trinity_cli.sandbox.isolation import isolation
from trinity_cli.sandbox.sandbox import marked_pids, run_python

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="cgroups are Linux's")

GUARD_PIDS = 300
GUARD_MEMORY = 1536 * 1024 * 1024
MAX_PROCS = 32
MARGIN = 8
ISOLATION = isolation()

FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
THREAD_BOMB = (  # small stacks: the task cap, not the address space, is what stops it
    "import threading, time\n"
    "threading.stack_size(64 * 1024)\n"
    "while True:\n"
    "    try:\n"
    "        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    "    except (RuntimeError, MemoryError):\n"
    "        pass\n"
)


@pytest.fixture(autouse=True)
def _own_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Default sandbox mode, and a marker of this test's own for `marked_pids()`."""
    monkeypatch.delenv("TRINITY_SANDBOX", raising=False)
    monkeypatch.setattr(sandbox, "MARKER_ENV", f"TRINITY_SANDBOX_TEST_{secrets.token_hex(6)}")


def _own_cgroup_file(controller: str, name: str) -> Path | None:
    """A file of this process's current cgroup (v1 hierarchy `controller`, else v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hier, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            candidate = Path(f"/sys/fs/cgroup/{controller}{path}") / name
        elif hier == "0" and controllers == "":
            candidate = Path(f"/sys/fs/cgroup{path}") / name
        else:
            continue
        if candidate.exists():
            return candidate
    return None


@pytest.fixture
def guard() -> Iterator[RunCgroup]:
    """This test process, moved into a capped cgroup of its own for the test's length."""
    with contextlib.ExitStack() as stack:
        try:
            cgroup = stack.enter_context(cgroups.enclose(GUARD_PIDS, GUARD_MEMORY))
        except CgroupUnavailable as exc:
            pytest.skip(f"no protective cgroup can be made here, so no bomb is run: {exc}")
        pids_max = _own_cgroup_file("pids", "pids.max")
        assert pids_max is not None and int(pids_max.read_text()) <= GUARD_PIDS, "not inside the guard"
        yield cgroup


def _tasks(cgroup: RunCgroup) -> int:
    return int((cgroup.main / "pids.current").read_text())


@dataclass
class Watch:
    """While a run goes on: the guard's peak task count, and forks of the test process itself."""

    cgroup: RunCgroup
    peak: int = 0
    forks: int = 0
    fork_errors: list[str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def loop(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, _tasks(self.cgroup))
            try:
                pid = os.posix_spawn("/bin/true", ["true"], {})
                os.waitpid(pid, 0)
                self.forks += 1
            except OSError as exc:
                self.fork_errors.append(str(exc))
            time.sleep(0.001)


def run_watched(guard: RunCgroup, source: str, **options: object) -> tuple[sandbox.SandboxResult, Watch, int]:
    """`run_python(source)`, watched; (result, watch, the guard's tasks before the run)."""
    baseline = _tasks(guard)
    watch = Watch(guard)
    thread = threading.Thread(target=watch.loop)
    thread.start()
    try:
        result = run_python(source, **options)  # type: ignore[arg-type]
    finally:
        watch.done.set()
        thread.join()
    peak_file = guard.main / "pids.peak"
    if peak_file.exists():
        watch.peak = max(watch.peak, int(peak_file.read_text()))
    return result, watch, baseline


def _live_tasks(guard: RunCgroup) -> list[int]:
    """Live processes (not zombies) in the guard or below it, but this test process."""
    pids: list[int] = []
    for root, _dirs, _files in os.walk(guard.main):
        with contextlib.suppress(OSError):
            pids += [int(p) for p in Path(root, "cgroup.procs").read_text().split()]
    return [pid for pid in pids if pid != os.getpid()]


def assert_nothing_left(guard: RunCgroup, baseline: int, mode: str) -> None:
    time.sleep(1)
    assert _live_tasks(guard) == [], "processes of the run are alive 1 s after it returned"
    assert marked_pids() == []
    if mode == "isolated":  # the namespace's end reaps them too; without it, the machine's init does
        assert _tasks(guard) <= baseline, "tasks of the run still count 1 s after it returned"


# --------------------------------------------------------------------------- bombs, inside the guard


@pytest.mark.parametrize("bomb", [FORK_BOMB, THREAD_BOMB], ids=["fork-bomb", "thread-bomb"])
def test_a_bomb_is_held_at_the_cap_and_ended(guard: RunCgroup, mode: str, bomb: str) -> None:
    start = time.monotonic()
    result, watch, baseline = run_watched(guard, bomb, timeout_s=20, max_procs=MAX_PROCS)
    elapsed = time.monotonic() - start
    assert result.killed_for == "processes", result.stderr
    assert elapsed < 5, f"ended {elapsed:.2f} s after it started"
    assert watch.peak - baseline <= MAX_PROCS + MARGIN, f"peak {watch.peak} over a baseline of {baseline}"
    assert watch.fork_errors == [] and watch.forks > 0, "the test process could not fork during the run"
    assert_nothing_left(guard, baseline, mode)


def test_memory_over_many_processes_is_capped_as_a_whole(guard: RunCgroup, mode: str) -> None:
    # 12 processes of 200 MB each, every one under the 256 MB address-space limit: 2.4 GB in all.
    bomb = (
        "import os, time\n"
        "kids = []\n"
        "for _ in range(12):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        block = b'x' * (200 * 1024 * 1024)\n"
        "        time.sleep(2)\n"
        "        os._exit(0)\n"
        "    kids.append(pid)\n"
        "for pid in kids:\n"
        "    os.waitpid(pid, 0)\n"
    )
    memory_file = next((guard.dirs.get(c, guard.main) / name for c, name in
                        (("memory", "memory.max_usage_in_bytes"), ("unified", "memory.peak"))
                        if (guard.dirs.get(c, guard.main) / name).exists()), None)
    if memory_file is None or not guard.caps_memory:
        pytest.skip("the guard cannot measure its memory peak here")
    v1 = memory_file.name.endswith("in_bytes")
    usage = memory_file.with_name("memory.usage_in_bytes" if v1 else "memory.current")
    with contextlib.suppress(OSError):
        memory_file.write_text("0")  # reset the peak where the kernel allows it
    before = int(usage.read_text())
    result, watch, baseline = run_watched(guard, bomb, timeout_s=30, memory_mb=256, max_procs=MAX_PROCS)
    peak = int(memory_file.read_text())
    cap = (256 + 64 + 8) * 1024 * 1024  # memory_mb + the tmpfs mounts (default disk_mb 64, /dev/shm 8)
    assert not result.passed and result.killed_for == "memory", (result.killed_for, result.stderr)
    assert peak - before <= cap + 64 * 1024 * 1024, f"peak {peak >> 20} MiB, {before >> 20} MiB before"
    assert watch.fork_errors == []
    assert_nothing_left(guard, baseline, mode)


@pytest.mark.parametrize("program", ["orphan", "setsid"])
def test_nothing_of_a_run_is_alive_after_it_returns(guard: RunCgroup, mode: str, program: str) -> None:
    seconds = f"{600 + secrets.randbelow(10_000)}.{secrets.randbelow(10**6):06d}"
    setsid = "    os.setsid()\n" if program == "setsid" else ""
    code = (
        "import os\n"
        "if os.fork() == 0:\n"
        + setsid +
        "    if os.fork() == 0:\n"
        f"        os.execve('/bin/sleep', ['sleep', {seconds!r}], {{}})\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "print('spawned', flush=True)\n"
    )
    result, watch, baseline = run_watched(guard, code, timeout_s=20)
    assert result.passed and "spawned" in result.stdout, result.stderr
    assert_nothing_left(guard, baseline, mode)


# --------------------------------------------------------------------------- without a bomb


def test_a_run_gets_its_own_cgroup_left_empty_for_the_next(guard: RunCgroup, mode: str) -> None:
    code = "print(open('/proc/self/cgroup').read())"
    first, second = run_python(code), run_python(code)
    assert first.passed and second.passed, first.stderr + second.stderr
    runs = [guard.main / d for d in os.listdir(guard.main) if d.startswith("trinity-run-")]
    assert len(runs) == 1, "the second run reuses the first one's cgroup"
    assert (runs[0] / "cgroup.procs").read_text() == ""
    if mode == "limits-only":  # isolated, a cgroup namespace shows the run's cgroup as "/"
        assert f"/{runs[0].name}\n" in first.stdout and first.stdout == second.stdout


def test_a_run_that_cannot_be_emptied_is_reported(monkeypatch: pytest.MonkeyPatch, guard: RunCgroup) -> None:
    original = RunCgroup.end

    def stuck(self: RunCgroup, wait_s: float = 0, reuse: bool = False) -> bool:
        original(self)
        return False

    with monkeypatch.context() as patch:  # undone before the guard is taken down
        patch.setattr(RunCgroup, "end", stuck)
        result = run_python("print('ran')")
    assert result.killed_for == "unkillable" and not result.passed
    assert "could not all be ended" in result.stderr


def test_as_root_the_code_runs_as_an_unprivileged_uid(guard: RunCgroup) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root switches the run to a uid of its own")
    if not sandbox._uid_can_run(ISOLATION.bwrap, sys.executable):
        pytest.skip(f"an unprivileged uid cannot start {sys.executable} here (its directories are not readable)")
    result = run_python("import os\nprint(os.getuid())", timeout_s=10)
    assert result.passed, result.stderr
    inside = int(result.stdout)
    assert inside != 0 and (result.isolated or inside in sandbox._UIDS)


def test_without_a_cgroup_the_poller_says_so_once_and_strict_refuses(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def none(*args: object, **kwargs: object) -> RunCgroup:
        raise CgroupUnavailable("no cgroup in this test")

    monkeypatch.setattr(RunCgroup, "create", none)
    monkeypatch.setattr(sandbox, "_noted", set())
    monkeypatch.setattr(cgroups, "probe", lambda: "no cgroup in this test")
    with caplog.at_level(logging.WARNING, logger="trinity_cli.sandbox.sandbox"):
        first, second = run_python("print(1)"), run_python("print(2)")
    assert first.passed and second.passed
    notes = [r.getMessage() for r in caplog.records if "cgroup" in r.getMessage()]
    assert len(notes) == 1 and "\n" not in notes[0], notes
    assert "fork bombs are contained only by" in notes[0] and "no cgroup in this test" in notes[0]
    monkeypatch.setenv("TRINITY_SANDBOX", "strict")
    with pytest.raises(SandboxUnavailable, match="no cgroup in this test"):
        run_python("print(3)")
