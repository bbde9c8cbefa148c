"""Evolution on a scripted pool with the hash backbone: fast, hermetic, exact."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from trinity_cli.coordinator.head import Head
from trinity_cli.errors import ConfigError, NotFound
from trinity_cli.events import EvolveEpisodeFinished, EvolveStarted, GenerationFinished, RunResumed
from trinity_cli.evolve.evolution import evolve
from trinity_cli.evolve.options import EvolveOptions
from trinity_cli.runs.reports import curve_rows
from trinity_cli.runs.store import RunStore

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


def test_evolve_learns_to_route_and_writes_a_head(tmp_path: Path, monkeypatch) -> None:
    setup_files(tmp_path)
    # Relative paths: items are drawn by a hash of their task's name, which for a file task
    # holds its path, and pytest's temporary directory changes from run to run.
    monkeypatch.chdir(tmp_path)
    pool, tasks = Path("pool.yaml"), Path("tasks.jsonl")
    result = evolve(options(pool, tasks, budget=160, out=str(tmp_path / "head")))
    assert result.spent == 160 and result.generations == 10
    head = Head.load(tmp_path / "head")
    assert head.learned and head.models == ["m0", "m1"]
    assert head.manifest["training"]["budget"] == 160 and head.manifest["training"]["seed"] == 3
    assert (tmp_path / "head" / "curves.png").stat().st_size > 1000
    vals = [c["val"] for c in result.curves]
    assert result.best_val == max(vals) and result.best_val >= 0.8  # uniform routing scores ~0.5
    record = RunStore().load(result.run_id)
    assert record["kind"] == "evolve" and record["spent"] == 160
    assert set(record["selection"]["file:" + str(tasks)]["models"]) == {"m0", "m1"}
    pairs = record["selection"]["file:" + str(tasks)]["pairs"]  # who did what, as bench counts it
    assert sum(sum(roles.values()) for roles in pairs.values()) == pytest.approx(1.0)
    # ask and serve play the head with the turn budget it was evolved with.
    assert head.trained_max_turns == 2 == head.manifest["training"]["max_turns"]


class Kill(Exception):
    pass


@pytest.mark.parametrize("dims", [0, 4])
def test_kill_and_resume_redoes_no_rollout_and_ends_identical(tmp_path: Path, monkeypatch, dims: int) -> None:
    pool, tasks = setup_files(tmp_path)
    # Reference: never interrupted, in its own home.
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-a"))
    ref = evolve(options(pool, tasks, input_dims=dims, out=str(tmp_path / "a")))
    # Interrupted mid-generation 2 (after 16 + 16 + 5 training episodes), then resumed.
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-b"))
    from trinity_cli.pool import pool as pool_mod

    original = pool_mod.Pool.chat
    seen = {"n": 0, "generation": 0}
    in_gen2: list[bool] = []  # the first process's calls in generation 2: cached or not

    def counting_gen2(self, name, messages, params=None, on_text=None):
        c = original(self, name, messages, params, on_text)
        if seen["generation"] == 2:
            in_gen2.append(c.cached)
        return c

    def killer(event):
        if isinstance(event, GenerationFinished):
            seen["generation"] = event.curve["generation"] + 1
        if isinstance(event, EvolveEpisodeFinished) and event.kind == "train":
            seen["n"] += 1
            if seen["n"] == 37:
                raise Kill()

    monkeypatch.setattr(pool_mod.Pool, "chat", counting_gen2)
    with pytest.raises(Kill):
        evolve(options(pool, tasks, input_dims=dims, out=str(tmp_path / "b")), progress=killer)
    run_dir = next((tmp_path / "home-b" / "runs").glob("run-*"))
    assert not (run_dir / "run.json").exists() and (run_dir / "checkpoint.pkl").exists()
    # What the killed process did in generation 2 is left beside the checkpoint.
    partial = json.loads((run_dir / "generation.partial.json").read_text())
    assert partial["generation"] == 2 and len(partial["processes"]) == 1
    assert partial["processes"][0]["episodes"] == 5
    assert partial["processes"][0]["pool_calls"] == len(in_gen2) > 0
    assert partial["processes"][0]["cache_hits"] == sum(in_gen2)

    calls = []

    def counting(self, name, messages, params=None, on_text=None):
        c = original(self, name, messages, params, on_text)
        calls.append(c.cached)
        return c

    monkeypatch.setattr(pool_mod.Pool, "chat", counting)
    events = []
    resumed = evolve(options(pool, tasks, input_dims=dims, out=str(tmp_path / "b")), progress=events.append)
    assert RunResumed(run=run_dir.name) in events
    # The 5 episodes of generation 2 that had finished are served from the cache.
    n_cached = sum(calls)
    assert n_cached >= 5
    a, b = Head.load(tmp_path / "a"), Head.load(tmp_path / "b")
    assert np.array_equal(a.flat(), b.flat())
    assert np.array_equal(a.center, b.center) and a.center_scale == b.center_scale  # from the checkpoint
    assert np.array_equal(a.basis, b.basis) and b.basis.shape == ((dims, 16) if dims else (0, 0))
    assert resumed.best_val == ref.best_val and resumed.spent == ref.spent
    # Generation 2's curve keeps the killed process's counts; totals run on across the
    # resume: each is the sum of every process's counts.
    assert [len(c.get("interrupted", ())) for c in resumed.curves] == [0, 0, 1]
    assert resumed.curves[2]["interrupted"] == partial["processes"]
    assert not (run_dir / "generation.partial.json").exists()
    for key in ("pool_calls", "cache_hits", "tokens"):
        assert resumed.curves[-1][f"{key}_total"] == sum(
            c[f"{key}_gen"] + sum(p[key] for p in c.get("interrupted", ())) for c in resumed.curves)
    # inspect's curve table shows the stopped process as a row of its own, before its generation's.
    rows = curve_rows(resumed.curves).rows
    assert [r[0] for r in rows] == ["0", "1", "2 (stopped)", "2"]
    assert rows[2][1] == "5 played" and rows[2][5] == str(len(in_gen2))


def test_rerun_of_finished_generations_is_all_cache(tmp_path: Path, monkeypatch) -> None:
    pool, tasks = setup_files(tmp_path)
    evolve(options(pool, tasks, budget=16, val_every=5))
    from trinity_cli.pool import pool as pool_mod

    calls = []
    original = pool_mod.Pool.chat
    monkeypatch.setattr(pool_mod.Pool, "chat",
                        lambda self, n, m, p=None, t=None: calls.append(1) or original(self, n, m, p, t))
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
    with pytest.raises(ConfigError, match="cannot resume run-1 with other options: `pool`"):
        evolve(options(other, tasks, budget=16), resume=first.run_id)
    # The same pool file, since changed to hold other models.
    write_pool(tmp_path, {"name": "trio", "models": [
        {"name": n, "kind": "scripted", "default": "x"} for n in ("a", "b", "c")]})
    with pytest.raises(ConfigError, match="cannot resume.*pool models"):
        evolve(options(pool, tasks, budget=16), resume=first.run_id)


def test_bad_options(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    with pytest.raises(ConfigError, match="train"):
        evolve(options(pool, tasks, tasks=f"file:{tasks}:test"))
    with pytest.raises(ConfigError, match="neural backbone"):
        evolve(options(pool, tasks, svf=True))


def test_inspect_shows_evolve_run_and_episode(tmp_path: Path, monkeypatch, capsys) -> None:
    import sys

    from trinity_cli import entry

    pool, tasks = setup_files(tmp_path)
    result = evolve(options(pool, tasks, budget=32))

    def run(args):
        monkeypatch.setattr(sys, "argv", ["trinity", *args])
        with pytest.raises(SystemExit) as info:
            entry.main()
            raise SystemExit(0)
        return info.value.code or 0, capsys.readouterr()

    code, out = run(["inspect"])
    assert code == 0 and result.run_id in out.out and "evolve" in out.out
    code, out = run(["inspect", result.run_id])
    assert code == 0 and "curves" in out.out and "selection share" in out.out
    assert "selection share over training episodes: member as role" in out.out and "m0" in out.out
    assert "fitness noise over 2 generations" in out.out and "detectable difference" in out.out
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


def kill_at(n: int):
    """A progress callback that raises Kill at the n-th training episode."""
    seen = {"n": 0}

    def killer(event):
        if isinstance(event, EvolveEpisodeFinished) and event.kind == "train":
            seen["n"] += 1
            if seen["n"] == n:
                raise Kill()

    return killer


def run_cli(monkeypatch, capsys, args: list[str]) -> tuple[int, str, str]:
    import sys

    from trinity_cli import entry

    monkeypatch.setattr(sys, "argv", ["trinity", *args])
    with pytest.raises(SystemExit) as info:
        entry.main()
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


def scripted_default_pool(home: Path) -> None:
    """A scripted pool named `local` in `home`, so that code falling back to the default pool
    never loads a real model."""
    (home / "pools").mkdir(parents=True, exist_ok=True)
    write_pool(home / "pools", {"name": "local", "models": [
        {"name": "m0", "kind": "scripted", "default": "Answer: 1"},
        {"name": "m1", "kind": "scripted", "default": "Answer: 1"}]}, name="local.yaml")


def test_resume_takes_every_option_from_the_run(tmp_path: Path, monkeypatch, capsys) -> None:
    """Issue 14.1: `--resume RUN` alone trains on the run's items with the run's seed."""
    pool, tasks = setup_files(tmp_path)
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-a"))
    ref = evolve(options(pool, tasks, out=str(tmp_path / "a")))
    home = tmp_path / "home-b"
    monkeypatch.setenv("TRINITY_HOME", str(home))
    scripted_default_pool(home)
    with pytest.raises(Kill):
        evolve(options(pool, tasks, out=str(tmp_path / "b")), progress=kill_at(21))
    # Library: nothing but the run id (every option at its default).
    resumed = evolve(EvolveOptions(), resume="run-1")
    a, b = Head.load(tmp_path / "a"), Head.load(tmp_path / "b")
    assert np.array_equal(a.flat(), b.flat())
    assert np.array_equal(a.center, b.center) and a.center_scale == b.center_scale  # from the checkpoint
    assert resumed.best_val == ref.best_val and resumed.spent == ref.spent
    training = Head.load(tmp_path / "b").manifest["training"]
    assert training["tasks"] == f"file:{tasks}:train" and training["seed"] == 3 and training["minibatch"] == 4


def test_resume_from_the_cli_refuses_conflicting_flags(tmp_path: Path, monkeypatch, capsys) -> None:
    """Issue 14.1: flags that disagree with the run are refused by name, even when they hold a
    default value; repeating a flag with the run's value is fine; --budget may be raised."""
    pool, tasks = setup_files(tmp_path)
    scripted_default_pool(tmp_path / "home")
    with pytest.raises(Kill):
        evolve(options(pool, tasks, out=str(tmp_path / "b")), progress=kill_at(5))
    code, _, err = run_cli(monkeypatch, capsys, ["evolve", "--resume", "run-1", "--seed", "0", "--minibatch", "8"])
    assert code == 2
    assert "--seed 0 (the run has 3)" in err and "--minibatch 8 (the run has 4)" in err
    assert "--pool" not in err and "--tasks" not in err  # not typed: taken from the run
    code, out, err = run_cli(monkeypatch, capsys, ["evolve", "--resume", "1", "--seed", "3", "--budget", "64"])
    assert code == 0, err
    head = Head.load(tmp_path / "b")
    assert head.manifest["training"]["budget"] == 64 and head.manifest["training"]["spent"] == 64
    assert RunStore().load("run-1")["options"]["tasks"] == f"file:{tasks}:train"


