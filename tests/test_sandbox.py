"""The code sandbox and the code scorer, with real hostile and runaway programs (kept bounded).

Runaway tests run in both modes (`mode`: isolated under bubblewrap, and limits-only with
bwrap hidden from PATH). The attack tests (issue 10's table) need bubblewrap and are skipped,
with the reason, where it cannot isolate; each checks the host afterwards, not only that the
run failed.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import trinity_cli
from trinity_cli.answer_kinds import score_item
from trinity_cli.errors import ConfigError, SandboxUnavailable
from trinity_cli.sandbox import sandbox
from trinity_cli.sandbox.isolation import isolation
from trinity_cli.sandbox.sandbox import marked_pids, run_python
from trinity_cli.tasks.code import score_code
from trinity_cli.tasks.items import TaskItem

from .conftest import hide_bwrap

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is tested on Linux")

IS_ROOT = os.geteuid() == 0
ISOLATION = isolation()
needs_bwrap = pytest.mark.skipif(
    ISOLATION.bwrap is None, reason=f"no isolation here: {ISOLATION.reason} ({ISOLATION.hint})"
)


@pytest.fixture(autouse=True)
def _own_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Default sandbox mode, and a marker variable of this test's own, so that `marked_pids()`
    sees only this test's runs (other test sessions may run sandboxes on the same machine)."""
    monkeypatch.delenv("TRINITY_SANDBOX", raising=False)
    monkeypatch.setattr(sandbox, "MARKER_ENV", f"TRINITY_SANDBOX_TEST_{secrets.token_hex(6)}")


