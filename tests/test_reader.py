"""A reader (coordinator/reader.py): its start plays `agree`, a live episode is the matrix
play (evolve/reader_fit.py), its search learns to trust a member by what its replies show,
its file, and `trinity evolve --reader` / `trinity ask --head` with one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trinity_cli.answer_kinds import answer_kind, score_item
from trinity_cli.bench.matrix import matrix_of
from trinity_cli.bench.procedures import play as play_procedure
from trinity_cli.coordinator import reader as reader_mod
from trinity_cli.coordinator.reader import Reader, ReaderSource
from trinity_cli.errors import ConfigError, HeadMismatch
from trinity_cli.evolve import reader_fit
from trinity_cli.evolve.reader_recipe import ReaderRecipeOptions, run
from trinity_cli.policies.base import Episode
from trinity_cli.policies.reader import ReaderPolicy
from trinity_cli.pool.pool import open_pool
from trinity_cli.pool_config import load_pool
from trinity_cli.turns.settle import Examples

from .conftest import run_main, write_pool

ROOT = Path(__file__).resolve().parents[1]


def _pool_and_tasks(tmp_path: Path, n: int = 120) -> tuple[Path, Path]:
    """Two members, neither right on every item, and no answer they agree on: `sure` answers
    Alpha items right, sure of itself (log-probability -0.05 a token), and Beta items wrong,
    unsure (-2.0); `other` is wrong on Alpha and right on Beta, always at -1.0. Only the
    confidence of `sure`'s reply tells which member to trust; the question's family does not."""
    rules = {"sure": [{"match": "Alpha", "reply": "Answer: 42", "logprob": -0.05},
                      {"match": "Beta", "reply": "Answer: 7", "logprob": -2.0}],
             "other": [{"match": "Alpha", "reply": "Answer: 9", "logprob": -1.0},
                       {"match": "Beta", "reply": "Answer: 42", "logprob": -1.0}]}
    pool = write_pool(tmp_path, {"name": "duo", "models": [
        {"name": m, "kind": "scripted", "rules": r, "default": "Answer: 0"} for m, r in rules.items()]})
    task_file = tmp_path / "tasks.jsonl"
    lines = [{"id": f"q{i}", "prompt": f"{'Alpha' if i % 2 else 'Beta'} {i}: what is six times seven?",
              "answer": 42, "scorer": "numeric"} for i in range(n)]
    task_file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return pool, task_file


def _matrices(tmp_path: Path) -> tuple[Path, Path, Path]:
    pool, task_file = _pool_and_tasks(tmp_path)
    config = load_pool(str(pool))
    files = []
    for split in ("train", "val"):
        out = tmp_path / f"{split}.json"
        matrix_of(f"file:{task_file}:{split}", config, 1, out=out)
        files.append(out)
    return pool, files[0], files[1]


def test_the_start_plays_agree_on_every_recorded_training_item() -> None:
    data = reader_fit.read_matrix(ROOT / "recordings" / "local" / "matrix-train-32x2.json")
    models = list(next(iter(data.matrix.values())))
    start = Reader.agree_start("local", models, reader_fit.centres(data, models))
    assert len(data.items) == 96
    for item in data.items:
        row = {m: replies[:1] for m, replies in data.matrix[item.key].items()}
        mine = reader_fit.play(start, row, answer_kind(item.scorer))
        theirs = play_procedure("agree:" + ">".join(models), row, answer_kind(item.scorer), 5)
        assert (mine.correct, mine.calls, mine.tokens) == (theirs.correct, theirs.calls, theirs.tokens), item.key


def test_the_route_reader_plays_the_route_on_every_recorded_training_item() -> None:
    """Reader.route: one call, to the member the route names for the item's family."""
    from trinity_cli.coordinator.reader import family
    from trinity_cli.evolve.reader_recipe import route_members

    data = reader_fit.read_matrix(ROOT / "recordings" / "local" / "matrix-train-32x2.json")
    models = list(next(iter(data.matrix.values())))
    routes = {"answer": models[0], "choice": models[1], "code": models[2]}
    assert set(route_members(data, models).values()) <= set(models)
    route = Reader.route("local", models, routes)
    for item in data.items:
        row = data.matrix[item.key]
        mine = reader_fit.play(route, row, answer_kind(item.scorer))
        theirs = play_procedure(f"single:{routes[family(answer_kind(item.scorer))]}", row, answer_kind(item.scorer), 5)
        assert (mine.correct, mine.calls, mine.tokens) == (theirs.correct, 1, theirs.tokens), item.key