def test_inspect_shows_an_unfinished_run_and_how_to_finish_it(tmp_path: Path, monkeypatch, capsys) -> None:
    """A run stopped before its budget has no run.json; `inspect` lists it as unfinished and
    shows its curves and selection from the checkpoint and the generations written so far."""
    pool, tasks = setup_files(tmp_path)
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home"))
    with pytest.raises(Kill):
        evolve(options(pool, tasks, out=str(tmp_path / "b")), progress=kill_at(37))  # in generation 2
    store = RunStore()
    (summary,) = store.list()
    assert (summary.id, summary.kind, summary.status) == ("run-1", "evolve", "unfinished")
    assert "(32 of 48 episodes)" in summary.title
    record = store.load("1")
    assert record["status"] == "unfinished" and record["head"] is None and record["spent"] == 32
    assert [c["generation"] for c in record["curves"]] == [0, 1]
    pairs = record["selection"]["file:" + str(tasks)]["pairs"]  # the 32 episodes of generations 0 and 1
    assert sum(sum(roles.values()) for roles in pairs.values()) == pytest.approx(1.0)
    code, out, err = run_cli(monkeypatch, capsys, ["inspect", "run-1"])
    assert code == 0, err
    shown = " ".join((out + err).split())  # as one line, however Rich wrapped it
    assert "unfinished: 32 of 48 training episodes" in shown and "trinity evolve --resume run-1" in shown
    # The generation it was stopped in: what the stopped process had played of it.
    assert record["under_way"]["generation"] == 2 and record["under_way"]["processes"][0]["episodes"] == 5
    assert "generation 2 under way: 5 episodes played so far, by 1 process" in shown
    code, out, _ = run_cli(monkeypatch, capsys, ["inspect"])
    assert code == 0 and "unfinished" in out
    # Finishing it turns it into an ordinary finished run.
    code, _, err = run_cli(monkeypatch, capsys, ["evolve", "--resume", "run-1", "-q"])
    assert code == 0, err
    (summary,) = RunStore().list()
    assert summary.status == "done" and RunStore().load("run-1")["spent"] == 48


