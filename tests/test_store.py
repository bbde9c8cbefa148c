"""runs/store.py owns run directories: evolve and bench files are written and read through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trinity_cli.errors import NotFound
from trinity_cli.runs.run_files import BenchRun, EvolveRun
from trinity_cli.runs.store import RunStore


def test_evolve_run_files_round_trip(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    run = EvolveRun(store.allocate())
    assert run.meta() is None and run.load_checkpoint() is None and list(run.generations()) == []
    run.write_meta({"format": "f", "manifest": {"models": ["a", "b"]}})
    run.save_checkpoint({"generation": 2, "curves": []})
    for g in (1, 0):
        run.write_generation(g, {"generation": g, "episodes": [
            {"task": "t", "candidate": 0, "reward": 1.0, "transcript": {"turns": []}, "seed": 7}]})
    assert [r["generation"] for r in run.generations()] == [0, 1]
    assert run.load_checkpoint() == {"generation": 2, "curves": []}
    assert sorted(p.name for p in run.path.iterdir()) == ["checkpoint.pkl", "episodes", "evolve.json"]
    assert [r.name for r in store.evolve_runs()] == [run.name] and not run.finished
    title, models, transcript, seed = store.evolve_episode(run.name, "1/0")
    assert models == ["a", "b"] and transcript == {"turns": []} and seed == 7 and "gen 1 episode 0" in title
    with pytest.raises(NotFound, match="has no generation 5"):
        store.evolve_episode(run.name, "5/0")
    other = store.allocate()
    with pytest.raises(NotFound, match=f"{other.name} is not an evolve run"):
        store.evolve_run(other.name)


def test_bench_run_writes_every_file_atomically(tmp_path: Path) -> None:
    run = BenchRun(tmp_path)
    run.write_episodes({"i": i} for i in range(3))
    files = run.write_outputs({"format": "x"}, "# report\n", {"chart.png": lambda path: path.write_bytes(b"png")})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(files) == sorted([*BenchRun.FILES, "chart.png"])
    assert [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()] == [
        {"i": 0}, {"i": 1}, {"i": 2}]

    def broken_chart(path: Path) -> None:
        path.write_bytes(b"half")
        raise RuntimeError("matplotlib failed")

    with pytest.raises(RuntimeError):
        run.write_outputs({"format": "y"}, "# new\n", {"chart.png": broken_chart})
    assert (tmp_path / "chart.png").read_bytes() == b"png"
