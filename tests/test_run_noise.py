"""The fitness noise of an evolve run (runs/noise.py), from its generation records."""

from __future__ import annotations

import numpy as np
import pytest

from trinity_cli.runs.noise import fitness_noise


def generation(rewards: np.ndarray) -> dict:
    """A generation record: candidate c's episodes, then c + 1's (as evolve writes them)."""
    return {"episodes": [{"candidate": c, "reward": float(r)} for c, row in enumerate(rewards) for r in row]}


def test_a_run_without_two_candidates_has_no_table() -> None:
    assert fitness_noise([]) is None
    assert fitness_noise([generation(np.ones((1, 8)))]) is None


def test_identical_candidates_show_no_difference_and_no_spread() -> None:
    rewards = np.tile(np.array([1, 0, 1, 1, 0, 0, 1, 0]), (4, 1))
    table = fitness_noise([generation(rewards)], sizes=(4,))
    assert [r["size"] for r in table["rows"]] == [4, 8]
    own = table["rows"][-1]
    assert own["pair"] == 0.0 and own["detectable"] == 0.0 and own["spread"] == 0.0
    assert own["noise_share"] is None and own["one"] > 0.1  # each candidate's score still moves


def test_candidates_that_always_differ_stand_out_of_the_noise() -> None:
    rewards = np.array([[1.0] * 8, [0.0] * 8])
    own = fitness_noise([generation(rewards)] * 3)["rows"][-1]
    assert own["one"] == 0.0 and own["spread"] == pytest.approx(0.5) and own["noise_share"] == 0.0
    assert own["pair"] == pytest.approx(1.0, abs=0.01)  # a difference of +1 or -1, by which is drawn first


def test_coin_flip_candidates_are_all_noise_and_the_table_is_reproducible() -> None:
    rng = np.random.default_rng(1)
    gens = [generation(rng.integers(0, 2, size=(8, 32)).astype(float)) for _ in range(4)]
    table = fitness_noise(gens)
    assert table == fitness_noise(gens)
    assert (table["generations"], table["population"], table["minibatch"]) == (4, 8, 32)
    by_size = {r["size"]: r for r in table["rows"]}
    assert set(by_size) == {8, 16, 32}
    assert by_size[32]["one"] == pytest.approx(0.5 / np.sqrt(32), rel=0.15)  # a mean of 32 coin flips
    assert by_size[8]["one"] > by_size[16]["one"] > by_size[32]["one"]
    assert by_size[32]["noise_share"] > 0.5
