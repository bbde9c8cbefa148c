"""Evolution on a scripted pool with the hash backbone: fast, hermetic, exact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trinity_cli.coordinator.head import Head
from trinity_cli.errors import ConfigError
from trinity_cli.evolve import EvolveOptions, evolve
from trinity_cli.store import RunStore

from .conftest import write_pool

# m0 always answers right, m1 always wrong: routing is what fitness rewards.
RIGHT = [{"match": "Solve", "reply": "Answer: 42"}]
WRONG = [{"match": "Solve", "reply": "Answer: 7"}]


def setup_files(tmp_path: Path) -> tuple[Path, Path]:
    pool = write_pool(tmp_path, {"name": "duo", "max_resident": 1, "models": [
        {"name": "m0", "kind": "scripted", "rules": RIGHT, "default": "Plan: think.\nNext: worker"},
        {"name": "m1", "kind": "scripted", "rules": WRONG, "default": "Plan: guess.\nNext: worker"},
    ]})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Question {i}: what is six times seven?",
                                         "answer": 42, "scorer": "numeric"}) + "\n" for i in range(60)))
    return pool, tasks


def options(pool: Path, task_file: Path, **kw) -> EvolveOptions:
    base = dict(pool=str(pool), tasks=f"file:{task_file}:train", val_tasks=f"file:{task_file}:val:6", budget=48,
                minibatch=4, popsize=4, seed=3, max_turns=2, val_every=1, backbone="hash:16", sigma0=1.0)
    base.update(kw)
    return EvolveOptions(**base)


def test_evolve_learns_to_route_and_writes_a_head(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    result = evolve(options(pool, tasks, budget=160, out=str(tmp_path / "head")))
    assert result.spent == 160 and result.generations == 10
    head = Head.load(tmp_path / "head")
    assert head.trained and head.models == ["m0", "m1"]
    assert head.manifest["training"]["budget"] == 160 and head.manifest["training"]["seed"] == 3
    assert (tmp_path / "head" / "curves.png").stat().st_size > 1000
    vals = [c["val"] for c in result.curves]
    assert result.best_val == max(vals) and result.best_val >= 0.8  # uniform routing scores ~0.5
    record = RunStore().load(result.run_id)
    assert record["kind"] == "evolve" and record["spent"] == 160
    assert set(record["selection"]["file:" + str(tasks)]["models"]) == {"m0", "m1"}


class Kill(Exception):
    pass


def test_kill_and_resume_redoes_no_rollout_and_ends_identical(tmp_path: Path, monkeypatch) -> None:
    pool, tasks = setup_files(tmp_path)
    # Reference: never interrupted, in its own home.
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-a"))
    ref = evolve(options(pool, tasks, out=str(tmp_path / "a")))
    # Interrupted mid-generation 2 (after 16 + 16 + 5 training episodes), then resumed.
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-b"))
    seen = {"n": 0}

    def killer(kind, data):
        if kind == "episode" and data.get("kind") == "train":
            seen["n"] += 1
            if seen["n"] == 37:
                raise Kill()

    with pytest.raises(Kill):
        evolve(options(pool, tasks, out=str(tmp_path / "b")), progress=killer)
    run_dir = next((tmp_path / "home-b" / "runs").glob("run-*"))
    assert not (run_dir / "run.json").exists() and (run_dir / "checkpoint.pkl").exists()

    from trinity_cli import pool as pool_mod

    calls = []
    original = pool_mod.Pool.chat

    def counting(self, name, messages, params=None):
        c = original(self, name, messages, params)
        calls.append(c.cached)
        return c

    monkeypatch.setattr(pool_mod.Pool, "chat", counting)
    events = []
    resumed = evolve(options(pool, tasks, out=str(tmp_path / "b")), progress=lambda k, d: events.append((k, d)))
    assert ("resume", {"run": run_dir.name}) in events
    # The 5 episodes of generation 2 that had finished are served from the cache.
    n_cached = sum(calls)
    assert n_cached >= 5
    assert np.array_equal(Head.load(tmp_path / "a").flat(), Head.load(tmp_path / "b").flat())
    assert resumed.best_val == ref.best_val and resumed.spent == ref.spent


def test_rerun_of_finished_generations_is_all_cache(tmp_path: Path, monkeypatch) -> None:
    pool, tasks = setup_files(tmp_path)
    evolve(options(pool, tasks, budget=16, val_every=5))
    from trinity_cli import pool as pool_mod

    calls = []
    original = pool_mod.Pool.chat
    monkeypatch.setattr(pool_mod.Pool, "chat", lambda self, n, m, p=None: calls.append(1) or original(self, n, m, p))
    from trinity_cli.backends.scripted import ScriptedBackend

    real = []
    orig_chat = ScriptedBackend.chat
    monkeypatch.setattr(ScriptedBackend, "chat", lambda self, m, p: real.append(1) or orig_chat(self, m, p))
    evolve(options(pool, tasks, budget=16, val_every=5, name="again"))  # a fresh run, same seed
    assert calls and not real  # every pool call answered by the rollout cache


def test_resume_refuses_other_pool(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    first = evolve(options(pool, tasks, budget=16))
    other = write_pool(tmp_path, {"name": "trio", "models": [
        {"name": n, "kind": "scripted", "default": "x"} for n in ("a", "b", "c")]}, name="trio.yaml")
    with pytest.raises(ConfigError, match="cannot resume.*pool models"):
        evolve(options(other, tasks, budget=16), resume=first.run_id)


def test_bad_options(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    with pytest.raises(ConfigError, match="train"):
        evolve(options(pool, tasks, tasks=f"file:{tasks}:test"))
    with pytest.raises(ConfigError, match="neural backbone"):
        evolve(options(pool, tasks, svf=True))


def test_inspect_shows_evolve_run_and_episode(tmp_path: Path, monkeypatch, capsys) -> None:
    import sys

    from trinity_cli import cli

    pool, tasks = setup_files(tmp_path)
    result = evolve(options(pool, tasks, budget=32))

    def run(args):
        monkeypatch.setattr(sys, "argv", ["trinity", *args])
        with pytest.raises(SystemExit) as info:
            cli.main()
            raise SystemExit(0)
        return info.value.code or 0, capsys.readouterr()

    code, out = run(["inspect"])
    assert code == 0 and result.run_id in out.out and "evolve" in out.out
    code, out = run(["inspect", result.run_id])
    assert code == 0 and "curves" in out.out and "selection share" in out.out and "m0=" in out.out
    code, out = run(["inspect", result.run_id, "--episode", "1/3"])
    assert code == 0 and "turn 1" in out.out and "reward" in out.out
    code, out = run(["inspect", result.run_id, "--episode", "9/0"])
    assert code == 2 and "no generation 9" in out.err


def test_flat_fitness_with_tiny_population(tmp_path: Path) -> None:
    """All rewards zero (every model wrong) with popsize 2 must not break pycma."""
    pool = write_pool(tmp_path, {"name": "bad", "models": [
        {"name": "w0", "kind": "scripted", "rules": WRONG, "default": "Next: worker"}]}, name="bad.yaml")
    _, tasks = setup_files(tmp_path)
    result = evolve(options(pool, tasks, budget=24, popsize=2, minibatch=3))
    assert result.generations == 4 and result.best_val == 0.0