def _alive_with(needle: bytes) -> list[int]:
    """Host processes whose command line contains `needle`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    if needle in fh.read():
                        found.append(int(name))
            except OSError:
                continue
    return found


# --------------------------------------------------------------------------- contract, both modes


def test_runs_code_and_captures_output(mode: str) -> None:
    result = run_python("import sys\nprint('hello')\nprint('oops', file=sys.stderr)")
    assert result.passed and result.returncode == 0 and not result.timed_out
    assert result.isolated == (mode == "isolated")
    assert result.stdout == "hello\n"
    assert "oops" in result.stderr


def test_failing_code_does_not_pass(mode: str) -> None:
    result = run_python("raise SystemExit(3)")
    assert not result.passed and result.returncode == 3


def test_a_signal_is_a_negative_returncode(mode: str) -> None:
    result = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert not result.passed and result.returncode == -signal.SIGKILL and result.killed_for is None


def test_environment_is_minimal_and_cwd_is_fresh(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-do-not-leak")
    result = run_python(
        "import os\n"
        "print(os.getcwd())\n"
        "print(sorted(os.listdir('.')))\n"
        "print(os.environ.get('HOME'))\n"
        "print('sk-secret' in repr(dict(os.environ)))\n"
    )
    assert result.passed
    cwd, listing, home, leaked = result.stdout.splitlines()
    assert listing == "['main.py']"
    assert home == cwd
    assert leaked == "False"
    assert not Path(cwd).exists(), "the sandbox directory is deleted afterwards"


def test_infinite_loop_times_out(mode: str) -> None:
    start = time.monotonic()
    result = run_python("while True:\n    pass\n", timeout_s=1)
    assert result.timed_out and not result.passed
    assert result.killed_for == "timeout"
    assert time.monotonic() - start < 8


def test_fork_bomb_is_killed_for_its_processes(mode: str) -> None:
    # Every process sleeps past the timeout, so the run ends early only if the process cap
    # acts: the sandbox's count (the kernel ignores RLIMIT_NPROC for root), or RLIMIT_NPROC
    # refusing the forks (non-root). Bounded on purpose: at most 2**8 processes.
    bomb = (
        "import os, time\n"
        "for _ in range(8):\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        print('fork refused', flush=True)\n"
        "        break\n"
        "time.sleep(60)\n"
    )
    timeout_s = 30 if IS_ROOT else 3
    start = time.monotonic()
    result = run_python(bomb, timeout_s=timeout_s, max_procs=16)
    assert not result.passed
    if IS_ROOT:
        assert result.killed_for == "processes", result.stderr
        assert time.monotonic() - start < timeout_s
    else:
        assert result.killed_for == "processes" or "fork refused" in result.stdout
    assert marked_pids() == [], "no sandboxed process survives the run"


def test_children_that_leave_the_process_group_are_killed(mode: str) -> None:
    escapee = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        "print('spawned')\n"
    )
    result = run_python(escapee, timeout_s=5)
    assert result.passed and "spawned" in result.stdout
    assert marked_pids() == []


def test_memory_hog_is_stopped(mode: str) -> None:
    result = run_python("block = bytearray(2 * 1024 ** 3)\nprint('allocated')", memory_mb=256)
    assert not result.passed
    assert "MemoryError" in result.stderr
    assert "allocated" not in result.stdout


def test_a_file_past_the_size_limit_fails_and_the_directory_goes(mode: str) -> None:
    code = (
        "import os\n"
        "with open('inside.txt', 'w') as fh:\n"
        "    fh.write('scratch')\n"
        "print(os.path.abspath('inside.txt'), flush=True)\n"
        "with open('big.bin', 'wb') as fh:\n"
        "    fh.write(b'x' * (5 * 1024 * 1024))\n"
    )
    result = run_python(code, file_mb=1)
    inside = Path(result.stdout.splitlines()[0])
    assert not inside.exists(), "files written in the sandbox's cwd go away with it"
    assert not result.passed, "a write past the file-size limit fails"
    assert "File too large" in result.stderr


def test_output_is_capped_keeping_head_and_tail(mode: str) -> None:
    result = run_python("print('first')\nfor i in range(200000):\n    print('x' * 20)\nprint('last')")
    assert result.passed
    assert len(result.stdout) < 40_000
    assert result.stdout.startswith("first") and result.stdout.rstrip().endswith("last")
    assert "bytes omitted" in result.stdout


def test_multiprocessing_works(mode: str) -> None:
    code = (
        "import multiprocessing\n"
        "def square(x):\n"
        "    return x * x\n"
        "if __name__ == '__main__':\n"
        "    with multiprocessing.Pool(2) as pool:\n"
        "        print(pool.map(square, range(4)))\n"
    )
    result = run_python(code, timeout_s=30)
    assert result.passed, result.stderr
    assert result.stdout == "[0, 1, 4, 9]\n"


def test_network_is_cut(mode: str) -> None:
    if mode == "limits-only" and not IS_ROOT:
        pytest.skip("without bubblewrap the network is cut only when running as root")
    result = run_python(
        "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))"
    )
    assert result.passed
    assert result.stdout.strip() == "['lo']"


# --------------------------------------------------------------------------- attacks (issue 10), isolated

DRIVER = (
    "import json, os, sys\n"
    "from trinity_cli.sandbox.sandbox import run_python\n"
    "code = sys.stdin.read().replace('PARENT_PID', str(os.getpid()))\n"
    "r = run_python(code)\n"
    "print(json.dumps({'out': r.stdout + r.stderr, 'passed': r.passed, 'isolated': r.isolated}))\n"
)


@needs_bwrap
def test_the_parent_environment_is_not_readable() -> None:
    # The canary is in the exec environment of a trinity-like parent, where /proc/PID/environ
    # shows it (a variable set at run time with os.environ would not show there).
    canary = f"sk-canary-{secrets.token_hex(8)}"
    code = (
        "import os\n"
        "seen = [repr(dict(os.environ))]\n"
        "pids = [PARENT_PID, os.getppid(), 1] + [int(p) for p in os.listdir('/proc') if p.isdigit()]\n"
        "for pid in pids:\n"
        "    try:\n"
        "        seen.append(open(f'/proc/{pid}/environ', 'rb').read().decode('latin-1'))\n"
        "    except OSError as exc:\n"
        "        seen.append(f'{pid}: {exc}')\n"
        "print('\\n'.join(seen))\n"
    )
    env = {**os.environ, "TRINITY_TEST_CANARY": canary,
           "PYTHONPATH": str(Path(trinity_cli.__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", DRIVER], input=code, capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["isolated"] and report["passed"], report["out"]
    assert canary not in report["out"]


@needs_bwrap
def test_no_file_appears_outside_the_run_directory(tmp_path: Path) -> None:
    token = secrets.token_hex(6)
    targets = [
        Path.home() / f".trinity-sandbox-escape-{token}",
        Path(tempfile.gettempdir()) / f"trinity-sandbox-escape-{token}",
        Path("/tmp") / f"trinity-sandbox-escape-{token}-2",
        tmp_path / "escape.txt",
    ]
    code = "".join(
        f"try:\n    open({str(p)!r}, 'w').write('escaped')\n    print('wrote')\n"
        f"except OSError as exc:\n    print('blocked', exc.errno)\n"
        for p in targets
    )
    try:
        result = run_python(code)
        assert result.isolated and result.passed, result.stderr
        assert len(result.stdout.splitlines()) == len(targets)
        assert [p for p in targets if p.exists()] == []
    finally:
        for path in targets:
            path.unlink(missing_ok=True)


@needs_bwrap
def test_secret_files_are_unreadable(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    canary = f"secret-{secrets.token_hex(8)}"
    secret.write_text(canary)
    secret.chmod(0o600)
    paths = [str(secret), "/etc/shadow", "/etc/passwd", "/home"]
    code = "".join(
        f"try:\n    import os\n    p = {p!r}\n"
        f"    print(os.listdir(p) if os.path.isdir(p) else open(p).read())\n"
        f"except OSError as exc:\n    print('blocked', exc.errno)\n"
        for p in paths
    )
    result = run_python(code)
    assert result.isolated and result.passed, result.stderr
    assert result.stdout.splitlines().count(f"blocked {errno.ENOENT}") == len(paths), result.stdout
    assert canary not in result.stdout
    if os.access("/etc/shadow", os.R_OK):  # as root (CI): the host can read it, the code cannot
        first = Path("/etc/shadow").read_text().splitlines()[0]
        assert first not in result.stdout


@needs_bwrap
def test_the_parent_and_its_processes_survive_kill_attempts() -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        code = (
            "import os, signal\n"
            f"for pid, sig in [(os.getppid(), signal.SIGTERM), ({os.getpid()}, signal.SIGTERM),"
            f" ({victim.pid}, signal.SIGKILL)]:\n"
            "    try:\n"
            "        os.kill(pid, sig)\n"
            "        print('sent', pid)\n"
            "    except OSError as exc:\n"
            "        print('refused', pid, exc.errno)\n"
        )
        result = run_python(code)
        time.sleep(0.2)  # a signal that got through would have arrived by now
        assert result.isolated
        assert received == [], "the parent received SIGTERM"
        assert victim.poll() is None, "a host process was killed"
    finally:
        signal.signal(signal.SIGTERM, previous)
        victim.kill()
        victim.wait()


@needs_bwrap
@pytest.mark.parametrize("ending", ["exits", "times out"])
def test_no_process_outlives_the_run(ending: str) -> None:
    # A grandchild that left the session and cleared its environment (no marker to find it by).
    seconds = f"{600 + secrets.randbelow(10_000)}.{secrets.randbelow(10**6):06d}"
    code = (
        "import os, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execve('/bin/sleep', ['sleep', {seconds!r}], {{}})\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "for _ in range(400):\n"
        "    found = [p for p in os.listdir('/proc') if p.isdigit()\n"
        f"             and {seconds!r}.encode() in open(f'/proc/{{p}}/cmdline', 'rb').read()]\n"
        "    if found:\n"
        "        print('sleeper running', flush=True)\n"
        "        break\n"
        "    time.sleep(0.01)\n"
        + ("time.sleep(60)\n" if ending == "times out" else "")
    )
    try:
        # Generous timeouts: a loaded machine must not turn "exits" into "times out" or keep the
        # sleeper from starting before the timeout.
        for _ in range(3 if ending == "exits" else 1):  # an end-of-run race shows up only sometimes
            result = run_python(code, timeout_s=5 if ending == "times out" else 60)
            assert result.isolated
            assert "sleeper running" in result.stdout, result.stderr
            assert result.timed_out == (ending == "times out")
            assert _alive_with(b"sleep\0" + seconds.encode()) == []
    finally:
        for pid in _alive_with(b"sleep\0" + seconds.encode()):
            os.kill(pid, signal.SIGKILL)


@needs_bwrap
def test_no_connection_reaches_a_host_listener() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            "    print('connected')\n"
            "except OSError as exc:\n"
            "    print('refused', exc)\n"
        )
        result = run_python(code)
        assert result.isolated and result.passed
        assert "refused" in result.stdout
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()


def _shmem_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1])
    return 0


@needs_bwrap
def test_big_writes_hit_the_total_cap_and_the_memory_comes_back() -> None:
    # The 200 x 15 MB loop, each file under the per-file limit: the tmpfs is full at 48 MiB.
    code = (
        "import errno\n"
        "for i in range(200):\n"
        "    try:\n"
        "        with open(f'big{i}.bin', 'wb') as fh:\n"
        "            fh.write(b'x' * (15 * 1024 * 1024))\n"
        "    except OSError as exc:\n"
        "        print('stopped at', i, errno.errorcode[exc.errno], flush=True)\n"
        "        raise\n"
    )
    before = _shmem_kib()
    result = run_python(code, file_mb=16, disk_mb=48)
    assert not result.passed
    assert "stopped at 3 ENOSPC" in result.stdout, result.stdout + result.stderr
    # The kernel frees an unmounted tmpfs shortly after the namespace's last process exits.
    deadline = time.monotonic() + 5
    while _shmem_kib() - before >= 16 * 1024 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _shmem_kib() - before < 16 * 1024, "the run's tmpfs is freed with it"


@needs_bwrap
def test_shared_memory_is_capped() -> None:
    code = "open('/dev/shm/big', 'wb').write(b'x' * (3 * 1024 * 1024))\n"
    result = run_python(code, disk_mb=8)  # /dev/shm: 1 MiB
    assert not result.passed and "No space left on device" in result.stderr, result.stderr


@needs_bwrap
def test_the_run_dies_with_trinity() -> None:
    seconds = f"{600 + secrets.randbelow(10_000)}.{secrets.randbelow(10**6):06d}"
    driver = (
        "from trinity_cli.sandbox.sandbox import run_python\n"
        f"run_python(\"import os\\nos.execv('/bin/sleep', ['sleep', '{seconds}'])\", timeout_s=120)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(trinity_cli.__file__).resolve().parents[1])}
    parent = subprocess.Popen([sys.executable, "-c", driver], env=env)
    needle = b"sleep\0" + seconds.encode()
    try:
        deadline = time.monotonic() + 30
        while not _alive_with(needle) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive_with(needle), "the sandboxed sleeper never started"
        parent.kill()  # SIGKILL: no cleanup code of trinity's runs
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive_with(needle) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive_with(needle) == []
    finally:
        parent.kill()
        for pid in _alive_with(needle):
            os.kill(pid, signal.SIGKILL)


@needs_bwrap
def test_many_tiny_files_hit_the_total_cap() -> None:
    code = (
        "import errno\n"
        "for i in range(200_000):\n"
        "    try:\n"
        "        with open(f'f{i}', 'w') as fh:\n"
        "            fh.write('x')\n"
        "    except OSError as exc:\n"
        "        print('stopped at', i, errno.errorcode[exc.errno], flush=True)\n"
        "        raise\n"
    )
    result = run_python(code, disk_mb=2, timeout_s=60)
    assert not result.passed
    # One page per file: the 2 MiB tmpfs is full near 512 files, where the file count cap is too.
    assert "ENOSPC" in result.stdout or result.killed_for == "disk", result.stdout + result.stderr


@needs_bwrap
@pytest.mark.parametrize("where", [".", "/dev/shm"])
def test_empty_files_are_capped_by_count(where: str) -> None:
    # Empty files take no tmpfs pages: only the file count (256 per MiB) stops them.
    code = f"for i in range(200_000):\n    open(f'{where}/f{{i}}', 'w').close()\nprint('made them all')\n"
    result = run_python(code, disk_mb=1, timeout_s=60)
    assert not result.passed and result.killed_for == "disk", result.stderr
    assert "made them all" not in result.stdout


@needs_bwrap
def test_without_tmpfs_size_the_total_is_polled(monkeypatch: pytest.MonkeyPatch) -> None:
    # bwrap before 0.8 has no --size: the sandbox watches the tmpfs and kills the run.
    monkeypatch.setattr(sandbox, "isolation", lambda: dataclasses.replace(ISOLATION, tmpfs_size=False))
    code = (
        "import time\n"
        "for i in range(20):\n"
        "    with open(f'big{i}.bin', 'wb') as fh:\n"
        "        fh.write(b'x' * (15 * 1024 * 1024))\n"
        "    time.sleep(0.2)\n"
        "print('wrote 300 MB')\n"
    )
    result = run_python(code, file_mb=16, disk_mb=32, timeout_s=60)
    assert not result.passed and result.killed_for == "disk", result.stderr
    assert "wrote 300 MB" not in result.stdout


@needs_bwrap
def test_strict_mode_runs_isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRINITY_SANDBOX", "strict")
    result = run_python("print('ok')", strict=True)
    assert result.passed and result.isolated


# --------------------------------------------------------------------------- without bubblewrap


def test_fallback_says_so_once_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hide_bwrap(monkeypatch, tmp_path)
    with caplog.at_level(logging.WARNING, logger="trinity_cli.sandbox.sandbox"):
        first = run_python("print(1)")
        second = run_python("print(2)")
    assert first.passed and second.passed and not first.isolated and not second.isolated
    notes = [r.getMessage() for r in caplog.records
             if r.name == "trinity_cli.sandbox.sandbox" and "without a cgroup" not in r.getMessage()]
    assert len(notes) == 1, notes  # (where runs get no cgroup, that has a notice of its own)
    assert "\n" not in notes[0]
    assert "WITHOUT isolation" in notes[0] and "bwrap" in notes[0] and "bubblewrap" in notes[0]


def test_the_cli_prints_the_notice_as_one_warning_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trinity_cli import entry

    hide_bwrap(monkeypatch, tmp_path)
    logger = logging.getLogger("trinity_cli")
    handlers = list(logger.handlers)
    try:
        entry.show_library_warnings()
        entry.show_library_warnings()  # idempotent: still one line per warning
        run_python("pass")
        run_python("pass")
    finally:
        logger.handlers[:] = handlers
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    lines = [line for line in lines if "without a cgroup" not in line]  # where runs get none: its own line
    assert len(lines) == 1 and lines[0].startswith("warning: model-written code runs WITHOUT isolation"), lines


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_strict_mode_refuses_without_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str) -> None:
    hide_bwrap(monkeypatch, tmp_path)

    def refuse(*args: object, **kwargs: object) -> str:
        raise AssertionError("the sandbox was set up")

    monkeypatch.setattr(sandbox.tempfile, "mkdtemp", refuse)
    if how == "environment":
        monkeypatch.setenv("TRINITY_SANDBOX", "strict")
    with pytest.raises(SandboxUnavailable) as raised:
        run_python("open('/tmp/should-not-run', 'w')", strict=how == "argument")
    assert "strict" in raised.value.message and "bwrap" in raised.value.message
    assert "\n" not in str(raised.value)
    assert "bubblewrap" in (raised.value.hint or "")


def test_a_strict_task_or_pool_refuses_without_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hide_bwrap(monkeypatch, tmp_path)
    item = TaskItem(task="t", id="1", prompt="p", reference={**HAS_CLOSE}, scorer="code")
    assert score_item(item, RIGHT) == 1.0  # auto: runs with the limits only
    with pytest.raises(SandboxUnavailable):
        score_item(item, RIGHT, strict_sandbox=True)  # the pool's `sandbox: strict`
    with pytest.raises(SandboxUnavailable):
        score_code(RIGHT, {**HAS_CLOSE, "sandbox": "strict"})  # the task item's


def test_an_unknown_sandbox_mode_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRINITY_SANDBOX", "paranoid")
    with pytest.raises(ConfigError, match="TRINITY_SANDBOX"):
        run_python("pass")


# --------------------------------------------------------------------------- code scorer

HAS_CLOSE = {
    "prelude": (
        "from typing import List\n\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        '    """ Check if any two numbers are closer to each other than threshold. """\n'
    ),
    "tests": (
        "def check(candidate):\n"
        "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True\n"
        "    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False\n"
        "    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 0.5) == False\n\n"
        "check(has_close_elements)"
    ),
    "entry_point": "has_close_elements",
    "timeout_s": 2,
}

RIGHT = """Sort the numbers and compare neighbours:

