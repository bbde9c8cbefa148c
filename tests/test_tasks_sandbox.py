"""The code sandbox and the code scorer, with real runaway programs (kept bounded)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from trinity_cli.tasks.sandbox import marked_pids, run_python
from trinity_cli.tasks.scoring import score_code

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is tested on Linux")

IS_ROOT = os.geteuid() == 0


def test_runs_code_and_captures_output() -> None:
    result = run_python("import sys\nprint('hello')\nprint('oops', file=sys.stderr)")
    assert result.passed and result.returncode == 0 and not result.timed_out
    assert result.stdout == "hello\n"
    assert "oops" in result.stderr


def test_failing_code_does_not_pass() -> None:
    result = run_python("raise SystemExit(3)")
    assert not result.passed and result.returncode == 3


def test_environment_is_minimal_and_cwd_is_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
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


def test_infinite_loop_times_out() -> None:
    start = time.monotonic()
    result = run_python("while True:\n    pass\n", timeout_s=1)
    assert result.timed_out and not result.passed
    assert result.killed_for == "timeout"
    assert time.monotonic() - start < 5


def test_fork_bomb_is_contained() -> None:
    # Bounded on purpose: at most 2**8 processes even if containment failed, each sleeping.
    bomb = (
        "import os, time\n"
        "for _ in range(8):\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        pass\n"
        "time.sleep(30)\n"
    )
    start = time.monotonic()
    result = run_python(bomb, timeout_s=3, max_procs=16)
    assert not result.passed
    assert result.killed_for in ("processes", "timeout")
    assert time.monotonic() - start < 10
    assert marked_pids() == [], "no sandboxed process survives the run"


def test_children_that_leave_the_process_group_are_killed() -> None:
    escapee = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        "print('spawned')\n"
    )
    result = run_python(escapee, timeout_s=5)
    assert result.passed and "spawned" in result.stdout
    assert marked_pids() == []


def test_memory_hog_is_stopped() -> None:
    result = run_python("block = bytearray(2 * 1024 ** 3)\nprint('allocated')", memory_mb=256)
    assert not result.passed
    assert "MemoryError" in result.stderr
    assert "allocated" not in result.stdout


def test_writes_are_capped_and_relative_ones_stay_inside(tmp_path: Path) -> None:
    outside = tmp_path / "outside.bin"
    code = (
        "import os\n"
        "with open('inside.txt', 'w') as fh:\n"
        "    fh.write('scratch')\n"
        "print(os.path.abspath('inside.txt'))\n"
        f"with open({str(outside)!r}, 'wb') as fh:\n"
        "    fh.write(b'x' * (5 * 1024 * 1024))\n"
    )
    result = run_python(code, file_mb=1)
    inside = Path(result.stdout.splitlines()[0])
    assert not inside.exists(), "files written in the sandbox's cwd go away with it"
    assert not result.passed, "a write past the file-size limit fails"
    assert "File too large" in result.stderr
    # Absolute paths outside the sandbox are NOT blocked (see sandbox.py); the size cap holds.
    if outside.exists():
        assert outside.stat().st_size <= 1024 * 1024


def test_output_is_capped_keeping_head_and_tail() -> None:
    result = run_python("print('first')\nfor i in range(200000):\n    print('x' * 20)\nprint('last')")
    assert result.passed
    assert len(result.stdout) < 40_000
    assert result.stdout.startswith("first") and result.stdout.rstrip().endswith("last")
    assert "bytes omitted" in result.stdout


@pytest.mark.skipif(not IS_ROOT, reason="the network is cut only when running as root")
def test_network_is_cut_as_root() -> None:
    result = run_python(
        "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))"
    )
    assert result.passed
    assert result.stdout.strip() == "['lo']"


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
