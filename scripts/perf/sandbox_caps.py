"""How the code sandbox holds an unbounded fork bomb, per setting this machine can show.

Usage: python scripts/perf/sandbox_caps.py [--runs 3] [--max-procs 32]

For each setting — trinity as root, and (where this Python can run as one) as an unprivileged
user; bubblewrap or not; the run's own cgroup or none (the poller alone) — runs

    import os
    while True:
        try: os.fork()
        except OSError: pass

through `run_python(..., max_procs=32)` `--runs` times and reports the run's peak task count
(from the cgroup), the time from the bomb reaching `max_procs` to `run_python` returning,
the processes of the run still alive when it returns and 1 s later, the tasks still charged
1 s later (zombies that the machine's init has not reaped yet) and whether this process could
fork while the bomb ran.

Safety: every bomb runs only inside a protective cgroup of the script's own (`cgroups.enclose`:
at most GUARD_PIDS tasks and 1.5 GB), entered before the first bomb and checked from
/proc/self/cgroup; the script refuses to run where none can be made. The unprivileged rows
run in a child process inside the same cgroup. In the rows without a cgroup of the run's own
the bomb is held only by that protective cap, so their peak is at most GUARD_PIDS.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trinity_cli.sandbox import cgroups, sandbox
from trinity_cli.sandbox.cgroups import CgroupUnavailable, RunCgroup

GUARD_PIDS = 300
GUARD_MEMORY = 1536 * 1024 * 1024
USER_UID = 65534
BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"


def guarded_pids_max() -> int | None:
    """pids.max of the cgroup this process is in (v1 pids hierarchy or v2), None if unknown."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hier, controllers, path = line.split(":", 2)
        for candidate in (Path(f"/sys/fs/cgroup/pids{path}/pids.max") if "pids" in controllers.split(",") else None,
                          Path(f"/sys/fs/cgroup{path}/pids.max") if hier == "0" else None):
            if candidate is not None and candidate.exists():
                text = candidate.read_text().strip()
                return None if text == "max" else int(text)
    return None


def own_pids_dir() -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hier, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            return Path(f"/sys/fs/cgroup/pids{path}")
        if hier == "0":
            return Path(f"/sys/fs/cgroup{path}")
    raise SystemExit("no cgroup of this process found")


def live_tasks(top: Path) -> int:
    count = 0
    for root, _dirs, _files in os.walk(top):
        try:
            pids = Path(root, "cgroup.procs").read_text().split()
        except OSError:
            continue
        count += sum(1 for pid in pids if int(pid) not in (os.getpid(), os.getppid() if ARGS.child else -1))
    return count


@dataclass
class Trial:
    """One bomb run: the figures of the module docstring."""

    killed_for: str | None
    cap_to_end_s: float | None
    peak: int
    live_at_return: int
    live_after_1s: int
    charged_after_1s: int
    could_fork: bool


@dataclass
class Watch:
    """The guard's task count over `baseline` and this process's forks, while a run goes on."""

    current: Path
    baseline: int
    max_procs: int
    peak: int = 0
    cap_at: float | None = None
    forks: int = 0
    fork_errors: int = 0
    done: threading.Event = field(default_factory=threading.Event)

    def loop(self) -> None:
        while not self.done.is_set():
            tasks = int(self.current.read_text()) - self.baseline
            self.peak = max(self.peak, tasks)
            if tasks >= self.max_procs and self.cap_at is None:
                self.cap_at = time.monotonic()
            try:
                os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0)
                self.forks += 1
            except OSError:
                self.fork_errors += 1
            time.sleep(0.001)


def measure(max_procs: int) -> Trial:
    guard = own_pids_dir()
    current = guard / "pids.current"
    settle = time.monotonic() + 15  # let the last run's processes (zombies included) go first
    while int(current.read_text()) > threading.active_count() + (1 if ARGS.child else 0) \
            and time.monotonic() < settle:
        time.sleep(0.1)
    watch = Watch(current, int(current.read_text()), max_procs)
    thread = threading.Thread(target=watch.loop)
    thread.start()
    try:
        killed_for = sandbox.run_python(BOMB, timeout_s=10, max_procs=max_procs).killed_for
    except OSError as exc:  # the protective cap still full of an earlier run: it could not start
        killed_for = f"not started ({exc.strerror})"
    finally:
        returned = time.monotonic()
        watch.done.set()
        thread.join()
    live_at_return = live_tasks(guard)
    time.sleep(1)
    return Trial(killed_for=killed_for,
                 cap_to_end_s=None if watch.cap_at is None else returned - watch.cap_at,
                 peak=watch.peak, live_at_return=live_at_return, live_after_1s=live_tasks(guard),
                 charged_after_1s=max(0, int(current.read_text()) - watch.baseline),
                 could_fork=watch.fork_errors == 0 and watch.forks > 0)


@dataclass
class Row:
    """One setting and its trials."""

    trinity: str
    code: str
    bwrap: str
    cgroup: str
    trials: list[Trial]