def test_budget_below_one_generation_is_refused_up_front(tmp_path: Path, monkeypatch, capsys) -> None:
    """Issue 14.2: no run, no head: popsize 4 x minibatch 4 needs a budget of 16."""
    pool, tasks = setup_files(tmp_path)
    with pytest.raises(ConfigError, match=r"`budget` 15 is smaller than one generation.* = 16"):
        evolve(options(pool, tasks, budget=15, out=str(tmp_path / "h")))
    assert not (tmp_path / "h").exists() and not list((tmp_path / "home" / "runs").glob("run-*"))
    code, _, err = run_cli(monkeypatch, capsys, [
        "evolve", "--search-only", "--pool", str(pool), "--tasks", f"file:{tasks}:train", "--backbone", "hash:16",
        "--popsize", "4", "--minibatch", "4", "--budget", "10"])
    assert code == 2 and "smaller than one generation" in err and "--budget 16" in err


def test_curves_count_per_generation_and_in_total(tmp_path: Path, monkeypatch) -> None:
    """Issue 14.3: the counters of a generation are its own; totals are named as such."""
    from trinity_cli.pool import pool as pool_mod

    pool, tasks = setup_files(tmp_path)
    calls: list[tuple[int, bool, int]] = []  # (generation, cached, tokens)
    generation = {"g": 0}
    original = pool_mod.Pool.chat

    def counting(self, name, messages, params=None, on_text=None):
        c = original(self, name, messages, params, on_text)
        calls.append((generation["g"], c.cached, c.prompt_tokens + c.completion_tokens))
        return c

    def progress(event):
        if isinstance(event, GenerationFinished):
            generation["g"] = event.curve["generation"] + 1

    monkeypatch.setattr(pool_mod.Pool, "chat", counting)
    result = evolve(options(pool, tasks, budget=48), progress=progress)
    assert len(result.curves) == 3
    for c in result.curves:
        mine = [x for x in calls if x[0] == c["generation"]]
        assert c["pool_calls_gen"] == len(mine) > 0
        assert c["cache_hits_gen"] == sum(x[1] for x in mine)
        assert c["tokens_gen"] == sum(x[2] for x in mine)
        upto = [x for x in calls if x[0] <= c["generation"]]
        assert c["pool_calls_total"] == len(upto) and c["tokens_total"] == sum(x[2] for x in upto)
        assert c["cache_hits_total"] == sum(x[1] for x in upto)
        assert "pool_calls" not in c and "tokens" not in c
    assert result.curves[1]["pool_calls_gen"] < result.curves[1]["pool_calls_total"]


