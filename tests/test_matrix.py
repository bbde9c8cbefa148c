"""`trinity matrix`: the sample matrix (bench/matrix.py), its fixed procedures
(bench/procedures.py), the file evolve --init-labels reads, and its bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trinity_cli import tasks
from trinity_cli.answer_kinds import answer_kind
from trinity_cli.bench.matrix import MatrixOptions, sample_matrix
from trinity_cli.events import MatrixItemPlayed
from trinity_cli.evolve.label_fit import read_labels

from .conftest import run_main, write_pool


def _pool_and_tasks(tmp_path: Path) -> tuple[Path, Path]:
    """m0 answers the "Question" items right (42) and the "Puzzle" items wrong (7); m1 the
    reverse. Scripted replies repeat, so a member's fresh attempt says what its first did."""
    rules = {"m0": [{"match": "Question", "reply": "Answer: 42"}],
             "m1": [{"match": "Puzzle", "reply": "Answer: 42"}]}
    pool = write_pool(tmp_path, {"name": "duo", "models": [
        {"name": n, "kind": "scripted", "rules": r, "default": "Answer: 7"} for n, r in rules.items()]})
    task_file = tmp_path / "tasks.jsonl"
    lines = [{"id": f"q{i}", "prompt": f"{'Question' if i % 2 else 'Puzzle'} {i}: what is six times seven?",
              "answer": 42, "scorer": "numeric"} for i in range(40)]
    task_file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return pool, task_file


def test_matrix_scores_every_procedure_and_writes_what_evolve_reads(tmp_path: Path, monkeypatch, capsys) -> None:
    pool, task_file = _pool_and_tasks(tmp_path)
    out = tmp_path / "m.json"
    code, stdout, stderr = run_main(["matrix", "--pool", str(pool), "--tasks", f"file:{task_file}", "--split", "train",
                                     "--n", "8", "--k", "2", "--out", str(out)], monkeypatch, capsys)
    assert code == 0, stderr
    assert stdout.startswith(f"# Procedures on file:{task_file}:train:8 (k = 2, agree budget 5 calls)")
    data = json.loads(out.read_text())
    keys = list(data["matrix"])
    questions = [k for k in keys if int(k.rsplit("/q", 1)[1]) % 2]
    assert len(keys) == 8 and data["models"] == ["m0", "m1"] and data["k"] == 2
    table = data["table"]
    assert table["single:m0"]["all"]["correct"] == len(questions)
    assert table["single:m1"]["all"]["correct"] == 8 - len(questions)
    # m0, m1, m0 again: the two m0 answers agree, right on Question items only, at 3 calls.
    assert table["agree:m0>m1"]["all"]["correct"] == len(questions)
    assert table["agree:m0>m1"]["all"]["calls"] == 3.0
    assert sum(data["any_right"].values()) == 8
    assert "| single:m0 |" in stdout and "| any-right (bound) |" in stdout
    labels = read_labels(out, ["m0", "m1"])
    assert all(labels[k].tolist() == ([1.0, 0.0] if k in questions else [0.0, 1.0]) for k in keys)


def test_a_second_run_replays_every_call(tmp_path: Path) -> None:
    pool, task_file = _pool_and_tasks(tmp_path)
    options = MatrixOptions(pool=str(pool), tasks=f"file:{task_file}", split="train", n=3, k=2)
    first: list[MatrixItemPlayed] = []
    again: list[MatrixItemPlayed] = []
    assert sample_matrix(options, progress=first.append) == sample_matrix(options, progress=again.append)
    assert [e.index for e in first] == [1, 2, 3] and first[-1].total == 3
    assert first[-1].calls == 12 and first[-1].cache_hits == 0  # 3 items x 2 members x 2 replies
    assert again[-1].calls == again[-1].cache_hits == 12


def test_members_choose_and_order_the_columns(tmp_path: Path) -> None:
    pool, task_file = _pool_and_tasks(tmp_path)
    result = sample_matrix(MatrixOptions(pool=str(pool), tasks=f"file:{task_file}", split="train", n=2, k=1,
                                         members=("m1",)))
    assert result["models"] == ["m1"]
    assert set(result["table"]) == {"single:m1", "agree:m1", "vote-all", "cvote-all", "mux-all"}


