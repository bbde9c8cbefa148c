"""A head's start fitted to a sample matrix (evolve/label_fit.py), and evolve starting from it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trinity_cli.coordinator.head import Head, untrained
from trinity_cli.errors import ConfigError
from trinity_cli.evaluators.local import EpisodeSpec, Runtime
from trinity_cli.events import (
    EvolveStarted,
    GenerationFinished,
    RotationFitted,
    RotationPlaying,
    StartFitted,
    StartValidated,
)
from trinity_cli.evolve.evolution import evolve
from trinity_cli.evolve.label_fit import fit_start, read_labels
from trinity_cli.evolve.options import EvolveOptions
from trinity_cli.evolve.rotation_fit import fit_rotation, rotation, rotation_schedule
from trinity_cli.messages import ROLES, Role
from trinity_cli.policies.head import HeadPolicy
from trinity_cli.pool.pool import Pool
from trinity_cli.pool_config import load_pool
from trinity_cli.runs.reports import curve_rows, start_validation
from trinity_cli.runs.store import RunStore

from .conftest import write_pool

BACKBONE = {"ref": "hash:16", "fingerprint": "x", "hidden_size": 16}


def test_fit_picks_the_member_each_item_favours() -> None:
    """Member 0 solves items with x[0] > 0, member 1 the others, member 2 none: the fitted
    model logits pick each item's solver, held out they beat any one member, and the roles
    lean to Verifier (the first turn is a Worker by rule, so the start plays ask-then-agree)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 16))
    x[:, 0] = np.sign(x[:, 0]) * (1.0 + np.abs(x[:, 0]))  # away from the boundary a linear fit cannot place exactly
    labels = {f"i{n}": np.array([float(v[0] > 0), float(v[0] <= 0), 0.0]) for n, v in enumerate(x)}
    base = untrained("p", ["a", "b", "c"], BACKBONE, 16)
    fit = fit_start(base, {f"i{n}": v for n, v in enumerate(x)}, labels, margin=2.0)
    head = base.with_flat(fit.vector)
    picks = [int(np.argmax(head.weights[:3] @ v + head.bias[:3])) for v in x]
    assert picks == [0 if v[0] > 0 else 1 for v in x]
    assert fit.items == 40 and fit.oracle_label == 1.0 and fit.best_fixed_label < 0.6
    assert fit.picked_label_loo > 0.9
    assert not head.weights[3:].any()
    assert head.bias[3 + ROLES.index(Role.VERIFIER)] == pytest.approx(2.0)


def test_fit_needs_labelled_training_items() -> None:
    base = untrained("p", ["a", "b"], BACKBONE, 16)
    with pytest.raises(ConfigError, match="labels 1 of the run's training items"):
        fit_start(base, {"x": np.ones(16), "y": np.ones(16)}, {"x": np.array([1.0, 0.0])})


def test_read_labels_refuses_missing_foreign_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        read_labels(tmp_path / "none.json", ["a"])
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="cannot be read"):
        read_labels(tmp_path / "bad.json", ["a"])
    (tmp_path / "other.json").write_text(json.dumps({"models": ["z"], "matrix": {}}))
    with pytest.raises(ConfigError, match="is for members"):
        read_labels(tmp_path / "other.json", ["a"])
    (tmp_path / "ok.json").write_text(json.dumps({"models": ["a", "b"], "matrix": {
        "t/1": {"a": [{"correct": True}, {"correct": False}], "b": []}}}))
    assert read_labels(tmp_path / "ok.json", ["a", "b"])["t/1"].tolist() == [0.5, 0.0]


def _split_pool(tmp_path: Path) -> tuple[Path, Path]:
    """m0 solves the "Question" items, m1 the "Puzzle" items, and the sample matrix says so."""
    rules = {"m0": [{"match": "Question", "reply": "Answer: 42"}],
             "m1": [{"match": "Puzzle", "reply": "Answer: 42"}]}
    pool = write_pool(tmp_path, {"name": "duo", "max_resident": 1, "models": [
        {"name": n, "kind": "scripted", "rules": r, "default": "Answer: 7"} for n, r in rules.items()]})
    task_file = tmp_path / "tasks.jsonl"
    lines = [{"id": f"q{i}", "prompt": f"{'Question' if i % 2 else 'Puzzle'} {i}: what is six times seven?",
              "answer": 42, "scorer": "numeric"} for i in range(60)]
    task_file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    matrix = {"models": ["m0", "m1"], "matrix": {
        f"file:{task_file}/q{i}": {"m0": [{"correct": bool(i % 2)}], "m1": [{"correct": not i % 2}]}
        for i in range(60)}}
    (tmp_path / "matrix.json").write_text(json.dumps(matrix))
    return pool, task_file