def test_resume_finds_runs_in_numeric_order(tmp_path: Path) -> None:
    """Issue 14.4: of two unfinished runs of the same command, run-2 comes before run-10."""
    import shutil

    pool, tasks = setup_files(tmp_path)
    with pytest.raises(Kill):
        evolve(options(pool, tasks), progress=kill_at(20))
    runs = tmp_path / "home" / "runs"
    shutil.copytree(runs / "run-1", runs / "run-2")
    (runs / "run-1").rename(runs / "run-10")
    events = []
    evolve(options(pool, tasks), progress=events.append)
    assert RunResumed(run="run-2") in events
    assert [p.name for p in RunStore().run_dirs()] == ["run-2", "run-10"]
    assert (runs / "run-2" / "run.json").exists() and not (runs / "run-10" / "run.json").exists()


def test_inspect_names_runs_in_numeric_order(tmp_path: Path, monkeypatch, capsys) -> None:
    """Issue 14.4: `inspect` lists runs, and suggests close ones, by number."""
    store = RunStore()
    for n in (1, 2, 10):
        run_dir = store.root / f"run-{n}"
        run_dir.mkdir()
        store.save(run_dir, {"kind": "ask", "title": f"question {n}"})
    with pytest.raises(NotFound) as info:
        store.path("run-3")
    assert info.value.hint == "did you mean 'run-1' or 'run-2' or 'run-10'?"
    code, out, _ = run_cli(monkeypatch, capsys, ["inspect"])
    assert code == 0 and out.index("run-2 ") < out.index("run-10 ")