def test_complete_agree_holds_the_calls_agree_makes_beyond_k(tmp_path: Path, monkeypatch, capsys) -> None:
    """Three members that disagree on Puzzle items: `ask --mode agree` asks the first a
    second time there (its fourth call); --complete-agree records that attempt, the matrix's
    agree row plays it, the other procedures and labels read k replies, and bench's agree
    replays from what the matrix recorded."""
    pool = write_pool(tmp_path, {"name": "trio", "models": [
        {"name": n, "kind": "scripted", "rules": [{"match": "Question", "reply": "Answer: 42"}] if n != "c" else [],
         "default": f"Answer: {d}"} for n, d in (("a", 1), ("b", 2), ("c", 3))]})
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"{'Question' if i % 2 else 'Puzzle'} {i}?",
                                             "answer": 42, "scorer": "numeric"}) + "\n" for i in range(40)))
    out = tmp_path / "m.json"
    # every item of the test split (8 of the 40, two of them Puzzles), because which few of them a
    # draw takes depends on the task's name, and a file: task's name holds its (temporary) path
    n = len(tasks.load_split(f"file:{task_file}", "test"))
    code, _, stderr = run_main(["matrix", "--pool", str(pool), "--tasks", f"file:{task_file}", "--split", "test",
                                "--n", str(n), "--k", "1", "--budget", "4", "--complete-agree", "--out", str(out)],
                               monkeypatch, capsys)
    assert code == 0, stderr
    data = json.loads(out.read_text())
    puzzles = [k for k in data["matrix"] if int(k.rsplit("/q", 1)[1]) % 2 == 0]
    assert puzzles and len(puzzles) < n
    for key, row in data["matrix"].items():
        assert [len(row[m]) for m in "abc"] == ([2, 1, 1] if key in puzzles else [1, 1, 1])
    assert data["k"] == 1 and "sc:a@2" not in data["table"]
    agree = data["table"]["agree:a>b>c"]["all"]
    assert agree["calls"] == (4 * len(puzzles) + 2 * (n - len(puzzles))) / n
    assert data["table"]["vote-all"]["all"]["calls"] == 3.0  # the first k replies a member only
    code, stdout, stderr = run_main(["--replay-only", "bench", "--pool", str(pool), "--tasks",
                                     f"file:{task_file}:test:{n}", "--systems", "agree", "--random-seeds", "0",
                                     "--json"], monkeypatch, capsys)
    assert code == 0, stderr  # every call agree makes was recorded by the matrix
    assert json.loads(stdout)["results"]["agree"]["overall"]["accuracy"] == agree["correct"] / n


@pytest.mark.parametrize("args, says", [
    (["--members", "m0,nobody"], "--members: pool 'duo' has no member 'nobody'"),
    (["--split", "later"], "later"),
    (["--k", "0"], "--k"),
])
def test_bad_input_is_one_line(tmp_path: Path, monkeypatch, capsys, args: list[str], says: str) -> None:
    pool, task_file = _pool_and_tasks(tmp_path)
    code, stdout, stderr = run_main(["matrix", "--pool", str(pool), "--tasks", f"file:{task_file}", "--n", "2",
                                     *args], monkeypatch, capsys)
    assert code != 0 and stdout == ""
    assert says in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1


def _reply(answer: str, correct: bool, mean: float | None = None, passed: bool | None = None) -> object:
    from trinity_cli.bench.procedures import Reply
    from trinity_cli.messages import Role, Turn

    turn = Turn(index=0, model="m", role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[], role_probs=[],
                messages=[], reply=f"So it is {answer}.\nAnswer: {answer}", prompt_tokens=10, completion_tokens=5,
                latency_s=0.0, coordinator_s=0.0, vote=True,
                logprob_stats=None if mean is None else {"v": 1, "n": 5, "mean": mean},
                examples=None if passed is None else {"passed": passed})
    return Reply(turn, correct)


def test_the_confidence_weighted_vote_and_the_most_consistent_member() -> None:
    """cvote-all and mux-all (bench/procedures.py) on one item of three members, two replies each."""
    from trinity_cli.bench.procedures import play

    row = {  # two unsure replies say 7; one sure reply says 42, which is right
        "a": [_reply("7", False, -2.0), _reply("42", True, -0.05)],
        "b": [_reply("7", False, -1.5), _reply("9", False, -3.0)],
        "c": [_reply("42", True, -0.1), _reply("42", True, -0.2)],
    }
    numeric = answer_kind("numeric")
    assert not play("vote-all", {"a": row["a"], "b": row["b"]}, numeric, 5).correct  # 7 twice, 42 once
    assert play("cvote-all", {"a": row["a"], "b": row["b"]}, numeric, 5).correct  # 0.95 beats 0.14 + 0.22
    mux = play("mux-all", row, numeric, 5)
    assert mux.correct and mux.calls == 6  # c agrees with itself; a and b do not
    # Code: among replies that pass their examples, the most confident.
    code = {"a": [_reply("x", False, -0.1, passed=True)], "b": [_reply("y", True, -0.01, passed=True)],
            "c": [_reply("z", False, -0.001, passed=False)]}
    assert play("cvote-all", code, answer_kind("code"), 5).correct