def settings(runs: int, max_procs: int) -> list[Row]:
    """Every (bubblewrap, cgroup) setting for the user this process runs as."""
    rows = []
    iso = sandbox.isolation()
    path = os.environ.get("PATH", "")
    real_create = RunCgroup.create
    uid = os.geteuid()
    with tempfile.TemporaryDirectory() as empty:
        for bwrap in (["yes", "no"] if iso.bwrap is not None else ["no"]):
            for cgroup in (["own", "none"] if cgroups.probe() is None else ["none"]):
                os.environ["PATH"] = path if bwrap == "yes" else empty
                if cgroup == "none":
                    RunCgroup.create = _no_cgroup  # type: ignore[method-assign]
                try:
                    trials = [measure(max_procs) for _ in range(runs)]
                finally:
                    os.environ["PATH"] = path
                    RunCgroup.create = real_create  # type: ignore[method-assign]
                if uid != 0:
                    code = "trinity's user"
                elif sandbox._uid_can_run(iso.bwrap if bwrap == "yes" else None, sys.executable):
                    code = "a uid of its own"
                else:
                    code = "root"
                rows.append(Row("root" if uid == 0 else f"uid {uid}", code, bwrap,
                                _cgroup_name() if cgroup == "own" else "none", trials))
    return rows


def _no_cgroup(*args: object, **kwargs: object) -> RunCgroup:
    raise CgroupUnavailable("turned off for this measurement")


def _cgroup_name() -> str:
    mounts = Path("/proc/self/mountinfo").read_text()
    return "v1" if " - cgroup cgroup " in mounts and "pids" in mounts else "v2"


def as_user(runs: int, max_procs: int) -> list[Row] | str:
    """The settings of an unprivileged trinity, measured by a child running as USER_UID (or why not)."""
    def drop() -> None:
        os.setgroups([])
        os.setresgid(USER_UID, USER_UID, USER_UID)
        os.setresuid(USER_UID, USER_UID, USER_UID)

    with tempfile.TemporaryDirectory() as home:
        os.chmod(home, 0o777)
        env = {**os.environ, "TRINITY_HOME": home, "TRINITY_SANDBOX_CACHE": "off"}
        try:
            done = subprocess.run([sys.executable, __file__, "--child", "--runs", str(runs), "--max-procs",
                                   str(max_procs)], capture_output=True, text=True, env=env, cwd="/",
                                  preexec_fn=drop, timeout=600)
        except OSError as exc:
            return f"as uid {USER_UID}: {exc}"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return f"as uid {USER_UID}: {lines[-1]}"
    return [Row(**{**row, "trials": [Trial(**t) for t in row["trials"]]}) for row in json.loads(done.stdout)]


def _median(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):.2f}" if known else "—"


def render(rows: list[Row], runs: int) -> None:
    print(f"unbounded fork bomb, max_procs={ARGS.max_procs}, {runs} runs per row (median; max for counts); "
          f"protective cap {GUARD_PIDS} tasks; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print("| trinity as | code as | bubblewrap | run's cgroup | killed for | peak tasks | cap → return (s) "
          "| alive at return | alive 1 s later | charged 1 s later | test process forks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        trials = row.trials
        killed = ", ".join(sorted({str(t.killed_for) for t in trials}))
        print(f"| {row.trinity} | {row.code} | {row.bwrap} | {row.cgroup} | {killed} "
              f"| {max(t.peak for t in trials)} | {_median([t.cap_to_end_s for t in trials])} "
              f"| {max(t.live_at_return for t in trials)} | {max(t.live_after_1s for t in trials)} "
              f"| {max(t.charged_after_1s for t in trials)} "
              f"| {'yes' if all(t.could_fork for t in trials) else 'no'} |")


def main() -> None:
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-procs", type=int, default=32)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ARGS = ap.parse_args()
    logging.getLogger("trinity_cli").setLevel(logging.ERROR)  # the fallbacks' notices, expected here
    if ARGS.child:  # already inside the parent's protective cgroup
        limit = guarded_pids_max()
        if limit is None or limit > GUARD_PIDS:
            raise SystemExit("refusing: not inside a protective cgroup")
        print(json.dumps([asdict(row) for row in settings(ARGS.runs, ARGS.max_procs)]))
        return
    try:
        with cgroups.enclose(GUARD_PIDS, GUARD_MEMORY):
            limit = guarded_pids_max()
            if limit is None or limit > GUARD_PIDS:
                raise SystemExit(f"refusing: the protective cgroup does not hold (pids.max {limit})")
            rows = settings(ARGS.runs, ARGS.max_procs)
            user = as_user(ARGS.runs, ARGS.max_procs) if os.geteuid() == 0 else []
    except CgroupUnavailable as exc:
        raise SystemExit(f"refusing to run a fork bomb without a protective cgroup: {exc}") from None
    render(rows + (user if isinstance(user, list) else []), ARGS.runs)
    if isinstance(user, str):
        print(f"not measured {user}")
    print(f"Python: {sys.executable}")


ARGS = argparse.Namespace()

if __name__ == "__main__":
    main()