def test_candidates_do_not_depend_on_numpys_global_rng(tmp_path: Path, monkeypatch) -> None:
    """Issue 14.5: pycma draws from its own generator, so other draws cannot shift candidates."""
    pool, tasks = setup_files(tmp_path)
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-a"))
    evolve(options(pool, tasks, out=str(tmp_path / "a")))

    def noisy(event):
        if isinstance(event, EvolveEpisodeFinished):
            np.random.rand(3)  # someone else in the process using numpy's global RNG

    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-b"))
    np.random.seed(12345)
    evolve(options(pool, tasks, out=str(tmp_path / "b")), progress=noisy)
    a, b = Head.load(tmp_path / "a"), Head.load(tmp_path / "b")
    assert np.array_equal(a.flat(), b.flat())
    assert np.array_equal(a.center, b.center) and a.center_scale == b.center_scale  # from the checkpoint
    import pickle

    run_dir = next((tmp_path / "home-b" / "runs").glob("run-*"))
    state = pickle.loads((run_dir / "checkpoint.pkl").read_bytes())
    assert "np_random_state" not in state and state["es"].opts["randn"].rng is not None


def test_projected_head_input_keeps_the_principal_directions_and_still_learns(tmp_path: Path) -> None:
    """--input-dims K: the head reads K coordinates along the training tasks' principal
    directions (uncorrelated, in decreasing variance, total 1 over those tasks), and the search
    has (M + 3) x K + (M + 3) values; it still learns the toy routing."""
    from trinity_cli import tasks as tasks_mod
    from trinity_cli.coordinator.head import untrained
    from trinity_cli.coordinator.policy import Coordinator

    pool, task_file = setup_files(tmp_path)
    opts = options(pool, task_file, budget=160, input_dims=4, seed=4, out=str(tmp_path / "head"))
    result = evolve(opts)
    head = Head.load(tmp_path / "head")
    train = tasks_mod.sample_items(tasks_mod.parse_mix(opts.tasks), seed=opts.seed)
    assert head.manifest["input"] == {"center_items": len(train), "dims": 4}
    assert head.weights.shape == (5, 4) and head.basis.shape == (4, 16) and head.n_params == 25
    assert head.hidden_size == 16 and head.manifest["format"] == "trinity-head/3"
    coordinator = Coordinator(untrained("duo", ["m0", "m1"], head.manifest["backbone"], 16), backbone_ref="hash:16")
    feats = np.array([coordinator.state_feature(i.prompt) for i in train])
    z = ((feats - head.center) / head.center_scale) @ head.basis.T.astype(np.float64)
    assert np.allclose(z.mean(axis=0), 0, atol=1e-5)
    var = z.var(axis=0)
    assert var.sum() == pytest.approx(1.0, rel=1e-4) and np.all(np.diff(var) <= 1e-7)
    assert np.allclose(np.corrcoef(z.T), np.eye(4), atol=1e-3)  # principal directions: uncorrelated
    full = feats - feats.mean(axis=0)  # and the top ones: no other 4 directions hold more variance
    units = head.basis / np.linalg.norm(head.basis, axis=1, keepdims=True)
    assert (full @ units.T).var(axis=0).sum() == pytest.approx(
        np.sum(np.linalg.svd(full, compute_uv=False)[:4] ** 2) / len(full), rel=1e-3)
    assert result.best_val >= 0.8  # uniform routing scores ~0.5


def test_input_dims_refused_before_anything_runs(tmp_path: Path) -> None:
    pool, task_file = setup_files(tmp_path)
    with pytest.raises(ConfigError, match="`input_dims` 300 needs at least as many `center_items`"):
        evolve(options(pool, task_file, input_dims=300))
    with pytest.raises(ConfigError, match="needs as many training tasks"):
        evolve(options(pool, task_file, input_dims=200))
    assert not list(RunStore().root.glob("run-*"))


def test_head_input_is_centred_on_turn0_features_of_training_tasks(tmp_path: Path) -> None:
    from trinity_cli import tasks as tasks_mod
    from trinity_cli.coordinator.head import untrained
    from trinity_cli.coordinator.policy import Coordinator
    from trinity_cli.coordinator.text import coordinator_text

    pool, task_file = setup_files(tmp_path)
    opts = options(pool, task_file, budget=16, center_items=1000, out=str(tmp_path / "head"))
    evolve(opts)
    head = Head.load(tmp_path / "head")
    train = tasks_mod.sample_items(tasks_mod.parse_mix(opts.tasks), seed=opts.seed)
    assert head.manifest["input"] == {"center_items": len(train), "dims": 0}  # all of them: fewer than asked
    coordinator = Coordinator(untrained("duo", ["m0", "m1"], head.manifest["backbone"], 16), backbone_ref="hash:16")
    feats = np.array([f / np.linalg.norm(f) for f in
                      (coordinator.features(coordinator_text(i.prompt, [])) for i in train)])
    x = (feats - head.center) / head.center_scale  # what the head reads at turn 0
    assert np.allclose(x.mean(axis=0), 0, atol=1e-5)
    assert np.mean(np.sum(x**2, axis=1)) == pytest.approx(1.0, rel=1e-4)
    # --center-items 0: features read as they are.
    evolve(options(pool, task_file, budget=16, center_items=0, out=str(tmp_path / "raw")))
    raw = Head.load(tmp_path / "raw")
    assert not raw.center.any() and raw.center_scale == 1.0 and raw.manifest["input"] == {"center_items": 0, "dims": 0}