def test_evolve_starts_from_the_fitted_head_and_keeps_it_when_it_validates_best(tmp_path: Path) -> None:
    """A fixed member scores half, the fitted start routes each item to its solver; it is
    validated before generation 0 and, one noisy generation later, kept as the head
    (generation -1) unless the mean beats it."""
    pool, task_file = _split_pool(tmp_path)
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    from trinity_cli import tasks as tasks_mod

    train = tasks_mod.sample_items(tasks_mod.parse_mix(f"file:{task_file}:train"), seed=3)
    assert sum(item.key in matrix["matrix"] for item in train) == len(train)  # keys as the matrix writes them
    events: list[tuple[str, dict]] = []
    result = evolve(EvolveOptions(pool=str(pool), tasks=f"file:{task_file}:train", val_tasks=f"file:{task_file}:val:12",
                                  budget=16, minibatch=4, popsize=4, seed=3, max_turns=2, val_every=1,
                                  backbone="hash:16", sigma0=1.0, init_labels=str(tmp_path / "matrix.json"),
                                  out=str(tmp_path / "head")),
                    progress=events.append)
    kinds = [type(e) for e in events]
    assert (kinds.index(StartFitted) < kinds.index(EvolveStarted) < kinds.index(StartValidated)
            < kinds.index(GenerationFinished))
    start_val = next(e.val for e in events if isinstance(e, StartValidated))
    assert start_val >= 0.75  # a fixed member scores about 0.5; decisions are sampled in training
    head = Head.load(tmp_path / "head")
    record = RunStore().load(result.run_id)
    assert record["options"]["init_labels"] == str(tmp_path / "matrix.json")
    assert result.best_val >= start_val
    if head.manifest["training"]["best_generation"] == -1:
        assert result.best_val == start_val
    # The start's score is kept beside the curves, whichever head won: a "start" row first.
    assert record["start_val"] == head.manifest["training"]["start_val"] == start_val
    rows = curve_rows(record["curves"], start_validation(record)).rows
    assert rows[0] == ["start", "0", "", "", f"{start_val:.3f}", "", "", "", ""] and rows[1][0] == "0"
    assert (tmp_path / "head" / "curves.png").stat().st_size > 0


def test_the_start_score_of_runs_written_before_it_was_kept_is_read_from_the_best() -> None:
    """Runs finished before "start_val" was kept: the best is the start only at generation -1;
    a run without a fitted start has no start score."""
    assert start_validation({"best_val": 0.604, "best_generation": -1}) == 0.604
    assert start_validation({"best_val": 0.7, "best_generation": 2}) is None
    assert start_validation({"best": {"val": 0.5, "generation": -1}}) == 0.5  # a checkpoint state
    assert start_validation({"best": {"val": None, "generation": -1}}) is None  # no fitted start
    assert start_validation({"start_val": 0.5, "best_val": 0.7, "best_generation": 2}) == 0.5
    assert [r[0] for r in curve_rows([]).rows] == []


def test_budget_zero_writes_the_validated_start_as_the_head(tmp_path: Path) -> None:
    """`--budget 0` with `--init-labels`: the start is fitted and validated, and it is the head
    (no generation is played); without a start, budget 0 is refused."""
    pool, task_file = _split_pool(tmp_path)
    base = dict(pool=str(pool), tasks=f"file:{task_file}:train", val_tasks=f"file:{task_file}:val:12", budget=0,
                minibatch=4, popsize=4, seed=3, max_turns=2, backbone="hash:16", out=str(tmp_path / "head"))
    with pytest.raises(ConfigError, match="may be 0 with"):
        evolve(EvolveOptions(**base))
    events: list = []
    result = evolve(EvolveOptions(**base, init_labels=str(tmp_path / "matrix.json")), progress=events.append)
    assert result.spent == 0 and result.generations == 0 and not any(isinstance(e, GenerationFinished) for e in events)
    start_val = next(e.val for e in events if isinstance(e, StartValidated))
    head = Head.load(tmp_path / "head")
    assert head.manifest["training"]["best_generation"] == -1 and result.best_val == start_val >= 0.75


