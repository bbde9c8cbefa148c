"""The coordinator's trainable parameters and the head file format (numpy only, no torch).

Head: a linear map with bias over a centred feature: for a backbone feature vector h
(unit L2 norm, coordinator/policy.py), x = (h - c) / s, optionally projected as x <- P @ x,
and `W @ x + b` gives M model logits followed by 3 role logits; each group gets its own
softmax. `W` has shape (M + 3, D): M pool models in slot order, then the roles thinker,
worker, verifier; D the head's input size: H, the backbone's hidden size, or K with a
projection P (K, H); `b` has M + 3 values. Excluded models are masked out of the model softmax.
The centre c (H values) and scale s are fixed when a run starts (evolve/evolution.py: the mean of
the turn-0 features of some training tasks, and their RMS distance from it) and are not
searched: every feature of one backbone shares most of its direction, so without centring
any change to W mostly shifts every state's logits alike, and the search finds a fixed mix
of models and roles rather than choices that depend on the conversation. c = 0, s = 1
(untrained heads, and heads of format /1) reads h as is.
The projection P (optional, fixed like c; `fit_basis`) keeps the K principal directions of
those centred turn-0 features, scaled together so that the projected features keep a total
variance of 1: the search then has (M + 3) x K weights instead of (M + 3) x H, all of them
along the directions in which the tasks differ most.

Flat parameter vector (what sep-CMA-ES searches over), in this order:
    [ svf offsets of target 0 (r_0 values) | ... | svf offsets of target T-1 (r_{T-1}) |
      W row-major: row 0 (model slot 0) ... row M-1, row M (thinker), M+1 (worker), M+2 (verifier) |
      b: the same M + 3 rows ]
`r_t` is the number of singular values of target matrix t (min of its two dimensions).
Without SVF the vector is W.ravel() then b. W has D columns (above).

Head directory (`heads/NAME/`):
    manifest.json   {"format": "trinity-head/3", "name", "made": "untrained" | "fitted" |
                     "evolved", "trained": bool (generations of the search were played: "made"
                     is "evolved"; heads written before "made" existed say "trained": true for
                     any head with weights, and read as "evolved"), "backbone":
                     {"ref", "fingerprint", "hidden_size"}, "pool": {"name", "models": [...]},
                     "roles": ["thinker", "worker", "verifier"], "svf": {"targets": [...],
                     "sizes": [...], "scale": "exp"} | null, "prompt_version",
                     "coordinator_version", "input": {"center_items": N, "dims": K} (how c and P
                     were made; N 0 or absent: not centred; K 0 or absent: no projection),
                     "training": {... "max_turns": the turn budget it was
                     evolved with ...} (evolved heads only)}
    `ask`, `serve` and `bench` play a head with its training max_turns unless told otherwise
    (`turn_budget`).
    A trained head is used only under the prompt and coordinator versions it records
    (`Head.check`); an SVF head only with the exp(o) scaling (coordinator/svf.py).
    weights.npz     "head": float32 (M+3, D); "svf": float32 (sum of sizes,) (empty without SVF);
                    "bias": float32 (M+3,); "center": float32 (H,); "center_scale": float32 ();
                    "basis": float32 (K, H), P (empty: no projection, D = H)
    Formats trinity-head/1 (no bias, centre or scale: b = 0, c = 0, s = 1) and /2 (no
    projection) still load.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from trinity_cli import paths
from trinity_cli.errors import ConfigError, HeadMismatch, NotFound, did_you_mean, option
from trinity_cli.messages import ROLES

HEAD_FORMAT = "trinity-head/3"
# Formats a head file may have: /1 heads are /2 heads with b = 0, c = 0, s = 1; /2 heads
# are /3 heads without a projection.
READABLE_FORMATS = ("trinity-head/1", "trinity-head/2", HEAD_FORMAT)
# How SVF offsets scale singular values (coordinator/svf.py); heads with another are refused.
SVF_SCALE = "exp"
_VERSION_NAMES = {"prompt_version": "prompt version", "coordinator_version": "coordinator version"}


@dataclass
class Head:
    weights: np.ndarray  # (M + 3, D)
    manifest: dict[str, Any]
    svf_offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    # Bias (M + 3,) and centre (H,; fixed, not searched): empty (not given) means zeros.
    bias: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    center: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    center_scale: float = 1.0
    # Projection P (K, H; fixed, not searched): empty means none (D = H).
    basis: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))

    def __post_init__(self) -> None:
        projected = self.basis.size > 0
        hidden = self.basis.shape[1] if projected else self.weights.shape[1]
        if self.bias.size == 0:
            self.bias = np.zeros(self.weights.shape[0], dtype=np.float32)
        if self.center.size == 0:
            self.center = np.zeros(hidden, dtype=np.float32)
        if (self.bias.shape != (self.weights.shape[0],) or self.center.shape != (hidden,)
                or (projected and self.basis.shape[0] != self.weights.shape[1])):
            raise ConfigError("head bias, centre or projection does not match its weights", "re-create the head")
        if not self.center_scale > 0:
            raise ConfigError(f"head centre scale must be positive, got {self.center_scale}", "re-create the head")

    @property
    def models(self) -> list[str]:
        return list(self.manifest["pool"]["models"])

    @property
    def hidden_size(self) -> int:
        """The backbone's hidden size H the head reads (not D, its weights' columns)."""
        return int(self.center.shape[0])

    @property
    def made(self) -> str:
        """How its weights came to be: "untrained" (all zero), "fitted" (a start fitted to
        labels or to a rotation, no generation of the search kept) or "evolved"."""
        made = self.manifest.get("made")
        if made in ("untrained", "fitted", "evolved"):
            return str(made)
        return "evolved" if self.manifest.get("trained") else "untrained"

    @property
    def learned(self) -> bool:
        """Whether its weights read the conversation (fitted or evolved), not uniform."""
        return self.made != "untrained"

    @property
    def uniform(self) -> bool:
        """Whether every choice is uniform at random (an untrained head)."""
        return not self.learned

    policy = "head"  # what it is, as a run record and `/v1/models` say it (a reader says "reader")

    def describe(self) -> str:
        """Who plays, in a few words (ask's first line, serve's `/v1/models`): its name and how
        it was made."""
        if self.uniform:
            return "untrained head (uniform random routing)"
        return f"head {self.manifest.get('name')} ({self.made}: reads the conversation's hidden state)"

    @property
    def svf_sizes(self) -> list[int]:
        svf = self.manifest.get("svf") or {}
        return list(svf.get("sizes", []))

    @property
    def trained_max_turns(self) -> int | None:
        """The turn budget the head was evolved with (manifest "training" -> "max_turns"),
        None when its manifest records none (untrained heads, hand-made ones)."""
        value = (self.manifest.get("training") or {}).get("max_turns")
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None

    @property
    def is_zero(self) -> bool:
        """All-zero head and no SVF change: every decision is uniform, whatever the input."""
        return not self.weights.any() and not self.bias.any() and not self.svf_offsets.any()

    def with_input(self, center: np.ndarray, scale: float, items: int, basis: np.ndarray | None = None) -> Head:
        """This head reading features centred on `center`, divided by `scale` and, given
        `basis` (K, H; K = its weights' columns), projected (made from the turn-0 features
        of `items` training tasks); parameters unchanged."""
        basis = np.zeros((0, 0), dtype=np.float32) if basis is None else np.asarray(basis, dtype=np.float32).copy()
        return Head(weights=self.weights,
                    manifest={**self.manifest, "input": {"center_items": items, "dims": int(basis.shape[0])}},
                    svf_offsets=self.svf_offsets, bias=self.bias,
                    center=np.asarray(center, dtype=np.float32).copy(), center_scale=float(scale), basis=basis)

    def inputs(self, features: np.ndarray) -> np.ndarray:
        """x, what W multiplies (D values), for a unit-norm feature vector (H values): the
        feature centred, scaled and, with a projection, projected (module docstring)."""
        x = (features.astype(np.float64) - self.center.astype(np.float64)) / self.center_scale
        if self.basis.size:
            x = self.basis.astype(np.float64) @ x
        return x

    def logits(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(model logits, role logits) of a unit-norm feature vector (module docstring)."""
        out = self.weights.astype(np.float64) @ self.inputs(features) + self.bias.astype(np.float64)
        m = len(self.models)
        return out[:m], out[m:]

    # -- flat vector ------------------------------------------------------------------
    @property
    def n_params(self) -> int:
        return int(self.svf_offsets.size + self.weights.size + self.weights.shape[0])

    def flat(self) -> np.ndarray:
        return np.concatenate([self.svf_offsets.ravel(), self.weights.ravel(), self.bias]).astype(np.float64)

    def with_flat(self, vector: np.ndarray) -> Head:
        vector = np.asarray(vector, dtype=np.float32)
        if vector.size != self.n_params:
            raise ConfigError(f"parameter vector has {vector.size} values, the head needs {self.n_params}")
        n_svf, n_w = self.svf_offsets.size, self.weights.size
        return Head(
            weights=vector[n_svf:n_svf + n_w].reshape(self.weights.shape).copy(),
            manifest=dict(self.manifest),
            svf_offsets=vector[:n_svf].copy(),
            bias=vector[n_svf + n_w:].copy(),
            center=self.center,
            center_scale=self.center_scale,
            basis=self.basis,
        )

    # -- compatibility ----------------------------------------------------------------
    def stale_versions(self, versions: Mapping[str, str]) -> str | None:
        """Why a trained head does not fit `versions` (manifest key -> the version this code
        runs), or None when it does. Untrained heads fit any: their choices read no text."""
        if not self.learned:
            return None
        name = self.manifest.get("name", "?")
        for key, current in versions.items():
            recorded = self.manifest.get(key)
            if recorded != current:
                what = _VERSION_NAMES.get(key, key)
                return (f"head {name!r} was evolved under {what} {recorded!r}, this trinity runs {current!r}, "
                        "so its choices were learned on other coordinator inputs or prompts")
        return None

    def check(
        self,
        pool_name: str,
        pool_models: list[str],
        backbone_fingerprint: str | None = None,
        versions: Mapping[str, str] | None = None,
    ) -> None:
        """Refuse a head trained for another pool (slot order matters) or backbone, or (given
        `versions`, see `stale_versions`) evolved under other prompt or coordinator versions."""
        name = self.manifest.get("name", "?")
        if pool_models != self.models:
            raise HeadMismatch(
                f"head {name!r} was made for models {self.models} (pool "
                f"{self.manifest['pool'].get('name')!r}), this pool {pool_name!r} has {pool_models}",
                f"use a head evolved on this pool (trinity evolve), or {option('head')} untrained",
            )
        want = self.manifest["backbone"].get("fingerprint")
        if backbone_fingerprint and want and want != backbone_fingerprint:
            raise HeadMismatch(
                f"head {name!r} was trained on backbone {self.manifest['backbone'].get('ref')!r} "
                f"({want[:12]}…), the loaded backbone differs ({backbone_fingerprint[:12]}…)",
                "load the head with the backbone it names",
            )
        stale = self.stale_versions(versions or {})
        if stale:
            raise HeadMismatch(stale, "evolve the head again under this version (trinity evolve), "
                                      f"or {option('head')} untrained")

    # -- files ------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        buffer = io.BytesIO()
        np.savez(buffer, head=self.weights.astype(np.float32), svf=self.svf_offsets.astype(np.float32),
                 bias=self.bias.astype(np.float32), center=self.center.astype(np.float32),
                 center_scale=np.float32(self.center_scale), basis=self.basis.astype(np.float32))
        paths.atomic_write_bytes(directory / "weights.npz", buffer.getvalue())
        paths.atomic_write_json(directory / "manifest.json", {**self.manifest, "format": HEAD_FORMAT})

    @classmethod
    def load(cls, directory: Path) -> Head:
        try:
            manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
            with np.load(directory / "weights.npz") as data:
                weights, svf = data["head"], data["svf"]
                # trinity-head/1 files have none of these (b = 0, c = 0, s = 1).
                bias = data["bias"] if "bias" in data else np.zeros(0, dtype=np.float32)
                center = data["center"] if "center" in data else np.zeros(0, dtype=np.float32)
                scale = float(data["center_scale"]) if "center_scale" in data else 1.0
                basis = data["basis"] if "basis" in data else np.zeros((0, 0), dtype=np.float32)  # /1, /2
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"head {directory} is unreadable ({exc})", "re-create it with trinity evolve") from None
        if manifest.get("format") not in READABLE_FORMATS:
            raise ConfigError(f"head {directory}: unknown format {manifest.get('format')!r}, expected {HEAD_FORMAT}")
        m = len(manifest["pool"]["models"])
        svf_sizes = (manifest.get("svf") or {}).get("sizes", [])
        mismatch = ConfigError(f"head {directory}: weights do not match its manifest", "re-create it")
        if (weights.ndim != 2 or weights.shape[0] != m + len(ROLES) or svf.size != sum(svf_sizes)
                or (basis.size and basis.ndim != 2)):
            raise mismatch
        if manifest.get("svf") and manifest["svf"].get("scale") != SVF_SCALE:
            raise ConfigError(
                f"head {directory}: its SVF offsets scale singular values by 1 + o, this trinity by exp(o)",
                f"evolve it again (trinity evolve {option('svf')})",
            )
        try:  # bias, centre, scale and projection against the weights: Head's own checks
            return cls(weights=weights, manifest=manifest, svf_offsets=svf, bias=bias, center=center,
                       center_scale=scale, basis=basis)
        except ConfigError:
            raise mismatch from None


