"""`trinity ask` through a warm `trinity serve` (serve/warm.py): the same answer and run as in
process, and a dead server bypassed with one line, never a hang."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import run_main, scripted_pool

QUESTION = "What is 12*7?"


def _start(pool: Path, home: Path, *extra: str, env_extra: dict[str, str] | None = None
           ) -> tuple[subprocess.Popen, Path]:
    env = {**os.environ, "TRINITY_HOME": str(home), **(env_extra or {})}
    process = subprocess.Popen([sys.executable, "-m", "trinity_cli", "serve", "--pool", str(pool), "--port", "0",
                                *extra],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        records = list((home / "warm").glob("serve-*.json")) if (home / "warm").is_dir() else []
        if records:
            return process, records[0]
        if process.poll() is not None:
            raise AssertionError("trinity serve ended before it listened")
        time.sleep(0.1)
    process.kill()
    raise AssertionError("trinity serve wrote no warm record within 60 s")


def _essentials(record: dict) -> dict:
    """What an answer is made of, not how long it took or what the cache held."""
    turns = [(t["model"], t["role"], t["reply"], t["verdict"]) for t in record["transcript"]["turns"]]
    keep = ("question", "pool", "mode", "head", "backbone", "seed", "episode_seed", "greedy", "answer", "max_turns")
    return {"turns": turns, **{k: record[k] for k in keep}}


@pytest.mark.slow
def test_ask_answers_through_a_warm_server_as_it_would_in_process(tmp_path: Path, monkeypatch, capsys,
                                                                  trinity_home: Path) -> None:
    pool = scripted_pool(tmp_path)
    process, record_file = _start(pool, trinity_home)
    try:
        from trinity_cli.ask import answer as ask_mod

        def no_pool_here(*args, **kwargs):
            raise AssertionError("the question was answered in this process")

        with monkeypatch.context() as patched:
            patched.setattr(ask_mod, "build", no_pool_here)
            code, warm_out, err = run_main(["ask", "--pool", str(pool), QUESTION], monkeypatch, capsys)
        assert code == 0, err
        code, local_out, err = run_main(["ask", "--pool", str(pool), "--no-warm", QUESTION], monkeypatch, capsys)
        assert code == 0, err
        assert warm_out == local_out and warm_out.strip().endswith("84")
        code, listing, _ = run_main(["inspect", "--json"], monkeypatch, capsys)
        runs = [r["id"] for r in json.loads(listing) if r["kind"] == "ask"]
        assert len(runs) == 2
        records = []
        for run in runs:
            code, shown, _ = run_main(["inspect", run, "--json"], monkeypatch, capsys)
            records.append(json.loads(shown))
        assert _essentials(records[0]) == _essentials(records[1])
        assert "via" not in records[0] and "via" not in records[1]  # the run is ask's own
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    # The server is gone, its record left behind: one line, then the answer from this process.
    assert record_file.exists()
    code, out, err = run_main(["ask", "--pool", str(pool), "-q", QUESTION], monkeypatch, capsys)
    assert code == 0 and out.strip().endswith("84")
    assert err.count("does not answer: answering in this process") == 1 and not record_file.exists()


@pytest.mark.slow
def test_a_no_cache_ask_answers_through_a_no_cache_server(tmp_path: Path, monkeypatch, capsys,
                                                          trinity_home: Path) -> None:
    pool = scripted_pool(tmp_path)
    process, _ = _start(pool, trinity_home, "--no-cache")
    try:
        from trinity_cli.ask import answer as ask_mod

        def no_pool_here(*args, **kwargs):
            raise AssertionError("the question was answered in this process")

        with monkeypatch.context() as patched:
            patched.setattr(ask_mod, "build", no_pool_here)
            code, out, err = run_main(["ask", "--pool", str(pool), "--no-cache", "-q", QUESTION], monkeypatch, capsys)
        assert code == 0 and out.strip().endswith("84"), err
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()


@pytest.mark.slow
def test_a_warm_server_that_wants_a_token_gets_it_from_the_same_variable(tmp_path: Path, monkeypatch, capsys,
                                                                         trinity_home: Path) -> None:
    pool = scripted_pool(tmp_path)
    process, _ = _start(pool, trinity_home, "--api-key-env", "TRINITY_WARM_TOKEN",
                        env_extra={"TRINITY_WARM_TOKEN": "s3cret"})
    try:
        from trinity_cli.ask import answer as ask_mod

        def no_pool_here(*args, **kwargs):
            raise AssertionError("the question was answered in this process")

        monkeypatch.setenv("TRINITY_WARM_TOKEN", "s3cret")
        with monkeypatch.context() as patched:
            patched.setattr(ask_mod, "build", no_pool_here)
            code, out, err = run_main(["ask", "--pool", str(pool), "-q", QUESTION], monkeypatch, capsys)
        assert code == 0 and out.strip().endswith("84"), err
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()


def test_a_server_of_another_pool_is_not_used_and_a_silent_one_is_bypassed(tmp_path: Path, caplog,
                                                                          trinity_home: Path) -> None:
    from trinity_cli.ask import AskOptions
    from trinity_cli.pool_config import load_pool
    from trinity_cli.serve import warm

    pool = scripted_pool(tmp_path)
    (tmp_path / "other").mkdir()
    other = scripted_pool(tmp_path / "other")
    record = warm.write_record("http://127.0.0.1:9", load_pool(str(other)), None, None, "auto", True, None)
    assert warm.find(AskOptions(pool=str(pool))) is None and record.exists()  # not this pool: left alone
    record.unlink()
    # This pool's record, its process alive (this one) but nothing listening: stale, removed.
    record = warm.write_record("http://127.0.0.1:9", load_pool(str(pool)), None, None, "auto", True, None)
    started = time.monotonic()
    assert warm.find(AskOptions(pool=str(pool))) is None and not record.exists()
    assert time.monotonic() - started < 10 and "does not answer" in caplog.text
    # Another head, or no cache: not the server's question either.
    record = warm.write_record("http://127.0.0.1:9", load_pool(str(pool)), None, None, "auto", True, None)
    assert warm.find(AskOptions(pool=str(pool), head="untrained")) is None and record.exists()
    assert warm.find(AskOptions(pool=str(pool), use_cache=False)) is None and record.exists()


@pytest.mark.slow
def test_keep_warm_starts_a_server_that_answers_the_next_question_then_stops_when_idle(
        tmp_path: Path, monkeypatch, capsys, trinity_home: Path) -> None:
    pool = scripted_pool(tmp_path)
    code, first, err = run_main(["ask", "--pool", str(pool), "--keep-warm", "3", "-q", QUESTION], monkeypatch, capsys)
    assert code == 0 and first.strip().endswith("84"), err
    records = list((trinity_home / "warm").glob("serve-*.json"))
    assert len(records) == 1
    pid = json.loads(records[0].read_text())["pid"]
    try:
        from trinity_cli.ask import answer as ask_mod

        with monkeypatch.context() as patched:
            patched.setattr(ask_mod, "build", lambda *a, **k: (_ for _ in ()).throw(AssertionError("in process")))
            code, second, err = run_main(["ask", "--pool", str(pool), "-q", QUESTION], monkeypatch, capsys)
        assert code == 0 and second == first, err
        deadline = time.monotonic() + 30  # idle for 3 s: it stops and takes its record away
        while records[0].exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not records[0].exists()
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_the_warm_client_imports_nothing_that_answers() -> None:
    """A warm `ask` pays only for what sends the question: no model code, no numpy."""
    probe = ("import sys, trinity_cli.cli, trinity_cli.render.terminal, trinity_cli.serve.warm; "
             "print(sorted(m for m in ('numpy', 'trinity_cli.ask.answer', 'trinity_cli.serve.service', "
             "'trinity_cli.pool.pool', 'trinity_cli.coordinator.policy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_warm_server_started_for_a_no_cache_ask_does_not_use_the_cache_either(tmp_path: Path, monkeypatch) -> None:
    """`ask --no-cache --keep-warm` starts the server `find` will then match: `serve --no-cache`."""
    from trinity_cli.ask import AskOptions
    from trinity_cli.serve import warm

    started: list[list[str]] = []

    class Exited:
        pid = 0

        def poll(self) -> int:
            return 1

    def popen(args, **kwargs):
        started.append(list(args))
        return Exited()

    monkeypatch.setattr(warm.subprocess, "Popen", popen)
    pool = str(scripted_pool(tmp_path))
    assert warm.start(AskOptions(pool=pool, use_cache=False), 5) is None
    assert warm.start(AskOptions(pool=pool), 5) is None
    assert "--no-cache" in started[0] and "--no-cache" not in started[1]


@pytest.mark.slow
def test_ask_c_continues_a_conversation_through_a_warm_server(tmp_path: Path, monkeypatch, capsys,
                                                              trinity_home: Path) -> None:
    """`ask -c` with a warm server: the server answers the follow-up after the earlier messages
    and saves it in the conversation's run; nothing is answered in this process."""
    pool = scripted_pool(tmp_path, n_models=1, router="agree", rules=[
        {"match": r"Task:\n[^\n]*12\*8", "reply": "Answer: 96"},
        {"match": r"Task:\n[^\n]*12\*7", "reply": "Answer: 84"}])
    process, _ = _start(pool, trinity_home)
    try:
        from trinity_cli.ask import answer as ask_mod
        from trinity_cli.ask import conversation as conv_mod

        def no_pool_here(*args, **kwargs):
            raise AssertionError("the question was answered in this process")

        code, out, err = run_main(["ask", "--pool", str(pool), "--max-turns", "1", QUESTION], monkeypatch, capsys)
        assert code == 0 and out == "84\n", err
        with monkeypatch.context() as patched:
            patched.setattr(ask_mod, "build", no_pool_here)
            patched.setattr(conv_mod, "build", no_pool_here)
            code, out, err = run_main(["ask", "--pool", str(pool), "--max-turns", "1", "-c", "And 12*8?"],
                                      monkeypatch, capsys)
        assert code == 0 and out == "96\n", err
        code, shown, _ = run_main(["inspect", "run-2", "--json"], monkeypatch, capsys)
        record = json.loads(shown)
        assert record["kind"] == "chat" and record["continues"] == "run-1"
        assert [e["answer"] for e in record["exchanges"]] == ["84", "96"]
        context = record["exchanges"][1]["transcript"]["context"]
        assert [m["content"] for m in context] == [QUESTION, "84"]
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