@pytest.mark.parametrize("calls", [4, 5, 6])
def test_a_start_with_more_calls_than_members_plays_agree_at_that_budget(calls: int) -> None:
    """Beyond one call a member the start asks fresh attempts round-robin, as `ask --mode
    agree` does at AGREE_TURNS calls: the training matrix holds two replies a member."""
    data = reader_fit.read_matrix(ROOT / "recordings" / "local" / "matrix-train-32x2.json")
    models = list(next(iter(data.matrix.values())))
    start = Reader.agree_start("local", models, reader_fit.centres(data, models), calls=calls)
    fourth = 0
    for item in data.items:
        row = data.matrix[item.key]
        mine = reader_fit.play(start, row, answer_kind(item.scorer))
        theirs = play_procedure("agree:" + ">".join(models), row, answer_kind(item.scorer), calls)
        assert (mine.correct, mine.calls, mine.tokens) == (theirs.correct, theirs.calls, theirs.tokens), item.key
        fourth += mine.calls > len(models)
    assert fourth >= 10  # the calls beyond the members' first are played, not a corner case


def test_the_search_learns_whom_to_trust_from_a_reply_s_confidence(tmp_path: Path) -> None:
    _, train_file, val_file = _matrices(tmp_path)
    train, val = reader_fit.read_matrix(train_file), reader_fit.read_matrix(val_file)
    assert len(train.items) >= 40 and len(val.items) >= 10
    found = reader_fit.search(train, val, "duo", ["sure", "other"], generations=30, popsize=12, seed=0)
    start, learned = reader_fit.score(found.start, val), reader_fit.score(found.reader, val)
    # agree never sees two answers agree and settles on sure's: right on the Alpha half only.
    assert start.accuracy == pytest.approx(0.5, abs=0.15)
    assert learned.accuracy == 1.0
    # It stops after sure's reply when sure is confident: fewer calls than asking both.
    assert learned.tokens < start.tokens
    assert found.kept_generation > 0 and found.curves[0]["generation"] == 0
    assert len(found.curves) == 31
    again = reader_fit.search(train, val, "duo", ["sure", "other"], generations=30, popsize=12, seed=0)
    assert again.reader.flat().tolist() == found.reader.flat().tolist()  # reproducible from its seed


def test_a_live_episode_is_what_the_matrix_play_foretold(tmp_path: Path) -> None:
    pool_file, train_file, val_file = _matrices(tmp_path)
    train, val = reader_fit.read_matrix(train_file), reader_fit.read_matrix(val_file)
    found = reader_fit.search(train, val, "duo", ["sure", "other"], generations=10, popsize=8, seed=1)
    pool = open_pool(load_pool(str(pool_file)))
    policy = ReaderPolicy(found.reader)
    assert policy.name == "reader"

    class Engines:
        def __init__(self) -> None:
            self.pool = pool

    early = 0
    try:
        for item in val.items:
            foretold = reader_fit.play(found.reader, val.matrix[item.key], answer_kind(item.scorer))
            transcript = policy.play(Engines(), Episode(item.prompt, max_turns=5, kind=item.scorer,  # type: ignore[arg-type]
                                                        examples=Examples.from_reference(item.reference)))
            assert len(transcript.turns) == foretold.calls
            assert (score_item(item, transcript.answer or "") == 1.0) == foretold.correct
            assert all(t.alone and t.role.value == "worker" for t in transcript.turns)
            if foretold.calls < 2:  # it stopped before asking every member: its score said so
                assert transcript.stop_reason == "read"
                early += 1
    finally:
        pool.close()
    assert early > 0