```python
from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    ordered = sorted(numbers)
    return any(b - a < threshold for a, b in zip(ordered, ordered[1:]))
```

This runs in O(n log n)."""


def test_code_right_answer_in_markdown_passes() -> None:
    assert score_code(RIGHT, HAS_CLOSE) == 1.0


def test_code_body_completion_passes() -> None:
    body = "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1 :])\n"
    assert score_code(body, HAS_CLOSE) == 1.0


def test_code_wrong_answer_fails() -> None:
    wrong = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
    assert score_code(wrong, HAS_CLOSE) == 0.0


def test_code_syntax_error_fails() -> None:
    assert (
        score_code("```python\ndef has_close_elements(numbers, threshold)\n    return\n```", HAS_CLOSE) == 0.0
    )


def test_code_infinite_loop_scores_zero() -> None:
    looping = "```python\ndef has_close_elements(numbers, threshold):\n    while True:\n        pass\n```"
    start = time.monotonic()
    assert score_code(looping, {**HAS_CLOSE, "timeout_s": 1}) == 0.0
    assert time.monotonic() - start < 5


def test_code_exiting_early_does_not_pass() -> None:
    cheat = (
        "```python\nimport sys\n"
        "def has_close_elements(numbers, threshold):\n    return True\n"
        "sys.exit(0)\n```"
    )
    assert score_code(cheat, HAS_CLOSE) == 0.0


def test_code_fork_bomb_scores_zero() -> None:
    bomb = (
        "```python\nimport os, time\n"
        "def has_close_elements(numbers, threshold):\n"
        "    for _ in range(6):\n"
        "        os.fork()\n"
        "    time.sleep(30)\n```"
    )
    assert score_code(bomb, HAS_CLOSE) == 0.0
    assert marked_pids() == []


def test_code_reference_must_have_tests() -> None:
    with pytest.raises(ValueError):
        score_code("x = 1", {"prelude": ""})


# --------------------------------------------------------------------------- where strict is asked for


def test_a_pool_and_a_task_file_can_ask_for_the_strict_sandbox(tmp_path: Path) -> None:
    from trinity_cli.pool_config import parse_pool
    from trinity_cli.tasks.userfile import load_jsonl

    pool = "name: p\nsandbox: strict\nmodels:\n  - {name: a, kind: scripted}\n"
    assert parse_pool(pool, "p.yaml").sandbox == "strict"
    assert parse_pool(pool.replace("sandbox: strict\n", ""), "p.yaml").sandbox == "auto"
    with pytest.raises(ConfigError, match="sandbox"):
        parse_pool(pool.replace("strict", "paranoid"), "p.yaml")
    tasks = tmp_path / "code.jsonl"
    rows = [{"id": "s", "prompt": "f", "scorer": "code", "answer": {"tests": "assert f() == 1", "sandbox": "strict"}},
            {"id": "a", "prompt": "f", "scorer": "code", "answer": {"tests": "assert f() == 1"}}]
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    strict, auto = load_jsonl(tasks)
    assert strict.reference["sandbox"] == "strict" and "sandbox" not in auto.reference
    tasks.write_text(json.dumps({**rows[0], "answer": {"tests": "assert 1", "sandbox": "off"}}) + "\n")
    with pytest.raises(ConfigError, match="'sandbox' must be"):
        load_jsonl(tasks)


CODER = [{"name": "coder", "kind": "scripted", "default": "```python\ndef f():\n    return 1\n```"}]


def code_tasks(tmp_path: Path, name: str = "code") -> Path:
    tasks = tmp_path / f"{name}.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"f{i}", "prompt": f"Write f() returning 1 ({name} {i}).",
                                         "scorer": "code", "answer": "assert f() == 1"}) + "\n" for i in range(30)))
    return tasks


def count_model_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from trinity_cli.backends.scripted import ScriptedBackend

    calls: list[int] = []
    original = ScriptedBackend.chat
    monkeypatch.setattr(ScriptedBackend, "chat", lambda self, m, p: calls.append(1) or original(self, m, p))
    return calls


@pytest.mark.parametrize("how", ["pool", "environment"])
def test_bench_refuses_strict_code_tasks_before_any_episode(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str
) -> None:
    from trinity_cli.bench.options import BenchOptions
    from trinity_cli.bench.runner import bench
    from trinity_cli.runs.store import RunStore

    from .conftest import write_pool

    hide_bwrap(monkeypatch, tmp_path)
    calls = count_model_calls(monkeypatch)
    options = {"tasks": f"file:{code_tasks(tmp_path)}:test", "max_turns": 1, "random_seeds": 0}
    auto = write_pool(tmp_path, {"name": "coders", "models": CODER}, "auto.yaml")
    result = bench(BenchOptions(pool=str(auto), **options)).data
    assert result["results"]["single:coder"]["overall"]["accuracy"] == 1.0  # auto: runs, limits only
    calls.clear()
    runs = len(RunStore().list())
    if how == "pool":
        pool = write_pool(tmp_path, {"name": "coders", "sandbox": "strict", "models": CODER}, "strict.yaml")
    else:
        pool = auto
        monkeypatch.setenv("TRINITY_SANDBOX", "strict")
    options["tasks"] = f"file:{code_tasks(tmp_path, 'fresh')}:test"  # prompts the rollout cache has not seen
    with pytest.raises(SandboxUnavailable, match="strict code sandbox"):
        bench(BenchOptions(pool=str(pool), **options))
    assert calls == [] and len(RunStore().list()) == runs, "refused before any model call or run"


def test_evolve_on_a_strict_pool_refuses_code_tasks_up_front(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from trinity_cli.evolve.evolution import evolve
    from trinity_cli.evolve.options import EvolveOptions

    from .conftest import write_pool

    hide_bwrap(monkeypatch, tmp_path)
    calls = count_model_calls(monkeypatch)
    tasks = code_tasks(tmp_path)
    pool = write_pool(tmp_path, {"name": "coders", "sandbox": "strict", "models": CODER * 1}, "strict.yaml")
    options = EvolveOptions(pool=str(pool), tasks=f"file:{tasks}:train", val_tasks=f"file:{tasks}:val:2",
                            budget=8, minibatch=2, popsize=4, max_turns=1, backbone="hash:16")
    with pytest.raises(SandboxUnavailable, match="strict code sandbox"):
        evolve(options)
    assert calls == []
