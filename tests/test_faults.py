"""Faults, injected into real files and real processes (no mocks): damaged caches are set
aside and work goes on, damaged run records and checkpoints are named (or passed over),
one process per run, and a full disk ends a command in one line with nothing half-written.

Each test asserts what the user sees (the line on stderr, the exit code) and that no
finished work is lost (the other runs, the readable checkpoint, the cache entries)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trinity_cli import assets, paths
from trinity_cli.keyed_cache import DB_FILE, KeyedCache, db_damage
from trinity_cli.member_config import PackageFile, SplitFile
from trinity_cli.runs.run_files import EvolveRun
from trinity_cli.runs.store import RunStore

from .conftest import run_main, scripted_pool, write_pool

QUESTION = "What is 12*7?"


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: ")]


def ask(pool: Path, monkeypatch, capsys, *extra: str) -> tuple[int, str, str]:
    return run_main(["ask", QUESTION, "--pool", str(pool), "--max-turns", "2", *extra], monkeypatch, capsys)


def cache_db(home: Path, name: str) -> Path:
    return home / "cache" / name / DB_FILE


# -- damaged caches ---------------------------------------------------------------------


def test_a_rollout_cache_overwritten_at_its_start_is_set_aside(tmp_path, trinity_home, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    assert ask(pool, monkeypatch, capsys)[0] == 0
    db = cache_db(trinity_home, "rollouts")
    with open(db, "r+b") as fh:  # a bad disk, an interrupted copy: the header is gone
        fh.write(os.urandom(4096))

    code, out, err = ask(pool, monkeypatch, capsys)

    assert code == 0 and out == "84\n", err
    [line] = warnings(err)
    assert str(db) in line and "not an SQLite database" in line and "set aside as rollouts.damaged-" in line
    assert "made again" in line and "Traceback" not in err
    moved = list((trinity_home / "cache").glob("rollouts.damaged-*"))
    assert len(moved) == 1 and (moved[0] / DB_FILE).is_file()  # kept for the user to look at
    # The fresh cache works: the next ask is answered from it, with no warning.
    code, _, err = ask(pool, monkeypatch, capsys, "--json", "-q")
    assert code == 0 and not warnings(err)
    assert all(t["cached"] for t in RunStore().load("run-3")["transcript"]["turns"])


def evolve_hash_head(tmp_path: Path, pool: Path, monkeypatch, capsys, budget: int = 4, *extra: str) -> Path:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Q{i}: 12*7?", "answer": 84,
                                         "scorer": "numeric"}) + "\n" for i in range(20)))
    out_dir = tmp_path / "head"
    code, _, err = run_main(["evolve", "--search-only",
                             "--pool", str(pool), "--tasks", f"file:{tasks}:train", "--val-tasks",
                             f"file:{tasks}:val:2", "--budget", str(budget), "--minibatch", "2", "--popsize", "2",
                             "--max-turns", "2", "--backbone", "hash:16", "--out", str(out_dir), "-q", *extra],
                            monkeypatch, capsys)
    assert code == 0, err
    return out_dir


def test_a_truncated_hidden_state_cache_is_set_aside(tmp_path, trinity_home, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    head = evolve_hash_head(tmp_path, pool, monkeypatch, capsys)
    db = cache_db(trinity_home, "hidden")
    assert ask(pool, monkeypatch, capsys, "--head", str(head), "--backbone", "hash:16")[0] == 0
    size = db.stat().st_size
    with open(db, "r+b") as fh:
        fh.truncate(size // 3)

    code, out, err = ask(pool, monkeypatch, capsys, "--head", str(head), "--backbone", "hash:16")

    assert code == 0 and out == "84\n", err
    [line] = warnings(err)
    assert "hidden-state cache" in line and str(db) in line and "truncated" in line
    assert list((trinity_home / "cache").glob("hidden.damaged-*"))
    assert db_damage(db) is None


def test_damage_found_on_a_read_sets_the_cache_aside_and_keeps_going(tmp_path, caplog) -> None:
    directory = tmp_path / "c"
    cache = KeyedCache(directory, "test cache", size_limit=1 << 20)
    cache.set("a", {"x": 1})
    cache.close()
    db = directory / DB_FILE
    raw = bytearray(db.read_bytes())
    page = int.from_bytes(raw[16:18], "big")
    raw[page:] = b"\xff" * (len(raw) - page)  # every page but the first: the header still looks whole
    db.write_bytes(bytes(raw))
    assert db_damage(db) is None

    cache = KeyedCache(directory, "test cache", size_limit=1 << 20)
    assert cache.get("a") is None  # the damaged read is caught where it happens
    cache.set("b", 2)
    assert cache.get("b") == 2
    assert any("set aside" in r.getMessage() for r in caplog.records)
    cache.close()


def split_spec(tmp_path: Path) -> SplitFile:
    """A model file assembled from two files of an installed distribution (typer's)."""
    import hashlib
    from importlib import metadata

    dist = metadata.distribution("typer")
    rels = [str(f) for f in dist.files or [] if str(f).endswith((".py",))][:2]
    data = b"".join(Path(str(dist.locate_file(r))).read_bytes() for r in rels)
    return SplitFile(filename="fake.gguf", size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                     parts=[PackageFile(package="typer", path=r) for r in rels])


def test_a_damaged_assembled_model_file_is_rebuilt(tmp_path, caplog) -> None:
    spec = split_spec(tmp_path)
    target = assets._assemble(spec)
    good = target.read_bytes()
    time.sleep(0.01)  # a new mtime: the memoised hash no longer vouches for the file
    target.write_bytes(good[:-1] + bytes([good[-1] ^ 0xFF]))  # same size, one byte flipped

    again = assets._assemble(spec)

    assert again == target and target.read_bytes() == good
    assert any("damaged" in r.getMessage() and "sha256" in r.getMessage() for r in caplog.records)
    target.write_bytes(good[: len(good) // 2])  # truncated
    assert assets._assemble(spec).read_bytes() == good


# -- damaged run records and checkpoints -------------------------------------------------


def test_a_truncated_run_record_is_listed_as_damaged_and_named(tmp_path, trinity_home, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    ask(pool, monkeypatch, capsys)
    ask(pool, monkeypatch, capsys)
    record = trinity_home / "runs" / "run-1" / "run.json"
    record.write_bytes(record.read_bytes()[:150])

    code, out, err = run_main(["inspect"], monkeypatch, capsys)
    assert code == 0, err
    [line] = [line for line in out.splitlines() if "run-1" in line]
    assert "damaged" in line and "run.json is damaged: not valid JSON" in line
    assert any("run-2" in line and "done" in line for line in out.splitlines())  # the other run is intact

    code, out, err = run_main(["inspect", "run-1"], monkeypatch, capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: run-1: its record") and str(record) in err and "not valid JSON" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert run_main(["inspect", "run-2"], monkeypatch, capsys)[0] == 0


def test_a_damaged_latest_checkpoint_resumes_from_the_previous_one(tmp_path, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    evolve_hash_head(tmp_path, pool, monkeypatch, capsys, 8)  # two generations of 4 episodes
    run = EvolveRun(RunStore().root / "run-1")
    latest, previous = run.path / run.CHECKPOINT, run.path / run.PREVIOUS
    assert previous.is_file()
    latest.write_bytes(latest.read_bytes()[:40])

    code, out, err = run_main(["evolve", "--resume", "run-1", "--budget", "12", "-q"], monkeypatch, capsys)

    assert code == 0, err
    [line] = warnings(err)
    assert str(latest) in line
    assert "goes on from the previous checkpoint, after generation 0 (4 training episodes)" in line
    state = run.load_checkpoint()
    assert state is not None and state["spent"] == 12 and state["generation"] == 3

    latest.write_bytes(b"not a pickle")
    previous.write_bytes(b"")
    (run.path / "run.json").unlink()  # as if it had been stopped before its budget
    code, out, err = run_main(["evolve", "--resume", "run-1", "--budget", "16", "-q"], monkeypatch, capsys)
    assert code == 2 and "run-1 has no readable checkpoint" in err
    assert "checkpoint.pkl (" in err and "checkpoint.prev.pkl (" in err and len(err.strip().splitlines()) == 1
    code, out, err = run_main(["inspect"], monkeypatch, capsys)
    assert code == 0 and "damaged" in out and "no readable checkpoint" in out, err


def test_a_converted_backbone_with_a_file_of_another_size_is_damaged(tmp_path) -> None:
    from trinity_cli.coordinator.backbone import CONVERTED_SIZES, _converted_damage

    directory = tmp_path / "backbone"
    directory.mkdir()
    (directory / "model.safetensors").write_bytes(b"w" * 100)
    (directory / "config.json").write_text("{}")
    (directory / CONVERTED_SIZES).write_text(json.dumps({"model.safetensors": 100, "config.json": 2}))
    assert _converted_damage(directory) is None
    (directory / "model.safetensors").write_bytes(b"w" * 40)
    assert _converted_damage(directory) == "model.safetensors has 40 bytes, 100 were written"
    (directory / "config.json").unlink()
    (directory / "model.safetensors").write_bytes(b"w" * 100)
    assert _converted_damage(directory) == "config.json is missing"


# -- one process per run -----------------------------------------------------------------


@pytest.mark.slow
def test_a_second_process_on_a_run_being_evolved_is_refused(tmp_path, trinity_home) -> None:
    slow = [{"match": "Solve the task now", "reply": "Answer: 84"}]
    pool = write_pool(tmp_path, {"name": "slow", "models": [
        {"name": f"m{i}", "kind": "scripted", "rules": slow, "default": "Answer: 84", "delay_s": 0.05}
        for i in range(2)]})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Q{i}", "answer": 84, "scorer": "numeric"})
                             + "\n" for i in range(40)))
    cmd = [sys.executable, "-m", "trinity_cli", "evolve", "--search-only", "--pool", str(pool),
           "--tasks", f"file:{tasks}:train",
           "--val-tasks", f"file:{tasks}:val:2", "--minibatch", "4", "--popsize", "2", "--max-turns", "2",
           "--backbone", "hash:16", "-q"]
    env = {**os.environ, "TRINITY_HOME": str(trinity_home)}
    first = subprocess.Popen([*cmd, "--budget", "400"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run = trinity_home / "runs" / "run-1"
    try:
        deadline = time.monotonic() + 60
        while not (run / EvolveRun.CHECKPOINT).is_file():  # it holds the lock and has written a generation
            assert first.poll() is None, first.stderr.read().decode() if first.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.1)

        for second in ([*cmd, "--budget", "400"], [*cmd, "--resume", "run-1", "--budget", "400"]):
            done = subprocess.run(second, env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 2, done.stderr
            assert done.stderr.strip() == (f"error: run-1 is in use by another trinity process (pid {first.pid}) — "
                                           f"wait for it to end, or stop it (kill {first.pid}) and run this again")
        assert first.poll() is None  # the first run was not disturbed
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # A killed process leaves no stale lock: the run resumes and finishes.
    done = subprocess.run([*cmd, "--resume", "run-1", "--budget", "24"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert (run / "run.json").is_file()


def test_two_processes_write_one_rollout_cache_at_once(tmp_path) -> None:
    directory = tmp_path / "rollouts"
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from trinity_cli.pool.rollout_cache import RolloutCache
        from trinity_cli.messages import Completion
        cache = RolloutCache(Path({str(directory)!r}))
        me = sys.argv[1]
        for i in range(300):
            cache.put(f"{{me}}-{{i}}", Completion(f"{{me}} {{i}}", 1, 1, 0.0), {{}})
            cache.put(f"shared-{{i % 50}}", Completion(f"shared {{i % 50}}", 1, 1, 0.0), {{}})
            assert cache.get(f"{{me}}-{{i}}").text == f"{{me}} {{i}}"
        cache.close()
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, name], stderr=subprocess.PIPE) for name in ("a", "b")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    from trinity_cli.pool.rollout_cache import RolloutCache

    cache = RolloutCache(directory)
    assert len(cache) == 650
    assert all(cache.get(f"{me}-{i}") is not None for me in "ab" for i in range(300))
    cache.close()


# -- disk full ---------------------------------------------------------------------------


def limited(limit: int):
    """A subprocess preexec that caps the size of any file it writes (ulimit -f)."""
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_write_over_the_file_size_limit_leaves_nothing_half_written(tmp_path) -> None:
    target = tmp_path / "checkpoint.pkl"
    target.write_bytes(b"the previous checkpoint")
    script = textwrap.dedent(f"""
        from pathlib import Path
        from trinity_cli import paths
        from trinity_cli.errors import DiskFull
        try:
            paths.atomic_write_bytes(Path({str(target)!r}), b"x" * (1 << 20))
        except DiskFull as exc:
            print(exc.message)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          preexec_fn=limited(64 << 10), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"cannot write {target}: the file-size limit (ulimit -f) was reached; "
                                   "it needs about 1.0 MB")
    assert target.read_bytes() == b"the previous checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pkl"]  # no temporary file left


def test_ask_out_of_space_is_one_line_and_saves_nothing_half_written(tmp_path, trinity_home) -> None:
    pool = scripted_pool(tmp_path)
    env = {**os.environ, "TRINITY_HOME": str(trinity_home)}
    done = subprocess.run([sys.executable, "-m", "trinity_cli", "ask", QUESTION, "--pool", str(pool)], env=env,
                          capture_output=True, text=True, preexec_fn=limited(16 << 10), timeout=120)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: cannot write ") and "file-size limit" in line and "Traceback" not in line
    assert not list((trinity_home / "runs").glob("run-*"))
    # With room again, the same command works.
    done = subprocess.run([sys.executable, "-m", "trinity_cli", "ask", QUESTION, "--pool", str(pool)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "84\n", done.stderr


def test_set_aside_never_overwrites(tmp_path) -> None:
    first = tmp_path / "x"
    first.write_text("1")
    a = paths.set_aside(first)
    first.write_text("2")
    b = paths.set_aside(first)
    assert a != b and a.read_text() == "1" and b.read_text() == "2" and not first.exists()


def test_a_cache_folder_that_is_a_broken_link_is_one_clear_line(tmp_path, trinity_home, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    (trinity_home / "cache").mkdir(parents=True, exist_ok=True)
    (trinity_home / "cache" / "rollouts").symlink_to(tmp_path / "gone")  # a link to nothing
    code, out, err = ask(pool, monkeypatch, capsys)
    assert code != 0 and out == ""
    assert "cache/rollouts cannot be a directory" in err and "remove it" in err
    assert "Traceback" not in err and "unexpected" not in err