OLD_LAYOUT = Path(__file__).parent / "data" / "old_layout_run"


def test_a_run_checkpointed_by_the_flat_layout_resumes_after_the_package_moves(tmp_path: Path, monkeypatch) -> None:
    """tests/data/old_layout_run was written by trinity at f16c643, when evolve/evolution.py was a flat
    module (its checkpoint pickles `trinity_cli.evolve._Randn`): this test's setup_files and
    options(Path("pool.yaml"), Path("tasks.jsonl"), input_dims=4), run from that directory with
    TRINITY_HOME=home and stopped mid-generation 2, like the kill test above. It resumes to
    the head an uninterrupted run of today's code ends with."""
    work = tmp_path / "old"
    shutil.copytree(OLD_LAYOUT, work)
    assert b"trinity_cli.evolve\x94" in (work / "home" / "runs" / "run-1" / "checkpoint.pkl").read_bytes()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TRINITY_HOME", str(work / "home"))
    events: list = []
    resumed = evolve(options(Path("pool.yaml"), Path("tasks.jsonl"), input_dims=4, out=str(tmp_path / "b")),
                     resume="run-1", progress=events.append)
    start = next(e for e in events if isinstance(e, EvolveStarted))
    assert start.run == "run-1" and start.spent == 32  # two generations from the old checkpoint
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-a"))
    reference = evolve(options(Path("pool.yaml"), Path("tasks.jsonl"), input_dims=4, out=str(tmp_path / "a")))
    a, b = Head.load(tmp_path / "a"), Head.load(tmp_path / "b")
    assert np.array_equal(a.flat(), b.flat()) and np.array_equal(a.basis, b.basis)
    assert resumed.best_val == reference.best_val and resumed.spent == reference.spent == 48


def _decisions(run_dir: Path) -> list[tuple[bool, bool]]:
    """Per turn of every training episode: (model is its most likely, role is its most likely)."""
    from trinity_cli.messages import ROLES
    from trinity_cli.runs.run_files import EvolveRun

    out = []
    for generation in EvolveRun(run_dir).generations():
        for episode in generation["episodes"]:
            for turn in episode["transcript"]["turns"]:
                best_model = ["m0", "m1"][int(np.argmax(turn["model_probs"]))]  # the pool's order
                best_role = ROLES[int(np.argmax(turn["role_probs"]))].value
                out.append((turn["model"] == best_model, turn["chosen_role"] == best_role))
    return out


def test_greedy_decisions_take_the_most_likely_model_and_role(tmp_path: Path, monkeypatch) -> None:
    setup_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    pool, tasks = Path("pool.yaml"), Path("tasks.jsonl")
    greedy = evolve(options(pool, tasks, budget=16, decisions="greedy", out=str(tmp_path / "head")))
    sampled = evolve(options(pool, tasks, budget=16))
    store = RunStore()
    greedy_turns = _decisions(store.root / greedy.run_id)
    sampled_turns = _decisions(store.root / sampled.run_id)
    assert len(greedy_turns) >= 16 and all(m and r for m, r in greedy_turns)
    assert not all(m and r for m, r in sampled_turns)  # sampling does leave the most likely choice
    assert Head.load(tmp_path / "head").manifest["training"]["decisions"] == "greedy"
    assert greedy.run_id != sampled.run_id  # another configuration, another run
    with pytest.raises(ConfigError, match="decisions"):
        evolve(options(pool, tasks, decisions="argmax"))


def fruit_files(tmp_path: Path) -> tuple[Path, Path]:
    """A pool whose right member depends on a word of the question, not on the task: m0
    knows apples, m1 knows pears (each answers the other's questions wrong)."""
    def knows(word: str) -> list[dict[str, str]]:
        return [{"match": word, "reply": "Answer: 42"}, {"match": "Question", "reply": "Answer: 7"}]

    pool = write_pool(tmp_path, {"name": "fruit", "max_resident": 1, "models": [
        {"name": "m0", "kind": "scripted", "rules": knows("apple"), "default": "Plan: think."},
        {"name": "m1", "kind": "scripted", "rules": knows("pear"), "default": "Plan: think."},
    ]})
    tasks = tmp_path / "fruit.jsonl"
    tasks.write_text("".join(json.dumps({
        "id": f"q{i}", "prompt": f"Question {i}: how many {'apple' if i % 2 else 'pear'} seeds?",
        "answer": 42, "scorer": "numeric"}) + "\n" for i in range(80)))
    return pool, tasks


