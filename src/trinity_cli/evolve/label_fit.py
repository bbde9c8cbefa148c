"""A head's starting point fitted to free labels: which members solved which training items
in a sample matrix (trinity matrix --out), before evolution plays any episode.

Sample matrix file (what `trinity matrix --out` writes; only these keys are read):
    {"models": [member, ...], "matrix": {item key: {member: [{"correct": bool, ...}, ...]}}}
An item's label for a member is the share of its replies there that were right (its greedy
reply and fresh attempts from the task alone), so labels cost no episode: the matrix's calls
are the ones the rollout cache already holds.

The fit (`fit_start`), for the items of the matrix that are training items of the run:
  - model rows: ridge regression of each member's label on the head's input x (the turn-0
    feature, head.inputs), ridge strength chosen by leave-one-out over a grid, maximising
    the label of the member each held-out item would pick; then scaled so the spread of the
    model logits around their per-item mean is `margin`;
  - role rows: no weights, bias `margin` on Verifier. An episode's first turn has nothing to
    verify, so it is played by a Worker (turns/source_rules.py's rule 2); every later turn is then a
    Verifier, which outside code answers alone and accepts on agreement (turns/settle.py): the
    start plays "ask the member predicted best, then check it by agreement", the procedure
    bench's `agree` row plays with a fixed order;
  - SVF offsets zero.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trinity_cli.bench.procedures import samples
from trinity_cli.coordinator.head import Head
from trinity_cli.errors import ConfigError, option
from trinity_cli.messages import ROLES, Role

# Ridge strengths tried, relative to the number of fitted items.
RIDGE_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)


@dataclass
class StartFit:
    """A fitted start: its flat parameter vector (Head.flat layout) and how it was made."""

    vector: np.ndarray
    items: int
    ridge: float
    picked_label_loo: float  # mean label of the member each held-out item picks
    best_fixed_label: float  # mean label of the one member best on average (what routing must beat)
    oracle_label: float  # mean of each item's best label

    def summary(self) -> dict[str, float | int]:
        return {"items": self.items, "ridge": self.ridge, "picked_label_loo": self.picked_label_loo,
                "best_fixed_label": self.best_fixed_label, "oracle_label": self.oracle_label}


def read_labels(path: str | Path, models: Sequence[str]) -> dict[str, np.ndarray]:
    """{item key: labels (len(models),), the share of each member's replies that were right}
    from a sample matrix file (module docstring); refuses a file for other members."""
    file = Path(path).expanduser()
    try:
        data = json.loads(file.read_text())
        matrix = data["matrix"]
    except FileNotFoundError:
        raise ConfigError(f"sample matrix {str(file)!r} not found",
                          "write one with: trinity matrix --split train --out FILE") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"sample matrix {str(file)!r} cannot be read ({exc.__class__.__name__}: {exc})",
                          "use a file written by trinity matrix --out") from None
    if list(data.get("models") or []) != list(models):
        raise ConfigError(f"sample matrix {str(file)!r} is for members {data.get('models')}, "
                          f"the pool has {list(models)}",
                          "make the matrix with the run's pool (trinity matrix --pool)")
    labels: dict[str, np.ndarray] = {}
    for key, row in matrix.items():
        row = samples(row)  # agree's further attempts are not samples (bench/matrix.py)
        labels[key] = np.array([np.mean([bool(r["correct"]) for r in row[m]]) if row.get(m) else 0.0
                                for m in models])
    return labels


def fit_start(base: Head, inputs: Mapping[str, np.ndarray], labels: Mapping[str, np.ndarray],
              margin: float = 3.0) -> StartFit:
    """The start vector for `base` (its input fixed; svf offsets kept at zero) from the
    head inputs x (head.inputs of the turn-0 features) and labels of the same items."""
    keys = [k for k in inputs if k in labels]
    if len(keys) < 4:
        raise ConfigError(f"the sample matrix labels {len(keys)} of the run's training items; the fit needs 4 or more",
                          "make the matrix on the run's training items (trinity matrix --split train "
                          f"with the run's {option('tasks')} and {option('seed')})")
    x = np.array([inputs[k] for k in keys], dtype=np.float64)
    y = np.array([labels[k] for k in keys], dtype=np.float64)
    n = len(keys)
    w_models, b_models, ridge, picked = fit_rows(
        x, y, lambda pred: float(np.mean(y[np.arange(n), np.argmax(pred, axis=1)])))
    return StartFit(vector=start_vector(base, w_models, b_models, x, margin), items=n, ridge=ridge,
                    picked_label_loo=picked, best_fixed_label=float(y.mean(axis=0).max()),
                    oracle_label=float(y.max(axis=1).mean()))


def fit_rows(x: np.ndarray, y: np.ndarray,
             score: Callable[[np.ndarray], float]) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Ridge rows of the targets `y` (n, M) on the inputs `x` (n, D): (W (M, D), b (M,), the
    ridge strength, its score), the strength the one of RIDGE_GRID (relative to n) whose
    leave-one-out predictions of `y` (n, M) `score` rates highest (ties: the stronger)."""
    x_mean, y_mean = x.mean(axis=0), y.mean(axis=0)
    xc, yc = x - x_mean, y - y_mean
    best: tuple[float, float, np.ndarray] | None = None
    for rel in RIDGE_GRID:
        coef, loo = ridge_loo(xc, yc, rel * len(x))
        rated = score(loo + y_mean)
        if best is None or rated >= best[0]:  # ties: the stronger ridge (later in the grid)
            best = (rated, rel * len(x), coef)
    assert best is not None
    rated, ridge, coef = best
    w_models = coef.T
    return w_models, y_mean - w_models @ x_mean, ridge, rated


def start_vector(base: Head, w_models: np.ndarray, b_models: np.ndarray, x: np.ndarray,
                 margin: float) -> np.ndarray:
    """The flat start (Head.flat layout) for `base` with model rows `w_models` (M, D) and
    `b_models` (M,), scaled so the spread of their logits on the inputs `x` around each row's
    mean is `margin`; role rows: bias `margin` on Verifier; SVF offsets zero."""
    m = len(b_models)
    pred = x @ w_models.T + b_models
    spread = float(np.std(pred - pred.mean(axis=1, keepdims=True)))
    scale = margin / spread if spread > 1e-9 else 0.0
    weights = np.zeros((m + len(ROLES), x.shape[1]))
    bias = np.zeros(m + len(ROLES))
    weights[:m] = scale * w_models
    bias[:m] = scale * (b_models - b_models.mean())
    bias[m + ROLES.index(Role.VERIFIER)] = margin
    return np.concatenate([np.zeros(base.svf_offsets.size), weights.ravel(), bias])



def ridge_loo(xc: np.ndarray, yc: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Ridge coefficients (D, M) of centred data and the leave-one-out predictions (n, M) of
    the centred targets (hat-matrix shortcut; in the dual, so D may exceed n)."""
    gram = xc @ xc.T
    inv = np.linalg.inv(gram + lam * np.eye(len(xc)))
    alpha = inv @ yc
    hat = gram @ inv
    fitted = hat @ yc
    leverage = np.clip(np.diag(hat), 0.0, 1.0 - 1e-9)[:, None]
    loo = yc - (yc - fitted) / (1.0 - leverage)
    return xc.T @ alpha, loo
