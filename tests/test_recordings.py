"""Recordings (recordings/): the file's checks and bytes, export and import between homes,
replay-only mode, and runs that move (an evolve run killed in one home, resumed in another)."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trinity_cli.backends.scripted import ScriptedBackend
from trinity_cli.bench.runner import bench
from trinity_cli.errors import RecordingError
from trinity_cli.evolve.evolution import evolve
from trinity_cli.evolve.options import EvolveOptions
from trinity_cli.keyed_cache import content_key
from trinity_cli.recordings import fileformat, transfer
from trinity_cli.recordings.fileformat import Entry
from trinity_cli.runs.store import JOURNAL

from . import test_bench, test_evolve
from .conftest import run_main, write_pool
from .test_parallel import npz_members


def _entry(i: int, text: str = "Answer: 42") -> Entry:
    request = {"v": 2, "fingerprint": "scripted:abc", "messages": [["user", f"question {i}"]],
               "params": {"max_tokens": 8, "temperature": 0.0, "top_p": 1.0, "seed": 0, "stop": []}}
    reply = {"text": text, "prompt_tokens": 3, "completion_tokens": 2, "latency_s": 0.5,
             "finish_reason": "stop", "cost_usd": None}
    return Entry("rollouts", content_key("r2:", request), request, reply)


def _home(monkeypatch: pytest.MonkeyPatch, path: Path) -> Path:
    monkeypatch.setenv("TRINITY_HOME", str(path))
    return path


def test_the_same_entries_give_the_same_bytes_and_appends_keep_the_old_ones(tmp_path: Path) -> None:
    a, b = tmp_path / "a.gz", tmp_path / "b.gz"
    assert fileformat.append(a, [_entry(2), _entry(1)]) == (2, 2)
    assert fileformat.append(b, [_entry(1), _entry(2)]) == (2, 2)
    assert a.read_bytes() == b.read_bytes()  # sorted by key, gzip without a time stamp
    before = a.read_bytes()
    assert fileformat.append(a, [_entry(1), _entry(3)]) == (1, 3)  # only the new key
    assert a.read_bytes().startswith(before)  # append-only: earlier bytes never change
    assert fileformat.append(a, [_entry(3)]) == (0, 3)
    entries, refused = fileformat.read(a)
    assert [e.key for e in entries] == sorted([_entry(1).key, _entry(2).key]) + [_entry(3).key] and not refused


def _write_lines(path: Path, lines: list[str]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def test_an_entry_under_the_wrong_key_or_with_a_bad_sum_is_refused_by_name(tmp_path: Path) -> None:
    good, moved, edited = _entry(1), _entry(2), _entry(3)
    wrong_key = json.loads(moved.line())
    wrong_key["key"] = "r2:" + "0" * 64
    wrong_key["sum"] = Entry("rollouts", wrong_key["key"], moved.request, moved.value).checksum()
    tampered = json.loads(edited.line())
    tampered["value"]["text"] = "Answer: 7"  # the sum was taken over "Answer: 42"
    path = tmp_path / "calls.jsonl.gz"
    _write_lines(path, [json.dumps({"format": fileformat.FORMAT, "entries": 3}), good.line(),
                        json.dumps(wrong_key), json.dumps(tampered)])
    entries, refused = fileformat.read(path)
    assert [e.key for e in entries] == [good.key]
    assert [(r.line, r.key) for r in refused] == [(3, wrong_key["key"]), (4, edited.key)]
    assert "wrong key" in refused[0].why and "checksum" in refused[1].why


def test_a_damaged_file_is_one_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl.gz"
    fileformat.append(path, [_entry(i) for i in range(50)])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(RecordingError, match="calls.jsonl.gz is not a whole recording"):
        fileformat.read(path)
    path.write_bytes(b"not gzip at all")
    with pytest.raises(RecordingError, match="damaged or truncated"):
        fileformat.read(path)


def _bench_in(home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **kw):
    _home(monkeypatch, home)
    test_evolve.scripted_default_pool(home)
    pool, tasks = test_bench.setup_files(tmp_path)
    return bench(test_bench.options(pool, tasks, systems=["single", "agree", "head"], **kw))


def _model_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = ScriptedBackend.chat
    monkeypatch.setattr(ScriptedBackend, "chat", lambda self, m, p: calls.append(1) or original(self, m, p))
    return calls


def test_a_bench_exported_and_imported_replays_with_no_model_call(tmp_path: Path, monkeypatch, capsys) -> None:
    first = _bench_in(tmp_path / "home-a", monkeypatch, tmp_path)
    assert (first.run_dir / JOURNAL).is_file()
    code, _, err = run_main(["recordings", "export", first.run_id, "--to", str(tmp_path / "rec")], monkeypatch, capsys)
    assert code == 0, err
    assert "written to" in err and "bytes per new entry" in err
    # A fresh home: import, then the same bench in replay-only mode.
    _home(monkeypatch, tmp_path / "home-b")
    code, _, err = run_main(["recordings", "import", str(tmp_path / "rec")], monkeypatch, capsys)
    assert code == 0, err
    assert "imported, 0 already here" in err and f"run {first.run_id}: copied" in err
    code, _, err = run_main(["recordings", "import", str(tmp_path / "rec")], monkeypatch, capsys)
    assert code == 0 and " 0 imported" in err  # idempotent
    calls = _model_calls(monkeypatch)
    monkeypatch.setenv("TRINITY_REPLAY_ONLY", "1")
    pool, tasks = test_bench.setup_files(tmp_path)
    second = bench(test_bench.options(pool, tasks, systems=["single", "agree", "head"]))
    assert calls == []
    assert _untimed(second.data["results"]) == _untimed(first.data["results"])
    stats = second.data["stats"]
    assert stats["backend_calls"] == 0 and stats["recorded"] == stats["pool_calls"] > 0


def test_replay_only_ends_at_the_first_unrecorded_call_naming_it(tmp_path: Path, monkeypatch, capsys) -> None:
    _home(monkeypatch, tmp_path / "home")
    test_evolve.scripted_default_pool(tmp_path / "home")
    pool, tasks = test_bench.setup_files(tmp_path)
    calls = _model_calls(monkeypatch)
    code, out, err = run_main(["--replay-only", "bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test",
                               "--systems", "single"], monkeypatch, capsys)
    assert code == 2 and calls == []
    assert "replay-only: m0's call is not recorded" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 3


def test_import_keeps_a_different_reply_it_already_holds_and_says_so(tmp_path: Path, monkeypatch) -> None:
    _home(monkeypatch, tmp_path / "home")
    rec = tmp_path / "rec"
    fileformat.append(rec / fileformat.CALLS_FILE, [_entry(1, "Answer: 42")])
    other = tmp_path / "other.gz"
    fileformat.append(other, [_entry(1, "Answer: 7"), _entry(2)])
    assert sum(transfer.import_recording(rec).added.values()) == 1
    result = transfer.import_recording(other)
    assert result.conflicts == [_entry(1).key] and result.added["rollouts"] == 1
    cache = transfer.open_cache("rollouts")
    try:
        assert cache.get(_entry(1).key)["reply"]["text"] == "Answer: 42"  # not overwritten
    finally:
        cache.close()


def test_calls_under_another_llama_cpp_build_are_counted_with_the_reason(tmp_path: Path, monkeypatch) -> None:
    """The default pool's fingerprint needs no model file (its sha256 is declared), so the
    report works on any install."""
    _home(monkeypatch, tmp_path / "home")
    members = transfer.installed_members()
    local = next(fp for fp, owners in members.items() if ("local", "qwen1.5b-reason") in owners)
    assert local.startswith("gguf:cc324af070c2")
    older = local.replace("llama-cpp-python ", "llama-cpp-python 0.0.1-was-")
    entries = []
    for i, fp in enumerate([local, older, "gguf:" + "f" * 64 + "|template|ctx4096|x|batch32"]):
        e = _entry(i)
        request = {**e.request, "fingerprint": fp}
        entries.append(Entry("rollouts", content_key("r2:", request), request, e.value))
    path = tmp_path / "r.gz"
    fileformat.append(path, entries)
    result = transfer.describe_file(path)
    assert result.applies["local"] == 1 and "qwen1.5b-reason" in result.members["local"]
    whys = list(result.other)
    assert any("same weights, recorded with llama-cpp-python 0.0.1-was-" in w for w in whys)
    assert any("are in no installed pool" in w for w in whys)


@pytest.mark.slow
def test_an_evolve_run_killed_in_one_home_resumes_in_another_with_the_same_head(tmp_path: Path, monkeypatch) -> None:
    """Runs that move: a real process killed with SIGKILL mid-run, its run and calls exported,
    imported into an empty home, resumed there: the head's bytes are an uninterrupted run's,
    and the resumed run calls the models only for what the recording did not hold."""
    _, tasks = test_evolve.setup_files(tmp_path)
    slow = [dict(m, delay_s=0.03) for m in [
        {"name": "m0", "kind": "scripted", "rules": test_evolve.RIGHT, "default": "Plan: think.\nNext: worker"},
        {"name": "m1", "kind": "scripted", "rules": test_evolve.WRONG, "default": "Plan: guess.\nNext: worker"}]]
    pool = write_pool(tmp_path, {"name": "duo", "max_resident": 1, "models": slow}, name="slow.yaml")
    args = ["--pool", str(pool), "--tasks", f"file:{tasks}:train", "--val-tasks", f"file:{tasks}:val:6",
            "--budget", "48", "--minibatch", "4", "--popsize", "4", "--seed", "3", "--max-turns", "2",
            "--val-every", "1", "--backbone", "hash:16", "--sigma0", "1.0"]
    home_b = tmp_path / "home-b"
    env = {**os.environ, "TRINITY_HOME": str(home_b), "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "killed.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "trinity_cli", "evolve", "--search-only", *args,
                                 "--out", str(tmp_path / "b")],
                                env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while not list(home_b.glob("runs/run-*/episodes/gen-0000.json")):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "generation 0 never finished"
            time.sleep(0.01)
        time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    run_dir = next(home_b.glob("runs/run-*"))
    assert not (run_dir / "run.json").exists()
    # Export in another process, as a user would on the first machine.
    exported = subprocess.run([sys.executable, "-m", "trinity_cli", "recordings", "export", run_dir.name, "--to",
                               str(tmp_path / "carried")], env=env, capture_output=True, text=True)
    assert exported.returncode == 0, exported.stderr
    recorded = sum(e.cache == "rollouts" for e in fileformat.read(tmp_path / "carried" / fileformat.CALLS_FILE)[0])
    assert recorded > 0 and (tmp_path / "carried" / "runs" / run_dir.name / "checkpoint.pkl").is_file()

    env_c = {**env, "TRINITY_HOME": str(tmp_path / "home-c")}
    imported = subprocess.run([sys.executable, "-m", "trinity_cli", "recordings", "import", str(tmp_path / "carried")],
                              env=env_c, capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    assert f"run {run_dir.name}: copied" in imported.stderr

    calls = _model_calls(monkeypatch)
    opts = dict(pool=str(pool), tasks=f"file:{tasks}:train", val_tasks=f"file:{tasks}:val:6", budget=48,
                minibatch=4, popsize=4, seed=3, max_turns=2, val_every=1, backbone="hash:16", sigma0=1.0)
    _home(monkeypatch, tmp_path / "home-c")
    resumed = evolve(EvolveOptions(**opts, out=str(tmp_path / "b")))  # the same command resumes the run
    in_c = len(calls)
    _home(monkeypatch, tmp_path / "home-a")
    evolve(EvolveOptions(**opts, out=str(tmp_path / "a")))
    reference = len(calls) - in_c
    assert resumed.run_id == run_dir.name
    assert npz_members(tmp_path / "a" / "weights.npz") == npz_members(tmp_path / "b" / "weights.npz")
    assert in_c + recorded == reference  # every recorded call was replayed, none made twice


@pytest.mark.slow
def test_a_bench_killed_in_one_home_finishes_in_another_calling_only_what_was_not_recorded(
        tmp_path: Path, monkeypatch) -> None:
    """A bench process killed with SIGKILL leaves its run directory and journal; exported,
    imported into an empty home and run again there, it makes only the calls the recording
    lacks, and reports what an uninterrupted bench reports."""
    pool, tasks = test_bench.setup_files(tmp_path)
    slow = write_pool(tmp_path, {"name": "trio", "models": [dict(m, delay_s=0.05) for m in test_bench.MODELS]},
                      name="slow.yaml")
    args = ["bench", "--pool", str(slow), "--tasks", f"file:{tasks}:test", "--systems", "single,agree",
            "--max-turns", "5", "--seed", "0"]
    home_b = tmp_path / "home-b"
    test_evolve.scripted_default_pool(home_b)
    env = {**os.environ, "TRINITY_HOME": str(home_b), "PYTHONUNBUFFERED": "1"}
    with open(tmp_path / "killed.log", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "trinity_cli", *args], env=env, stdout=subprocess.DEVNULL,
                                stderr=err)
    try:
        deadline = time.monotonic() + 60
        while sum(1 for _ in _journal_lines(home_b)) < 6:
            assert proc.poll() is None, (tmp_path / "killed.log").read_text()
            assert time.monotonic() < deadline, "the bench made no calls"
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    run_dir = next(home_b.glob("runs/run-*"))
    carried = subprocess.run([sys.executable, "-m", "trinity_cli", "recordings", "export", run_dir.name, "--to",
                              str(tmp_path / "carried")], env=env, capture_output=True, text=True)
    assert carried.returncode == 0, carried.stderr
    recorded = len(fileformat.read(tmp_path / "carried" / fileformat.CALLS_FILE)[0])

    calls = _model_calls(monkeypatch)
    _home(monkeypatch, tmp_path / "home-c")
    test_evolve.scripted_default_pool(tmp_path / "home-c")
    assert sum(transfer.import_recording(tmp_path / "carried").added.values()) == recorded
    opts = test_bench.options(slow, tasks, systems=["single", "agree"])
    finished = bench(opts)
    in_c = len(calls)
    _home(monkeypatch, tmp_path / "home-a")
    test_evolve.scripted_default_pool(tmp_path / "home-a")
    reference = bench(opts)
    assert recorded > 0 and in_c + recorded == len(calls) - in_c
    assert _untimed(finished.data["results"]) == _untimed(reference.data["results"])
    assert finished.data["per_item"] == reference.data["per_item"]
    assert finished.data["stats"]["recorded"] >= recorded  # a recorded reply may serve several episodes


def _journal_lines(home: Path) -> list[str]:
    from trinity_cli.keyed_cache import read_journal

    return [k for log in home.glob(f"runs/run-*/{JOURNAL}") for k in read_journal(log)]


def _untimed(data: object) -> object:
    """`data` without its wall-clock fields (the only numbers a replay may change)."""
    if isinstance(data, dict):
        return {k: _untimed(v) for k, v in data.items() if "wall" not in k}
    return data


def test_bulky_run_files_travel_gzipped_and_come_back_byte_for_byte(tmp_path: Path) -> None:
    """A carried run's bulky text files are stored as `<name>.gz` (deterministic bytes, so an
    unchanged file exported again is the same file); small files, pickles and evolve.json are
    carried as they are; import restores every file's bytes under its own name, and the same
    recording imported again finds the run the same."""
    from trinity_cli.recordings import carry
    from trinity_cli.runs.store import RunStore

    here = RunStore(tmp_path / "home-a" / "runs")
    run = here.allocate()
    transcripts = json.dumps({"episodes": [{"i": i, "text": "a transcript " * 20} for i in range(400)]})
    assert len(transcripts) >= carry.PACK_AT
    files = {"evolve.json": json.dumps({"options": {"pad": "x" * carry.PACK_AT}}),
             "episodes/gen-0000.json": transcripts, "calls.log": "key\n" * 3}
    for rel, text in files.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text(text)
    checkpoint = pickle.dumps({"generation": 1, "spent": 8, "pad": "p" * carry.PACK_AT})
    (run / "checkpoint.pkl").write_bytes(checkpoint)
    (run / ".lock").write_text("1")

    assert carry.export_runs([run.name], tmp_path / "rec", here) == [run.name]
    carried = tmp_path / "rec" / "runs" / run.name
    assert sorted(str(p.relative_to(carried)) for p in carried.rglob("*") if p.is_file()) == [
        "calls.log", "checkpoint.pkl", "episodes/gen-0000.json.gz", "evolve.json"]
    packed = (carried / "episodes/gen-0000.json.gz").read_bytes()
    assert gzip.decompress(packed).decode() == transcripts and len(packed) < len(transcripts) / 4
    carry.export_runs([run.name], tmp_path / "rec", here)
    assert (carried / "episodes/gen-0000.json.gz").read_bytes() == packed  # no timestamp inside

    there = RunStore(tmp_path / "home-b" / "runs")
    assert [(c.outcome, c.as_run) for c in carry.import_runs(tmp_path / "rec", there)] == [("copied", run.name)]
    back = there.root / run.name
    assert {str(p.relative_to(back)) for p in back.rglob("*") if p.is_file()} == {*files, "checkpoint.pkl"}
    assert all((back / rel).read_text() == text for rel, text in files.items())
    assert (back / "checkpoint.pkl").read_bytes() == checkpoint
    assert [c.outcome for c in carry.import_runs(tmp_path / "rec", there)] == ["same"]
    (back / "episodes/gen-0000.json").write_text(transcripts.replace("a transcript", "another one"))
    assert [c.outcome for c in carry.import_runs(tmp_path / "rec", there)] == ["kept"]  # differs, not further


def test_sandbox_runs_travel_and_replay_without_running(tmp_path: Path, monkeypatch) -> None:
    from trinity_cli.sandbox import recorded, sandbox

    _home(monkeypatch, tmp_path / "home-a")
    first = recorded.run_python_recorded("print(6 * 7)")
    assert first.passed and first.stdout.strip() == "42"
    result = transfer.export(tmp_path / "rec", None)
    assert result.entries == 1
    monkeypatch.setattr(recorded, "_open", {})  # the next home's cache, not the one opened above
    _home(monkeypatch, tmp_path / "home-b")
    imported = transfer.import_recording(tmp_path / "rec")
    assert imported.added["sandbox"] == 1 and imported.sandbox == 1

    def never(*args, **kwargs):
        raise AssertionError("a recorded run ran again")

    monkeypatch.setattr(sandbox, "run_python", never)
    again = recorded.run_python_recorded("print(6 * 7)")
    assert again.passed and again.stdout == first.stdout


@pytest.mark.parametrize("args, says", [
    (["recordings", "import", "nowhere"], "no recording file nowhere/calls.jsonl.gz"),
    (["recordings", "export", "--all"], "say where to write the recording"),
    (["recordings", "export", "run-1", "--all", "--to", "x"], "name the runs to export, or give --all"),
    (["recordings", "export", "run-9", "--to", "x"], "no run 'run-9'"),
])
def test_bad_recording_commands_are_one_line(args: list[str], says: str, monkeypatch, capsys, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(args, monkeypatch, capsys)
    assert code == 2 and says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_damaged_recording_is_refused_in_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    path = tmp_path / "rec" / fileformat.CALLS_FILE
    fileformat.append(path, [_entry(i) for i in range(20)])
    path.write_bytes(path.read_bytes()[:-40])
    code, _, err = run_main(["recordings", "import", str(tmp_path / "rec")], monkeypatch, capsys)
    assert code == 2 and "is not a whole recording" in err and len(err.strip().splitlines()) == 1


def test_an_export_into_a_folder_adds_a_segment_and_never_rewrites_one(tmp_path: Path) -> None:
    """Issue 64.4: a recording grows by its new calls, one new file per export."""
    folder = tmp_path / "rec"
    first, n, total = fileformat.append_segment(folder, [_entry(1), _entry(2)])
    assert first == folder / fileformat.CALLS_FILE and (n, total) == (2, 2)
    before = first.read_bytes()
    second, n, total = fileformat.append_segment(folder, [_entry(1), _entry(2), _entry(3)])
    assert second == folder / "calls-0001.jsonl.gz" and (n, total) == (1, 3)
    assert fileformat.append_segment(folder, [_entry(3)]) == (None, 0, 3)  # nothing new: no file
    third, _, _ = fileformat.append_segment(folder, [_entry(4)])
    assert third == folder / "calls-0002.jsonl.gz" and first.read_bytes() == before
    assert fileformat.segments(folder) == [first, second, third]
    entries, refused = transfer.read_recording(folder)
    assert sorted(e.key for e in entries) == sorted(_entry(i).key for i in (1, 2, 3, 4)) and not refused
    # A changed reply under a held key is not a new call: the first one recorded stays.
    assert fileformat.append_segment(folder, [_entry(1, "Answer: 7")]) == (None, 0, 4)