def test_the_reader_file_round_trips_and_damage_is_one_line(tmp_path: Path) -> None:
    reader = Reader.agree_start("duo", ["sure", "other"], {"answer": {"sure": {"mean": -0.5, "low": -1.0}}})
    moved = reader.with_flat(reader.flat() + 0.25)
    moved.manifest["name"] = "mine"
    reader_mod.save(moved, tmp_path / "r")
    again = reader_mod.load(tmp_path / "r")
    assert again.flat().tolist() == moved.flat().tolist() and again.centres == moved.centres
    assert reader_mod.is_reader(tmp_path / "r") and again.manifest["name"] == "mine"
    with pytest.raises(HeadMismatch):
        again.check("duo", ["other", "sure"])
    with pytest.raises(ConfigError, match="weights"):
        reader.with_flat(reader.flat()[:-1])
    (tmp_path / "r" / "manifest.json").write_text('{"policy": "reader", "format": 99}')
    with pytest.raises(ConfigError, match="is not a reader of format 1"):
        reader_mod.load(tmp_path / "r")


def test_a_member_without_log_probabilities_reads_as_its_centre() -> None:
    reader = Reader.agree_start("duo", ["sure", "other"], {"answer": {"sure": {"mean": -0.5, "low": -1.0}}})
    source = ReaderSource(reader)
    decision = source.next_member([], answer_kind("numeric"))
    assert decision.model == "sure" and decision.alone
    from trinity_cli.messages import Role, Turn

    turn = Turn(index=0, model="sure", role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[], role_probs=[],
                messages=[], reply="Answer: 4", prompt_tokens=5, completion_tokens=3, latency_s=0.1,
                coordinator_s=0.0, alone=True, vote=True)
    features = reader.features(turn, answer_kind("numeric"))
    assert not features.measured and features.confidence == 0.0 and features.low == 0.0
    turn.logprob_stats = {"v": 1, "n": 3, "mean": -0.25, "low": -0.75}
    features = reader.features(turn, answer_kind("numeric"))
    assert features.measured and features.confidence == pytest.approx(0.25) and features.low == pytest.approx(0.25)