def test_rotation_orders_the_members_from_the_first() -> None:
    assert rotation("b", ["a", "b", "c"]) == ["b", "c", "a"] and rotation("a", ["a", "b"]) == ["a", "b"]
    schedule = rotation_schedule(["a", "b", "c"], "c", 3)
    assert schedule.order == ["c", "a", "b"] and schedule.plan == (Role.WORKER, Role.VERIFIER, Role.VERIFIER)


def test_the_rotation_fit_asks_the_next_member_after_the_last_speaker() -> None:
    """States whose input says who spoke last (one-hot, plus noise): the fitted rows rank the
    next member in pool order first; a fit with one target member only is refused."""
    rng = np.random.default_rng(1)
    last = rng.integers(0, 3, size=60)
    x = np.eye(3)[last] + 0.1 * rng.normal(size=(60, 3))
    x = np.hstack([x, rng.normal(size=(60, 5))])
    base = untrained("p", ["a", "b", "c"], {"ref": "hash:8", "fingerprint": "x", "hidden_size": 8}, 8)
    fit = fit_rotation(base, x, list((last + 1) % 3))
    head = base.with_flat(fit.vector)
    picks = np.argmax(x @ head.weights[:3].T + head.bias[:3], axis=1)
    assert list(picks) == list((last + 1) % 3) and fit.next_loo > 0.95 and fit.states == 60
    assert int(np.argmax(head.bias[3:])) == ROLES.index(Role.VERIFIER)
    with pytest.raises(ConfigError, match="asking 1 members"):
        fit_rotation(base, x, [0] * 60)


def test_evolve_init_rotate_fits_a_start_that_asks_the_solver_then_the_other(tmp_path: Path) -> None:
    """`--init-labels --init-rotate --budget 0`: the rotation is played on the labelled training
    items (2 turns each: the matrix's pick, then the other member), the start is fitted to those
    states, and the head it writes, played greedily, asks each item's solver first and the
    other member second; without --init-labels the option is refused."""
    pool, task_file = _split_pool(tmp_path)
    base = dict(pool=str(pool), tasks=f"file:{task_file}:train", val_tasks=f"file:{task_file}:val:8", budget=0,
                minibatch=4, popsize=4, seed=3, max_turns=2, backbone="hash:256", decisions="greedy",
                out=str(tmp_path / "head"))
    with pytest.raises(ConfigError, match="init_rotate"):
        evolve(EvolveOptions(**base, init_rotate=True))
    events: list = []
    evolve(EvolveOptions(**base, init_labels=str(tmp_path / "matrix.json"), init_rotate=True),
           progress=events.append)
    fitted = next(e for e in events if isinstance(e, RotationFitted))
    assert next(e for e in events if isinstance(e, RotationPlaying)).episodes == fitted.episodes
    assert fitted.states == 2 * fitted.episodes and fitted.episodes > 20 and fitted.next_loo > 0.9
    head = Head.load(tmp_path / "head")
    from trinity_cli import tasks as tasks_mod

    items = tasks_mod.sample_items(tasks_mod.parse_mix(f"file:{task_file}:val:8"), seed=0)
    runtime = Runtime(Pool(load_pool(str(pool))))
    try:
        for item in items:
            outcome = runtime.play(EpisodeSpec(item=item, seed=0, policy=HeadPolicy(head), max_turns=2, greedy=True))
            assert outcome.transcript is not None
            solver = "m0" if "Question" in item.prompt else "m1"
            other = "m1" if solver == "m0" else "m0"
            assert [t.model for t in outcome.transcript.turns] == [solver, other], item.prompt
    finally:
        runtime.close()
        runtime.pool.close()
