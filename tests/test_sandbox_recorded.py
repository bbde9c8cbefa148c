"""Recorded sandbox runs (sandbox/recorded.py): a run made before is answered from the
record, with the caller's fresh secrets put back; anything that shapes the run is keyed."""

from __future__ import annotations

import secrets

import pytest

from trinity_cli.errors import SandboxUnavailable
from trinity_cli.sandbox import recorded, sandbox
from trinity_cli.tasks import code


@pytest.fixture()
def runs(monkeypatch) -> list[str]:
    """The sources that really ran in the sandbox."""
    ran: list[str] = []
    real = sandbox.run_python

    def counting(source, *args, **kwargs):
        ran.append(source)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(sandbox, "run_python", counting)
    return ran


def program(marker: str) -> str:
    return f"print('hello')\nprint({marker!r} + str(6 * 7))\n"


def test_a_rerun_is_answered_from_the_record_with_its_own_secret(runs) -> None:
    first, second = (f"m-{secrets.token_hex(6)}:" for _ in range(2))
    a = recorded.run_python_recorded(program(first), secrets=(first,), timeout_s=5)
    b = recorded.run_python_recorded(program(second), secrets=(second,), timeout_s=5)
    assert len(runs) == 1  # the second never ran
    assert a.passed and b.passed and a.returncode == b.returncode == 0
    assert a.stdout == f"hello\n{first}42\n" and b.stdout == f"hello\n{second}42\n"
    assert first not in b.stdout


def test_limits_and_source_are_keyed(runs) -> None:
    recorded.run_python_recorded("print(1)", timeout_s=5)
    recorded.run_python_recorded("print(1)", timeout_s=6)
    recorded.run_python_recorded("print(1)", timeout_s=5, memory_mb=256)
    recorded.run_python_recorded("print(2)", timeout_s=5)
    recorded.run_python_recorded("print(1)", timeout_s=5)
    assert len(runs) == 4


def test_failures_are_recorded_but_timeouts_are_not(runs) -> None:
    for _ in range(2):
        failed = recorded.run_python_recorded("raise SystemExit(3)", timeout_s=5)
        assert failed.returncode == 3 and not failed.passed
    assert len(runs) == 1
    for _ in range(2):
        slow = recorded.run_python_recorded("import time\ntime.sleep(30)", timeout_s=0.5)
        assert slow.timed_out
    assert len(runs) == 3  # a timeout depends on the machine's load: run again


def test_off_runs_every_time(runs, monkeypatch) -> None:
    monkeypatch.setenv(recorded.ENV, "off")
    for _ in range(2):
        assert recorded.run_python_recorded("print(1)", timeout_s=5).stdout == "1\n"
    assert len(runs) == 2


def test_strict_still_refuses_before_any_lookup(runs, monkeypatch) -> None:
    recorded.run_python_recorded("print(1)", timeout_s=5)  # recorded

    def unavailable():
        raise SandboxUnavailable("no isolation here", "install bubblewrap")

    monkeypatch.setattr(sandbox, "require_isolation", unavailable)
    with pytest.raises(SandboxUnavailable):
        recorded.run_python_recorded("print(1)", timeout_s=5, strict=True)


def test_code_scoring_replays_without_running(runs) -> None:
    reference = {"tests": "assert add(2, 3) == 5", "entry_point": "add"}
    reply = "```python\ndef add(a, b):\n    return a + b\n```"
    assert code.score_code(reply, reference) == 1.0
    assert code.score_code(reply, reference) == 1.0  # its sentinel is fresh, the record still fits
    assert code.score_code(reply.replace("a + b", "a - b"), reference) == 0.0
    assert len(runs) == 2
