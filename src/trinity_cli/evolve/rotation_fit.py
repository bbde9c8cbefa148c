"""A start that rotates the members as `agree` does (`trinity evolve --init-labels FILE
--init-rotate`): the member the label fit picks first (evolve/label_fit.py), then the pool's
other members in pool order, one turn each, fitted to the conversation states such episodes
reach.

A linear head can rotate only if its input says who spoke last; the full hidden state says it
far more often than a projection on a few principal directions of turn-0 features does
(measured on recorded states: docs/history/head-campaign.md), so a rotating start wants
`--input-dims 0` (or a wide projection).

The fit (`fit_rotation`), on the states of rotation episodes played on the labelled training
items (`rotation_schedule`: the first member as Worker, then Verifiers, the order
`rotation(first, models)`, cycling; the loop's own rules end an episode on a Verifier's ACCEPT):
  - a state is the head input x of the conversation before a turn (head.inputs of
    coordinator.state_feature(task, turns so far)); its target is the member that turn asked;
  - model rows: ridge regression of the one-hot target on x, its strength chosen by
    leave-one-out over label_fit.RIDGE_GRID, maximising the share of held-out states whose
    target the fit ranks first; then scaled as label_fit.start_vector does;
  - role rows and SVF offsets as label_fit's start (Verifier bias `margin`; offsets zero).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from trinity_cli.coordinator.head import Head
from trinity_cli.coordinator.policy import Coordinator
from trinity_cli.episode.schedules import FixedSchedule
from trinity_cli.errors import ConfigError
from trinity_cli.evaluators.local import EpisodeSpec, Evaluator
from trinity_cli.evolve.label_fit import fit_rows, start_vector
from trinity_cli.messages import Role
from trinity_cli.policies.fixed import FixedPolicy
from trinity_cli.tasks.items import TaskItem


def rotation(first: str, models: Sequence[str]) -> list[str]:
    """The members in the order a rotation asks them: `first`, then the others in pool order
    after it, wrapping around."""
    i = list(models).index(first)
    return [*models[i:], *models[:i]]


def rotation_schedule(models: Sequence[str], first: str, max_turns: int) -> FixedSchedule:
    """The fixed schedule a rotating start imitates: `rotation(first, models)`, a Worker first
    and then Verifiers (the roles the label start plays)."""
    return FixedSchedule(models, rotation(first, models), (Role.WORKER,) + (Role.VERIFIER,) * max(0, max_turns - 1))


def first_picks(head: Head, inputs: Mapping[str, np.ndarray]) -> dict[str, str]:
    """{item key: the member `head`'s model rows rank first on that item's turn-0 input x}."""
    weights, bias = head.weights.astype(np.float64), head.bias.astype(np.float64)
    m = len(head.models)
    return {key: head.models[int(np.argmax(weights[:m] @ x + bias[:m]))] for key, x in inputs.items()}


def rotation_states(evaluator: Evaluator, coordinator: Coordinator, base: Head, items: Sequence[TaskItem],
                    firsts: Mapping[str, str], models: Sequence[str], max_turns: int,
                    seeds: Sequence[int]) -> tuple[np.ndarray, list[int]]:
    """Play `rotation_schedule` from each item's first pick through `evaluator`; the head input of
    every state those episodes reached (the conversation before a turn) and the index of the
    member that turn asked (a schedule skips a member that cannot hold the task)."""
    specs = [EpisodeSpec(item=item, seed=seed, max_turns=max_turns,
                         policy=FixedPolicy(rotation_schedule(models, firsts[item.key], max_turns)))
             for item, seed in zip(items, seeds, strict=True)]
    xs, targets = [], []
    for spec, outcome in zip(specs, evaluator.evaluate(specs), strict=True):
        assert outcome.transcript is not None  # these specs let a ContextOverflow propagate
        played = outcome.transcript.turns
        for k, turn in enumerate(played):
            xs.append(base.inputs(coordinator.state_feature(spec.item.prompt, played[:k])))
            targets.append(list(models).index(turn.model))
    return np.array(xs), targets


@dataclass
class RotationFit:
    """A fitted rotating start: its flat parameter vector (Head.flat layout) and how it was made."""

    vector: np.ndarray
    states: int
    ridge: float
    next_loo: float  # share of states whose asked member the held-out fit ranks first


def fit_rotation(base: Head, x: np.ndarray, targets: Sequence[int], margin: float = 3.0) -> RotationFit:
    """The rotating start for `base` (input fixed; SVF offsets zero) from states `x` (n, D: head
    inputs) and the member index each state's turn asked (module docstring)."""
    m = len(base.models)
    if len(x) < 4 or len(set(targets)) < 2:
        raise ConfigError(f"the rotation episodes reached {len(x)} states asking {len(set(targets))} members; "
                          "the fit needs 4 or more, asking 2 or more members",
                          "give the run more training items the sample matrix labels, and --max-turns 2 or more")
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(targets)
    w_models, b_models, ridge, right = fit_rows(x, np.eye(m)[t],
                                                lambda pred: float(np.mean(np.argmax(pred, axis=1) == t)))
    return RotationFit(vector=start_vector(base, w_models, b_models, x, margin), states=len(x), ridge=ridge,
                       next_loo=right)