def test_evolve_reader_writes_a_reader_that_ask_plays(tmp_path: Path, monkeypatch, capsys) -> None:
    pool_file, train_file, val_file = _matrices(tmp_path)
    out = tmp_path / "heads" / "duo-reader"
    code, stdout, stderr = run_main(["evolve", "--reader", "--pool", str(pool_file), "--train-matrix", str(train_file),
                                     "--val-matrix", str(val_file), "--generations", "30", "--popsize", "12",
                                     "--out", str(out)], monkeypatch, capsys)
    assert code == 0, stderr
    assert stdout.strip() == str(out)
    assert "reader *" in stderr and "agree" in stderr and "cvote-all" in stderr
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["winner"] == "reader" and verdict["head"] == str(out)
    rows = {r["row"]: r for r in verdict["table"]}
    assert rows["reader"]["accuracy"] == 1.0 and rows["agree"]["accuracy"] < 0.7
    assert rows["reader"]["tokens"] < rows["cvote-all"]["tokens"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["policy"] == "reader" and manifest["made"] == "evolved" and manifest["recipe"]["winner"] == "reader"
    code, stdout, stderr = run_main(["ask", "--pool", str(pool_file), "--head", str(out),
                                     "Alpha 3: what is six times seven?"], monkeypatch, capsys)
    assert code == 0, stderr
    assert "42" in stdout
    code, stdout, stderr = run_main(["ask", "--pool", str(pool_file), "--head", str(out),
                                     "Beta 4: what is six times seven?"], monkeypatch, capsys)
    assert code == 0, stderr
    assert "42" in stdout


def test_bench_plays_a_reader_as_a_head_row(tmp_path: Path, monkeypatch, capsys) -> None:
    pool_file, train_file, val_file = _matrices(tmp_path)
    train, val = reader_fit.read_matrix(train_file), reader_fit.read_matrix(val_file)
    found = reader_fit.search(train, val, "duo", ["sure", "other"], generations=30, popsize=12, seed=0)
    found.reader.manifest["name"] = "duo-reader"
    reader_mod.save(found.reader, tmp_path / "reader")
    task_file = tmp_path / "tasks.jsonl"
    code, stdout, stderr = run_main(["bench", "--pool", str(pool_file), "--tasks", f"file:{task_file}:test",
                                     "--head", str(tmp_path / "reader"), "--systems", "single,agree,head",
                                     "--random-seeds", "0", "--json"], monkeypatch, capsys)
    assert code == 0, stderr
    results = json.loads(stdout)["results"]
    assert results["head:duo-reader"]["overall"]["accuracy"] == 1.0
    assert results["agree"]["overall"]["accuracy"] < 0.7


def _verdict(tmp_path: Path, pool: Path, items: list[dict], generations: int, popsize: int,
             out: str) -> tuple[Any, list[Path]]:
    """The reader recipe on `items` (a JSONL task file's lines): both k = 1 matrices made on
    the pool, then the search and the verdict, the head (if any) written to tmp_path/out."""
    task_file = tmp_path / "t.jsonl"
    task_file.write_text("".join(json.dumps(item) + "\n" for item in items))
    config = load_pool(str(pool))
    files = []
    for split in ("train", "val"):
        files.append(tmp_path / f"{split}.json")
        matrix_of(f"file:{task_file}:{split}", config, 1, out=files[-1])
    done = run(ReaderRecipeOptions(pool=str(pool), train_matrix=str(files[0]), val_matrix=str(files[1]),
                                   generations=generations, popsize=popsize, out=str(tmp_path / out)))
    return done, files


def test_a_verdict_without_a_winning_reader_writes_no_reader(tmp_path: Path) -> None:
    """Where nothing the replies show tells right from wrong, the search cannot beat the
    simpler rows, and the recipe writes only the verdict."""
    rules = {"a": [{"match": "Alpha", "reply": "Answer: 42"}], "b": [{"match": "Beta", "reply": "Answer: 42"}]}
    pool = write_pool(tmp_path, {"name": "flat", "models": [
        {"name": m, "kind": "scripted", "rules": r, "default": "Answer: 1"} for m, r in rules.items()]})
    items = [{"id": f"q{i}", "prompt": f"{'Alpha' if i % 2 else 'Beta'} {i}?", "answer": 42, "scorer": "numeric"}
             for i in range(60)]
    done, files = _verdict(tmp_path, pool, items, 5, 6, "never")
    assert done.winner != "reader" and done.head_dir is None
    assert not (tmp_path / "never").exists() and done.verdict_path.is_file()
    # a and b never agree: `agree` asks a again (its third call), which the k = 1 matrix lacks;
    # the verdict makes that call, so agree plays as `ask --mode agree` does, and leaves the file
    verdict = json.loads(done.verdict_path.read_text())
    agree = next(r for r in done.table if r["row"] == "agree")
    assert agree["capped"] == 0 and verdict["completed"] == agree["n"] > 0
    assert agree["tokens"] > next(r for r in done.table if r["row"] == "single:a")["tokens"] * 2
    assert all(len(replies) == 1 for row in json.loads(files[1].read_text())["matrix"].values()
               for replies in row.values())


def test_a_winning_route_is_written_as_the_reader_that_plays_it(tmp_path: Path, monkeypatch, capsys) -> None:
    """m1 is right on numbers, m0 on letters: the route (one call, by family) is as right as any
    row and cheapest, so it wins; the verdict writes it as a reader `ask --head` plays."""
    rules = {"m0": [{"match": "letter", "reply": "Answer: B"}], "m1": [{"match": "number", "reply": "Answer: 42"}]}
    pool = write_pool(tmp_path, {"name": "split", "models": [
        {"name": m, "kind": "scripted", "rules": r, "default": "Answer: 7"} for m, r in rules.items()]})
    items = [{"id": f"q{i}", "prompt": f"Give the number {i}.", "answer": 42, "scorer": "numeric"} if i % 2 else
             {"id": f"q{i}", "prompt": f"Give the letter {i}.", "answer": "B", "scorer": "choice"} for i in range(40)]
    done, _ = _verdict(tmp_path, pool, items, 3, 4, "routed")
    assert done.winner == "route" and done.head_dir == tmp_path / "routed"
    written = reader_mod.load(tmp_path / "routed")
    assert written.calls == 1 and written.manifest["made"] == "route"
    assert written.manifest["routes"] == {"answer": "m1", "choice": "m0", "code": "m0"}
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(["ask", "Give the number 99.", "--pool", str(pool), "--head", str(tmp_path / "routed"),
                               "--json"], monkeypatch, capsys)
    assert code == 0, err
    turns = json.loads(out)["transcript"]["turns"]
    assert [t["model"] for t in turns] == ["m1"] and "untrained" not in err


def test_a_reader_with_more_calls_than_members_needs_their_fresh_attempts(tmp_path: Path, monkeypatch,
                                                                          capsys) -> None:
    pool_file, train_file, val_file = _matrices(tmp_path)
    code, _, stderr = run_main(["evolve", "--reader", "--pool", str(pool_file), "--train-matrix", str(train_file),
                                "--val-matrix", str(val_file), "--reader-calls", "3", "--generations", "2"],
                               monkeypatch, capsys)
    assert code != 0 and "--reader-calls 3 asks each member up to 2 times" in stderr
    assert "--k 2" in stderr and "Traceback" not in stderr and stderr.strip().splitlines()[-1].startswith("error:")
    config = load_pool(str(pool_file))
    matrix_of(f"file:{tmp_path / 'tasks.jsonl'}:train", config, 2, out=train_file)
    done = run(ReaderRecipeOptions(pool=str(pool_file), train_matrix=str(train_file), val_matrix=str(val_file),
                                   generations=3, popsize=6, calls=3, out=str(tmp_path / "r3")))
    record = json.loads(done.verdict_path.read_text())
    assert record["phases"]["search"]["calls"] == 3
    assert all(r["capped"] == 0 for r in record["table"])


@pytest.mark.parametrize("args, says", [
    (["--reader", "--reader-weights", "conf,nope"], "--reader-weights: no weight group 'nope'"),
    (["--generations", "3"], "--generations is an option of --reader"),
    (["--reader", "--train-matrix", "missing.json", "--val-matrix", "missing.json"], "cannot read matrix file"),
])
def test_bad_reader_options_are_one_line(tmp_path: Path, monkeypatch, capsys, args: list[str], says: str) -> None:
    pool, _ = _pool_and_tasks(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, stdout, stderr = run_main(["evolve", "--pool", str(pool), *args], monkeypatch, capsys)
    assert code != 0 and says in stderr and "Traceback" not in stderr
    assert len([line for line in stderr.splitlines() if line.strip()]) <= 2


def test_the_search_moves_only_the_weight_groups_it_is_given(tmp_path: Path) -> None:
    _, train_file, val_file = _matrices(tmp_path)
    train, val = reader_fit.read_matrix(train_file), reader_fit.read_matrix(val_file)
    found = reader_fit.search(train, val, "duo", ["sure", "other"], generations=8, popsize=8, free=("conf", "margin"))
    start, moved = found.start.flat(), found.reader.flat()
    mask = found.start.mask(("conf", "margin"))
    assert (start[~mask] == moved[~mask]).all() and (start[mask] != moved[mask]).any()
