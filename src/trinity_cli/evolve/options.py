"""The options of an evolve run: `EvolveOptions` and their validation, the options of a
resumed run (`resume_options`), the configuration hash that finds a run to resume, and
finding that run (`find_run`, `open_run`, `refuse_mismatch`).

Resume: `--resume RUN` takes every option from the run; options given again must agree
with it (a conflict is refused, naming the flags), except `--budget` (raise it to continue
a finished run's budget, lower it to stop sooner) and `--device`, `--name`, `--out`
(`--parallel` is not an option of the run: any value goes).

The configuration hash covers every option but those (`RESUME_FREE`), the pool file's bytes,
the run's manifest (pool models, backbone fingerprint, head size, SVF layout) and the prompt
and coordinator versions: re-running the same command finds the run by it (evolve/evolution.py).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from trinity_cli import tasks
from trinity_cli.coordinator.backbone_refs import DEFAULT_BACKBONE
from trinity_cli.coordinator.head import DECISIONS
from trinity_cli.coordinator.policy import COORDINATOR_VERSION
from trinity_cli.errors import ConfigError, option
from trinity_cli.events import ProgressFn, RunResumed
from trinity_cli.keyed_cache import content_key
from trinity_cli.runs.run_files import EvolveRun
from trinity_cli.runs.store import RunStore
from trinity_cli.turns import prompts

# Layout of a run directory (evolve.json, checkpoint.pkl: evolve/evolution.py); runs of another format
# are not resumed. /3: the head has a bias and a centred input (its vector is longer).
RUN_FORMAT = "trinity-evolve/3"
# Options a resume may change: they do not change which episodes are played.
RESUME_FREE = ("budget", "device", "name", "out")
# Options added after runs were made: at their default (or empty) they are left out of the
# configuration hash, so those runs are still found by it.
LATER_OPTIONS = ("input_dims", "init_labels", "decisions", "init_rotate")


@dataclass
class EvolveOptions:
    pool: str | None = None
    tasks: str = "gsm8k:train,arc-challenge:train,mbpp:train"
    val_tasks: str | None = None
    val_size: int = 16
    budget: int = 2000
    minibatch: int = 8
    popsize: int | None = None
    sigma0: float = 1.0
    seed: int = 0
    max_turns: int = 3
    val_every: int = 2
    cost_weight: float = 0.0
    cost_unit: str = "tokens"
    svf: bool = False
    svf_targets: list[str] | None = None
    center_items: int = 256
    input_dims: int = 0
    # How candidates take their decisions in training and validation episodes: "sampled" from
    # the head's probabilities, or "greedy" (the most likely model and role, as ask, serve and
    # bench play a trained head by default).
    decisions: str = "sampled"
    init_labels: str | None = None
    # With init_labels: the start rotates the members as `agree` does (evolve/rotation_fit.py).
    init_rotate: bool = False
    backbone: str = DEFAULT_BACKBONE
    device: str = "auto"
    name: str | None = None
    out: str | None = None

    def validate(self) -> None:
        if self.init_rotate and not self.init_labels:
            raise ConfigError(f"{option('init_rotate')} fits a start from the sample matrix's first picks",
                              f"give {option('init_labels')} FILE too")
        # Budget 0 with a fitted start: the validated start itself is the head (no generation).
        if (self.budget < (0 if self.init_labels else 1) or self.minibatch < 1 or self.max_turns < 1
                or self.val_every < 1):
            raise ConfigError(f"{option('budget')}, {option('minibatch')}, {option('max_turns')} and "
                              f"{option('val_every')} must be at least 1 ({option('budget')} may be 0 with "
                              f"{option('init_labels')}: the validated start is the head)")
        if self.decisions not in DECISIONS:
            raise ConfigError(f"{option('decisions')}: unknown mode {self.decisions!r}", "use sampled or greedy")
        if self.cost_unit not in ("tokens", "usd"):
            raise ConfigError(f"unknown cost unit {self.cost_unit!r}", "use tokens or usd")
        if self.svf and self.backbone.startswith("hash:"):
            raise ConfigError(f"{option('svf')} needs a neural backbone",
                              f"drop {option('svf')}, or use {option('backbone')} smollm2-135m")
        if self.sigma0 <= 0:
            raise ConfigError(f"{option('sigma0')} must be positive")
        if self.center_items < 0:
            raise ConfigError(f"{option('center_items')} must be 0 or more, got {self.center_items}",
                              "use 0 to read the backbone's features uncentred")
        if self.input_dims < 0:
            raise ConfigError(f"{option('input_dims')} must be 0 or more, got {self.input_dims}",
                              "use 0 for a head over every hidden dimension")
        if self.input_dims > self.center_items:
            raise ConfigError(f"{option('input_dims')} {self.input_dims} needs at least as many "
                              f"{option('center_items')} (got {self.center_items}): the projection is fitted "
                              "on their features",
                              f"use {option('center_items')} {max(256, self.input_dims)}, "
                              f"or a smaller {option('input_dims')}")

    def val_mix(self) -> str:
        if self.val_tasks:
            return self.val_tasks
        names = list(dict.fromkeys(spec[0] for spec in tasks.parse_mix(self.tasks)))
        per = max(1, self.val_size // max(1, len(names)))
        # Small tasks (a short user file) may hold fewer validation items than `per`.
        return ",".join(f"{n}:val:{min(per, len(tasks.load_split(n, 'val')))}" for n in names)


def resume_options(run: str, saved: dict[str, Any], options: EvolveOptions,
                   given: Collection[str] | None = None) -> EvolveOptions:
    """The options of a resumed run: the saved ones, with `RESUME_FREE` options taken from
    `options` where given. `given` names the options the user set (None: those that differ
    from their defaults); any other given option that differs from the run's is refused."""
    defaults = EvolveOptions()
    names = [f.name for f in fields(EvolveOptions)]
    if given is None:
        given = [n for n in names if getattr(options, n) != getattr(defaults, n)]
    merged = EvolveOptions(**{k: v for k, v in saved.items() if k in names})
    conflicts = []
    for key in names:
        if key not in given:
            continue
        value = getattr(options, key)
        if key in RESUME_FREE:
            if value is not None:
                setattr(merged, key, value)
        elif value != getattr(merged, key):
            conflicts.append(f"{option(key)} {value!r} (the run has {getattr(merged, key)!r})")
    if conflicts:
        raise ConfigError(
            f"cannot resume {run} with other options: " + "; ".join(conflicts),
            "drop these options: a resume takes every option from its run (only "
            + ", ".join(option(k) for k in RESUME_FREE) + " may change)",
        )
    return merged