def fit_center(features: np.ndarray) -> tuple[np.ndarray, float]:
    """(centre, scale) of a head's input from rows of unit-norm features: their mean, and
    their RMS distance from it (1.0 when they do not spread: one row, or identical rows),
    so that the centred rows have mean 0 and RMS norm 1."""
    x = np.asarray(features, dtype=np.float64)
    center = x.mean(axis=0)
    scale = float(np.sqrt(np.mean(np.sum((x - center) ** 2, axis=1))))
    return center.astype(np.float32), (scale if scale > 1e-6 else 1.0)


def fit_basis(features: np.ndarray, center: np.ndarray, scale: float, dims: int) -> np.ndarray:
    """A head's projection P (dims, H) from rows of unit-norm features and their (centre,
    scale) (`fit_center`): the top `dims` right singular vectors of the centred rows, all
    divided by one factor so that the projected rows have mean squared norm 1 (as centred
    rows without a projection have). Each vector's sign makes its largest entry positive
    (the SVD leaves it to the linear algebra library)."""
    x = (np.asarray(features, dtype=np.float64) - center.astype(np.float64)) / scale
    _, singular, vt = np.linalg.svd(x, full_matrices=False)
    spread = singular[:dims] / np.sqrt(len(x))
    if dims > len(spread) or spread[-1] < 1e-6:
        found = int(np.sum(spread > 1e-6))
        raise ConfigError(f"the {len(x)} centring tasks' features span {found} directions, fewer than "
                          f"{option('input_dims')} {dims}",
                          f"lower {option('input_dims')}, or raise {option('center_items')}")
    vectors = vt[:dims]
    signs = np.sign(vectors[np.arange(dims), np.abs(vectors).argmax(axis=1)])
    # One common scale, not one per direction: whitening would blow up the weak directions,
    # along which later-turn states (never among the fitted ones) can still move a lot.
    return (vectors * (signs / np.sqrt(np.sum(spread**2)))[:, None]).astype(np.float32)