def test_evolve_learns_routing_that_depends_on_the_question(tmp_path: Path, monkeypatch, capsys) -> None:
    """Any constant policy (a bias toward one member) is right on the share of questions its
    member knows, about half; the head has to read the question to beat that."""
    fruit_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = evolve(options(Path("pool.yaml"), Path("fruit.jsonl"), budget=240, minibatch=12, popsize=4,
                            max_turns=1, val_tasks="file:fruit.jsonl:val:16", val_every=1))
    from trinity_cli import tasks as task_mod

    val = task_mod.sample_items(task_mod.parse_mix("file:fruit.jsonl:val:16"), seed=0)  # as evolve draws them
    apples = sum("apple" in item.prompt for item in val) / len(val)
    best_constant = max(apples, 1 - apples)  # always m0, or always m1
    with capsys.disabled():
        print(f"\ncontent routing: evolved head validates at {result.best_val:.3f}, "
              f"the best constant policy scores {best_constant:.3f}")
    assert result.best_val >= best_constant + 0.25


def test_the_one_command_evolve_writes_the_head_that_validates_best_and_its_cost_was_foretold(
        tmp_path: Path, monkeypatch, capsys) -> None:
    """evolve/recipe.py on the fruit pool: matrix, fitted start, search, validation, verdict;
    `--dry-run`'s call estimate against the calls the run then makes."""
    fruit_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["evolve", "--pool", "pool.yaml", "--tasks", "file:fruit.jsonl:train:40", "--val-tasks",
            "file:fruit.jsonl:val:16", "--budget", "640", "--popsize", "4", "--backbone", "hash:16"]
    code, out, err = run_cli(monkeypatch, capsys, [*args, "--dry-run"])
    assert code == 0 and "matrix" in err and "validate" in err and not (tmp_path / "home" / "runs").exists()
    from trinity_cli.evolve import recipe
    from trinity_cli.evolve.options import EvolveOptions
    from trinity_cli.pool import pool as pool_mod

    given = ["tasks", "val_tasks", "popsize", "backbone"]
    options = EvolveOptions(pool="pool.yaml", tasks="file:fruit.jsonl:train:40", val_tasks="file:fruit.jsonl:val:16",
                            budget=640, popsize=4, backbone="hash:16")
    fresh = recipe.plan(recipe.recipe_options(options, given))
    foretold = fresh.calls
    assert fresh.recorded == 0  # nothing in the cache yet
    original, made = pool_mod.Pool.chat, []

    def counting(self, name, messages, params=None, on_text=None):
        made.append(name)
        return original(self, name, messages, params, on_text)

    monkeypatch.setattr(pool_mod.Pool, "chat", counting)
    code, out, err = run_cli(monkeypatch, capsys, args)
    assert code == 0, err
    with capsys.disabled():
        print(f"\nrecipe: foretold {foretold} pool calls, made {len(made)} ({foretold / len(made) - 1:+.0%})")
    assert abs(foretold / len(made) - 1) <= 0.25
    # Run again, the matrix's calls and the validation's singles are known to be recorded.
    before = recipe.plan(recipe.recipe_options(options, given)).phases
    assert [p.recorded for p in before if p.name == "matrix"] == [p.calls for p in before if p.name == "matrix"]
    assert next(p.recorded for p in before if p.name == "validate") == 16 * 2  # two members alone on 16 items
    head_dir = Path(out.strip().splitlines()[-1])
    verdict = json.loads((head_dir / "verdict.json").read_text())
    rows = {r["row"]: r for r in verdict["table"]}
    assert set(rows) == {"single:m0", "single:m1", "agree", "head:fruit-recipe-reader", "head:fruit-recipe-start",
                         "head:fruit-recipe-search"}
    # The right member depends on the question's words, which a reader does not read: a head wins.
    assert verdict["winner"] in ("head:fruit-recipe-start", "head:fruit-recipe-search")
    best = max(r["fitness"] for r in verdict["table"])
    assert rows[verdict["winner"]]["fitness"] == best
    assert rows[verdict["winner"]]["accuracy"] > rows["agree"]["accuracy"] + 0.2
    head = Head.load(head_dir)
    assert head.manifest["recipe"]["winner"] == verdict["winner"] and head.learned
    assert head.made == ("evolved" if verdict["winner"].endswith("search") else "fitted")
    # docs/commands.md's evolve section shows this table: its rows must be what this run gives.
    page = (Path(__file__).parents[1] / "docs" / "commands.md").read_text()
    for row in verdict["table"]:
        line = next(x for x in page.splitlines() if x.startswith(f" {row['row']} "))
        assert f"{row['accuracy']:.1%}" in line and f"{row['correct']:g}/{row['n']}" in line, line
    run = verdict["phases"]["search"]["run"]
    code, out, _ = run_cli(monkeypatch, capsys, ["inspect", run])
    assert code == 0 and "verdict" in out and "head:fruit-recipe-start" in out