def config_hash(options: EvolveOptions, pool_source: str, manifest: dict[str, Any]) -> str:
    """The run's configuration hash (see the module docstring); `pool_source` is the pool file."""
    opts = asdict(options)
    for key in RESUME_FREE:  # these may change on resume
        opts.pop(key)
    defaults = asdict(EvolveOptions())
    for key in LATER_OPTIONS:  # left at their default, runs from before them keep their hash
        if not opts[key] or opts[key] == defaults[key]:
            opts.pop(key)
    pool_text = Path(pool_source).read_bytes() if pool_source else b""
    payload = {
        "options": opts,
        "pool_sha": hashlib.sha256(pool_text).hexdigest(),
        "manifest": manifest,
        "prompt_version": prompts.PROMPT_VERSION,
        "coordinator_version": COORDINATOR_VERSION,
    }
    return content_key("", payload)[:16]


def find_run(store: RunStore, ref: str) -> tuple[Path, dict[str, Any]]:
    """(directory, evolve.json) of the run named by --resume; one of another format is refused."""
    run = store.evolve_run(ref)
    meta = run.meta()
    assert meta is not None  # evolve_run checks that evolve.json exists
    if meta.get("format") != RUN_FORMAT:
        raise ConfigError(
            f"cannot resume {run.path.name}: it was written by an older trinity (run format "
            f"{meta.get('format', 'trinity-evolve/1')!r}, this one reads {RUN_FORMAT!r})",
            f"start a new run (the same command without {option('resume')})",
        )
    return run.path, meta


def open_run(store: RunStore, options: EvolveOptions, manifest: dict[str, Any], config_hash: str,
             progress: ProgressFn) -> Path:
    """The oldest unfinished run with this config hash (run-2 before run-10; reported as a
    `RunResumed` progress event), else a new run whose evolve.json records these options."""
    for run in store.evolve_runs():
        if run.finished:
            continue
        meta = run.meta() or {}
        if meta.get("config_hash") == config_hash and meta.get("format") == RUN_FORMAT:
            progress(RunResumed(run=run.name))
            return run.path
    run = EvolveRun(store.allocate())
    # "created" dates an unfinished run wherever it travels (runs/store.started)
    run.write_meta({"format": RUN_FORMAT, "options": asdict(options), "manifest": manifest,
                    "config_hash": config_hash, "created": time.time()})
    return run.path


def refuse_mismatch(meta: dict[str, Any], manifest: dict[str, Any]) -> None:
    """Refuse to resume a run (its evolve.json `meta`) made for another pool, backbone, head
    size, SVF layout, prompt or coordinator version than `manifest`."""
    old = meta["manifest"]
    for key, what in (("models", "pool models"), ("backbone_fingerprint", "backbone"),
                      ("n_params", "head size"), ("svf", "SVF layout"), ("prompt_version", "prompt version"),
                      ("coordinator_version", "coordinator version")):
        if old.get(key) != manifest.get(key):
            raise ConfigError(
                f"cannot resume: the run was made with {what} {old.get(key)!r}, now {manifest.get(key)!r}",
                f"resume with the same {option('pool')}/{option('backbone')}/{option('svf')}, or start a new run",
            )