DEFAULT_MAX_TURNS = 5  # for heads that record no training max_turns, and runs without a head

# How a trained head's decisions are taken at inference (ask, serve, and bench's head rows)
# unless told: "greedy" (its argmax) or "sampled" (drawn from its softmax with the episode
# seed). Greedy: no less accurate than sampled for the shipped head, with fewer tokens
# (docs/history/head-campaign.md, "Greedy or sampled decisions"). An untrained head is always
# sampled by default: its argmax is one fixed pick.
DEFAULT_DECISIONS = "greedy"
DECISIONS = ("sampled", "greedy")


class Routes(Protocol):
    """What a turn budget and a decision mode are read from, and what a run says played: a
    head or a reader (`policy`, `made`, `describe`)."""

    policy: str

    @property
    def made(self) -> str: ...

    @property
    def learned(self) -> bool: ...

    @property
    def uniform(self) -> bool: ...

    @property
    def trained_max_turns(self) -> int | None: ...

    def describe(self) -> str: ...


def default_greedy(head: Routes) -> bool:
    """Whether `head` takes greedy decisions when nobody said (DEFAULT_DECISIONS; an
    untrained head is sampled)."""
    return head.learned and DEFAULT_DECISIONS == "greedy"


def turn_budget(max_turns: int | None, head: Routes | None) -> int:
    """The turn budget of an episode: `max_turns` when given, else the head's training
    max_turns, else DEFAULT_MAX_TURNS."""
    if max_turns is not None:
        return max_turns
    return (head.trained_max_turns if head is not None else None) or DEFAULT_MAX_TURNS


