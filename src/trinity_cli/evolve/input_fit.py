"""The fixed part of a head's input for an evolve run: which training tasks it is fitted on,
and fitting it (the centre, scale and optional projection of coordinator/head.py).

Fitted on the unit-norm turn-0 features (the task alone, no turns yet, so no model is
called) of `center_tasks`: min(n, all) training tasks drawn with rng([seed, CENTER_STREAM]).
evolve/evolution.py fits it once before generation 0 and keeps it in the checkpoint. Why a
head's input is centred: docs/history/head-campaign.md, "The p3 head".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trinity_cli import tasks
from trinity_cli.coordinator import head as head_mod
from trinity_cli.coordinator.policy import Coordinator

# Seed stream of the training tasks the head's input is made from (evolve/evolution.py's episode
# streams are the generation index and 2**31 - 1).
CENTER_STREAM = 2**31 - 2


def center_tasks(train_items: list[tasks.TaskItem], seed: int, n: int) -> list[tasks.TaskItem]:
    """The training tasks whose turn-0 features centre a run's head: min(n, all) of
    `train_items`, drawn with rng([seed, CENTER_STREAM]), in their order."""
    n = min(n, len(train_items))
    if n == 0:
        return []
    rng = np.random.default_rng([seed, CENTER_STREAM])
    return [train_items[i] for i in sorted(rng.choice(len(train_items), size=n, replace=False))]


def fit_input(coordinator: Coordinator, picked: list[tasks.TaskItem], dims: int) -> dict[str, Any]:
    """{"center": float32 (H,), "scale", "items": len(picked), "basis": float32 (dims, H) |
    None (dims 0)} from the turn-0 features of `picked` (`center_tasks`, not empty): the
    checkpoint's "input" (evolve/evolution.py) and `Head.with_input`'s arguments."""
    return fit_input_features(np.array([coordinator.state_feature(item.prompt) for item in picked]), dims)


def fit_input_features(features: np.ndarray, dims: int) -> dict[str, Any]:
    """`fit_input`'s result from the turn-0 features themselves (rows: items, unit norm)."""
    center, scale = head_mod.fit_center(features)
    basis = head_mod.fit_basis(features, center, scale, dims) if dims else None
    return {"center": center, "scale": scale, "items": len(features), "basis": basis}
