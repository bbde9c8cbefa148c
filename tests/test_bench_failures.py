"""A failing member is visible where it happens (issue 81): one stderr line at its first failed
call (with `-q` too, in `bench` and `ask`), its rows read "failed" in bench's tables instead of
the 0.0% of wrong answers, a bench in which no member answered exits with one error line and
saves nothing; and `bench --no-cache` reaches a backend as its code is now."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trinity_cli import cli
from trinity_cli.bench.options import BenchOptions
from trinity_cli.bench.runner import bench
from trinity_cli.errors import ConfigError
from trinity_cli.events import MemberFailing
from trinity_cli.runs.store import RunStore

from .conftest import run_main, write_pool
from .test_failed_members import BOOM, failing_pool


def task_file(tmp_path: Path, n: int = 12) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Q{i}: what is 12*7?", "answer": 84,
                                        "scorer": "numeric"}) + "\n" for i in range(n)))
    return path


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: member")]


def test_a_failing_member_is_named_at_its_first_failure_and_its_rows_read_failed(tmp_path: Path, monkeypatch,
                                                                                 capsys) -> None:
    pool, tasks = failing_pool(tmp_path), task_file(tmp_path)
    args = ["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test", "--systems", "single,selfloop,agree,oracle",
            "--random-seeds", "0", "-q"]
    code, out, err = run_main(args, monkeypatch, capsys)
    assert code == 0, err
    (line,) = warnings(err)  # one line, however long, for the one failing member
    assert line.startswith(f"warning: member 'bad' (kind scripted) failed: RuntimeError: {BOOM} (first in single:bad)")
    # The tables: the member's own rows are failed, not 0.0%; the others are as they were.
    assert "| single:bad | failed | — |" in out and "| selfloop:bad | failed | — |" in out
    assert "| single:m0 | 100.0% |" in out and "| agree | 100.0% |" in out and "| oracle | 100.0% |" in out
    (run,) = RunStore().list()
    summary = RunStore().load(run.id)["summary"]
    bad = summary["results"]["single:bad"]
    assert bad["overall"]["failed"] is True and bad["overall"]["accuracy"] == 0.0
    assert all(block["failed"] for block in bad["per_task"].values())
    assert "failed" not in summary["results"]["single:m0"]["overall"]
    assert "failed" not in summary["results"]["agree"]["overall"]  # it asked bad first, then answered


def test_the_first_failure_of_each_member_is_one_event(tmp_path: Path) -> None:
    pool, tasks = failing_pool(tmp_path), task_file(tmp_path)
    events: list[object] = []
    bench(BenchOptions(pool=str(pool), tasks=f"file:{tasks}:test", systems=["single", "agree"], random_seeds=0),
          progress=events.append)
    (failing,) = [e for e in events if isinstance(e, MemberFailing)]
    assert failing == MemberFailing(member="bad", kind="scripted", error=f"RuntimeError: {BOOM}", system="single:bad")


def test_a_failed_single_row_is_not_the_best_single(tmp_path: Path) -> None:
    """Tied at zero with a member that answers wrong, the failed member (first in pool order)
    is not the best single row that gaps and paired tests compare with."""
    models = [{"name": "bad", "kind": "scripted", "raises": BOOM},
              {"name": "wrong", "kind": "scripted", "default": "Answer: 7"}]
    pool, tasks = write_pool(tmp_path, {"name": "weak", "models": models}), task_file(tmp_path)
    data = bench(BenchOptions(pool=str(pool), tasks=f"file:{tasks}:test", systems=["single", "random"],
                              random_seeds=1)).data
    results = data["results"]
    assert results["single:bad"]["overall"]["failed"] and results["single:wrong"]["overall"]["accuracy"] == 0.0
    assert data["gaps"]["random"]["overall"]["best_single"] == "single:wrong"


def test_a_bench_in_which_no_member_answered_exits_with_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    pool, tasks = failing_pool(tmp_path, good=0), task_file(tmp_path)
    code, out, err = run_main(["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test", "-q"],
                              monkeypatch, capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(warnings(err)) == 1 and len(lines) == 2  # the warning at the first failure, then the error
    assert lines[-1].startswith(f"error: member 'bad' (kind scripted) failed: RuntimeError: {BOOM}")
    assert "no member answered in this bench" in lines[-1] and "unexpected" not in err
    assert RunStore().list() == []  # no run of failures is saved


def test_ask_quiet_names_a_member_that_failed_while_the_others_answered(tmp_path: Path) -> None:
    pool = failing_pool(tmp_path)
    result = CliRunner().invoke(cli.app, ["ask", "What is 12*7?", "--pool", str(pool), "--mode", "agree",
                                          "--no-warm", "-q"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith("84")
    (line,) = warnings(result.stderr)
    assert line == f"warning: member 'bad' failed: RuntimeError: {BOOM}; the others answered without it"


def test_bench_no_cache_reaches_the_backend_as_its_code_is_now(tmp_path: Path, monkeypatch, capsys) -> None:
    """A backend whose code changed but whose fingerprint did not: the cache keeps answering
    with the old code's replies; `--no-cache` asks the code as it is now, and writes nothing."""
    from trinity_cli.backends.scripted import ScriptedBackend
    from trinity_cli.messages import Completion

    pool, tasks = failing_pool(tmp_path, good=1), task_file(tmp_path)
    args = ["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test", "--systems", "single", "--random-seeds",
            "0", "--json", "-q"]

    def right(name: str, use_cache: bool = True) -> tuple[float, bool]:
        code, out, err = run_main(args + ([] if use_cache else ["--no-cache"]), monkeypatch, capsys)
        assert code == 0, err
        data = json.loads(out)
        episodes = [e for e in data["episodes"] if e["system"] == name]
        assert data["options"]["use_cache"] is use_cache
        return data["results"][name]["overall"]["accuracy"], all(e["cached"] for e in episodes)

    assert right("single:m0") == (1.0, False)
    monkeypatch.setattr(ScriptedBackend, "chat", lambda self, messages, params: Completion(
        text="Answer: 7", prompt_tokens=1, completion_tokens=1, latency_s=0.0))
    assert right("single:m0") == (1.0, True)  # the old code's replies, from the cache
    assert right("single:m0", use_cache=False) == (0.0, False)  # the code as it is now
    assert right("single:m0") == (1.0, True)  # nothing was written over them


def test_no_cache_and_replay_only_are_refused_together(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TRINITY_REPLAY_ONLY", "1")
    with pytest.raises(ConfigError) as info:
        BenchOptions(tasks=f"file:{task_file(tmp_path)}:test", use_cache=False).validate()
    assert "replay-only" in info.value.message