def untrained(pool_name: str, models: list[str], backbone: dict[str, Any], hidden_size: int, dims: int = 0) -> Head:
    """The honest default: all-zero weights, so every choice is uniform. `dims` > 0: the
    weights have that many columns and the projection is all zeros until `with_input`
    sets it (evolve/evolution.py sizes its search before it has the features to fit one)."""
    manifest = {
        "name": "untrained",
        "trained": False,
        "backbone": backbone,
        "pool": {"name": pool_name, "models": list(models)},
        "roles": [r.value for r in ROLES],
        "svf": None,
    }
    columns = dims or hidden_size
    basis = np.zeros((dims, hidden_size) if dims else (0, 0), dtype=np.float32)
    return Head(weights=np.zeros((len(models) + len(ROLES), columns), dtype=np.float32), manifest=manifest,
                basis=basis)


def available_heads() -> dict[str, Path]:
    """Head names -> directories: bundled ones, then the user's (which win on a clash)."""
    found: dict[str, Path] = {}
    for folder in (paths.bundled_heads_dir(), paths.user_heads_dir()):
        if folder.is_dir():
            for sub in sorted(folder.iterdir()):
                if (sub / "manifest.json").is_file():
                    found[sub.name] = sub
    return found


def find_head(ref: str) -> Path:
    path = Path(ref).expanduser()
    if (path / "manifest.json").is_file():
        return path
    heads = available_heads()
    if ref in heads:
        return heads[ref]
    raise NotFound(f"unknown head {ref!r}", did_you_mean(ref, [*heads, "untrained"]))
