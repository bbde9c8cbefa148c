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


def measure(max_procs: int) -> dict[str, float | int | bool | str | None]:
    """One bomb run; the figures of the module docstring."""
    guard = own_pids_dir()
    current = guard / "pids.current"
    settle = time.monotonic() + 15  # let the last run's processes (zombies included) go first
    while int(current.read_text()) > threading.active_count() + (1 if ARGS.child else 0) \
            and time.monotonic() < settle:
        time.sleep(0.1)
    baseline = int(current.read_text())
    state = {"peak": 0, "cap_at": None, "forks": 0, "fork_errors": 0}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            tasks = int(current.read_text()) - baseline
            state["peak"] = max(state["peak"], tasks)
            if tasks >= max_procs and state["cap_at"] is None:
                state["cap_at"] = time.monotonic()
            try:
                os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0)
                state["forks"] += 1
            except OSError:
                state["fork_errors"] += 1
            time.sleep(0.001)

    thread = threading.Thread(target=watch)
    thread.start()
    start = time.monotonic()
    try:
        result = sandbox.run_python(BOMB, timeout_s=10, max_procs=max_procs)
    except OSError as exc:  # the protective cap still full of an earlier run: it could not start
        result = sandbox.SandboxResult(False, None, "", "", False, killed_for=f"not started ({exc.strerror})")
    finally:
        returned = time.monotonic()
        done.set()
        thread.join()
    left_now = live_tasks(guard)
    time.sleep(1)
    cap_at = state["cap_at"]
    return {
        "killed_for": result.killed_for,
        "run_s": returned - start,
        "cap_to_end_s": None if cap_at is None else returned - float(cap_at),  # type: ignore[arg-type]
        "peak": state["peak"],
        "live_at_return": left_now,
        "live_after_1s": live_tasks(guard),
        "charged_after_1s": max(0, int(current.read_text()) - baseline),
        "could_fork": state["fork_errors"] == 0 and int(state["forks"]) > 0,  # type: ignore[call-overload]
        "isolated": result.isolated,
    }


def settings(runs: int, max_procs: int) -> list[dict[str, object]]:
    """Every (bubblewrap, cgroup) setting for the user this process runs as."""
    rows: list[dict[str, object]] = []
    iso = sandbox.isolation()
    path = os.environ.get("PATH", "")
    real_create = RunCgroup.create
    cgroup_kinds = ["own", "none"] if cgroups.probe() is None else ["none"]
    with tempfile.TemporaryDirectory() as empty:
        for bwrap in (["yes", "no"] if iso.bwrap is not None else ["no"]):
            for cgroup in cgroup_kinds:
                os.environ["PATH"] = path if bwrap == "yes" else empty
                if cgroup == "none":
                    RunCgroup.create = classmethod(_no_cgroup)  # type: ignore[method-assign, assignment]
                try:
                    found = [measure(max_procs) for _ in range(runs)]
                finally:
                    os.environ["PATH"] = path
                    RunCgroup.create = real_create  # type: ignore[method-assign]
                uid = os.geteuid()
                code_as = "root" if uid == 0 and not sandbox._uid_can_run(iso.bwrap if bwrap == "yes" else None,
                                                                          sys.executable) else "a uid of its own"
                if uid != 0:
                    code_as = "trinity's user"
                rows.append({"trinity": "root" if uid == 0 else f"uid {uid}", "code": code_as, "bwrap": bwrap,
                             "cgroup": _cgroup_name() if cgroup == "own" else "none", "runs": found})
    return rows


def _no_cgroup(cls: type, *args: object, **kwargs: object) -> RunCgroup:
    raise CgroupUnavailable("turned off for this measurement")


def _cgroup_name() -> str:
    mounts = Path("/proc/self/mountinfo").read_text()
    return "v1" if " - cgroup cgroup " in mounts and "pids" in mounts else "v2"


def as_user(runs: int, max_procs: int) -> list[dict[str, object]] | str:
    """The settings of an unprivileged trinity, measured by a child running as USER_UID."""
    def drop() -> None:
        os.setgroups([])
        os.setresgid(USER_UID, USER_UID, USER_UID)
        os.setresuid(USER_UID, USER_UID, USER_UID)

    env = {**os.environ, "TRINITY_HOME": tempfile.mkdtemp(), "TRINITY_SANDBOX_CACHE": "off"}
    os.chmod(env["TRINITY_HOME"], 0o777)
    try:
        done = subprocess.run([sys.executable, __file__, "--child", "--runs", str(runs), "--max-procs",
                               str(max_procs)], capture_output=True, text=True, env=env, cwd="/", preexec_fn=drop,
                              timeout=600)
    except OSError as exc:
        return f"as uid {USER_UID}: {exc}"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return f"as uid {USER_UID}: {lines[-1]}"
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _median(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):.2f}" if known else "—"


def render(rows: list[dict[str, object]], runs: int) -> None:
    print(f"unbounded fork bomb, max_procs={ARGS.max_procs}, {runs} runs per row (median; max for counts); "
          f"protective cap {GUARD_PIDS} tasks; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print("| trinity as | code as | bubblewrap | run's cgroup | killed for | peak tasks | cap → return (s) "
          "| alive at return | alive 1 s later | charged 1 s later | test process forks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        found: list[dict[str, object]] = row["runs"]  # type: ignore[assignment]
        killed = ", ".join(sorted({str(r["killed_for"]) for r in found}))
        print(f"| {row['trinity']} | {row['code']} | {row['bwrap']} | {row['cgroup']} | {killed} "
              f"| {max(int(r['peak']) for r in found)} "  # type: ignore[call-overload]
              f"| {_median([r['cap_to_end_s'] for r in found])} "  # type: ignore[misc]
              f"| {max(int(r['live_at_return']) for r in found)} "  # type: ignore[call-overload]
              f"| {max(int(r['live_after_1s']) for r in found)} "  # type: ignore[call-overload]
              f"| {max(int(r['charged_after_1s']) for r in found)} "  # type: ignore[call-overload]
              f"| {'yes' if all(r['could_fork'] for r in found) else 'no'} |")


def main() -> None:
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-procs", type=int, default=32)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ARGS = ap.parse_args()
    logging.getLogger("trinity_cli").setLevel(logging.ERROR)  # the fallbacks' notices, expected here
    if ARGS.child:  # already inside the parent's protective cgroup
        if guarded_pids_max() is None or guarded_pids_max() > GUARD_PIDS:  # type: ignore[operator]
            raise SystemExit("refusing: not inside a protective cgroup")
        print(json.dumps(settings(ARGS.runs, ARGS.max_procs)))
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