def test_when_nothing_beats_a_member_the_recipe_writes_no_head_and_says_so(tmp_path: Path, monkeypatch, capsys) -> None:
    pool, tasks = setup_files(tmp_path)  # m0 always right: no coordination can beat it alone
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(monkeypatch, capsys, [
        "evolve", "--pool", "pool.yaml", "--tasks", "file:tasks.jsonl:train:20", "--val-tasks",
        "file:tasks.jsonl:val:6", "--budget", "0", "--backbone", "hash:16"])
    assert code == 0, err
    assert out.strip() == "single:m0" and "ask that member alone" in err
    verdict = json.loads((tmp_path / "home" / "heads" / "duo-recipe.verdict.json").read_text())
    assert verdict["winner"] == "single:m0" and verdict["head"] is None
    assert not (tmp_path / "home" / "heads" / "duo-recipe").exists()


def test_the_one_command_evolve_on_your_own_tasks_and_an_openai_compatible_member(
        tmp_path: Path, monkeypatch, capsys) -> None:
    """Issue 62.5: a user's JSONL and a pool with an API member (the scripted HTTP server), end
    to end; the API member gives no log-probabilities, and nothing breaks for it."""
    from .slow_openai import SlowOpenAI

    pool, tasks = fruit_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    with SlowOpenAI(delay_s=0.0, reply="It is 42.\nAnswer: 42") as server:
        api = server.models(1)[0]
        write_pool(tmp_path, {"name": "mixed", "models": [
            {"name": "m0", "kind": "scripted", "rules": [{"match": "apple", "reply": "Answer: 42"},
                                                          {"match": "Question", "reply": "Answer: 7"}]}, api]},
            name="mixed.yaml")
        code, out, err = run_cli(monkeypatch, capsys, [
            "evolve", "--pool", "mixed.yaml", "--tasks", "file:fruit.jsonl:train:12", "--val-tasks",
            "file:fruit.jsonl:val:8", "--budget", "0", "--backbone", "hash:16"])
        assert code == 0, err
        assert server.requests > 0
    verdict = json.loads((tmp_path / "home" / "heads" / "mixed-recipe.verdict.json").read_text())
    rows = {r["row"]: r for r in verdict["table"]}
    assert rows["single:api0"]["accuracy"] == 1.0 and verdict["winner"] == "single:api0"
    assert out.strip() == "single:api0" and verdict["head"] is None
    matrix = json.loads(Path(verdict["phases"]["matrix"]["file"]).read_text())["matrix"]
    replies = [r for row in matrix.values() for m, rs in row.items() for r in rs]
    assert {r["logprob_stats"] is None for r in replies} == {True, False}  # the API member gives none


def test_the_recipe_stops_at_its_call_cap_and_the_same_command_goes_on(tmp_path: Path, monkeypatch, capsys) -> None:
    fruit_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["evolve", "--pool", "pool.yaml", "--tasks", "file:fruit.jsonl:train:12", "--val-tasks",
            "file:fruit.jsonl:val:6", "--budget", "0", "--backbone", "hash:16"]
    from trinity_cli.backends.scripted import ScriptedBackend

    original, made = ScriptedBackend.chat, []
    monkeypatch.setattr(ScriptedBackend, "chat", lambda self, m, p: made.append(1) or original(self, m, p))
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "uncapped"))
    code, whole, err = run_cli(monkeypatch, capsys, args)
    assert code == 0, err
    needed, made[:] = len(made), []
    assert needed > 30
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "capped"))
    code, out, err = run_cli(monkeypatch, capsys, [*args, "--max-calls", "30"])
    assert code == 2 and "30 model calls made, the cap --max-calls 30" in err and len(made) == 30
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("error:") and "higher cap" in err
    code, out, err = run_cli(monkeypatch, capsys, args)
    assert code == 0, err
    assert out.replace(str(tmp_path / "capped"), "") == whole.replace(str(tmp_path / "uncapped"), "")
    assert len(made) == needed  # the 30 made before the cap replay: none is made twice
