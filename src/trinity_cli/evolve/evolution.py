"""Train a coordinator head (and optional SVF offsets) with separable CMA-ES: the loop, its
run directory and checkpoints, and resume. Its options, and finding the run to resume:
evolve/options.py; the strategy itself, fitness and curves: evolve/strategy.py.

Before generation 0, a fresh run fixes the head's input centre (coordinator/head.py): the
mean of the unit-norm turn-0 features of `center_items` training tasks (evolve/input_fit.py: which
ones, drawn by seed; no model is called for them), and their RMS distance from it as the
scale. With `input_dims` K > 0 the same features also fix the head's projection onto their
K principal directions (head.fit_basis), and the search has (M + 3) x K head weights instead
of (M + 3) x H. Both are kept in the checkpoint, so a resumed run reads features exactly as
before, and in the head it writes. `center_items` 0: no centre (and no projection).

The search starts at zero (every decision uniform), or with `init_labels` (a sample matrix
file, evolve/label_fit.py) at a head fitted to which members solved which training items; that
start is scored on the validation slice before generation 0 and is the head kept unless a
later mean validates better (its "generation" is -1). With `init_rotate` that start's member rows
are then refitted so it asks its first pick and then the other members in pool order, as
`agree` does (evolve/rotation_fit.py: rotation episodes on the labelled training items, seeds
from stream ROTATION_STREAM).

Loop, per generation g:
  1. `es.ask()` -> popsize candidate vectors (flat layout: coordinator/head.py).
  2. One minibatch of `minibatch` training items, drawn with rng([seed, g]), shared by
     every candidate; episode j of any candidate runs with seed SeedSequence([seed, g, j]).
     `decisions` "sampled" draws each turn's model and role from the candidate's
     probabilities with that seed; "greedy" takes the most likely ones, so an episode is a
     function of the candidate's decisions (pool calls do not depend on the seed).
  3. fitness(candidate) = mean binary reward - cost_weight * mean cost per episode,
     where cost is thousands of tokens (`cost_unit: tokens`) or USD (`usd`).
  4. `es.tell(candidates, -fitness)`; every `val_every` generations (and at the end) the
     distribution mean is scored on a fixed validation slice; the best mean by validation
     score is the head that is kept.
`budget` counts training episodes; a budget smaller than one generation (popsize x
minibatch episodes) is refused before anything runs, and the run stops cleanly before a
generation that would exceed it. Validation episodes are counted apart.

Episodes are played by an evaluator (evaluators/): this module only lists them (every candidate
on every minibatch item, or the mean on the validation slice) and reads the outcomes back in
that order. `parallel` plays that many at once, `ray` plays them on Ray actors; neither is part
of the configuration hash, and seeds, candidates, cache keys, fitness and head are the same.

Its run directory and curves: docs/files.md#evolve-runs. Resume (`--resume RUN`, or the same
command again: the oldest unfinished run with the same config hash; evolve/options.py) restores
the checkpoint, so the interrupted generation asks the same candidates again and every finished
episode replays from the rollout cache: the same final head as an uninterrupted run.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli import events, paths, tasks
from trinity_cli.answer_kinds import check_scoring
from trinity_cli.coordinator import head as head_mod
from trinity_cli.coordinator.backbone_refs import describe, hidden_size_of
from trinity_cli.coordinator.policy import COORDINATOR_VERSION, Coordinator
from trinity_cli.errors import ConfigError, option
from trinity_cli.evaluators.choose import open_evaluator
from trinity_cli.evaluators.local import EpisodeOutcome, EpisodeSpec, Runtime
from trinity_cli.evaluators.ray_actors import RayEvaluator
from trinity_cli.evaluators.ray_cluster import RayOptions, check_ray
from trinity_cli.events import EpisodeEvent, ProgressFn
from trinity_cli.evolve import strategy
from trinity_cli.evolve.input_fit import center_tasks, fit_input
from trinity_cli.evolve.label_fit import fit_start, read_labels
from trinity_cli.evolve.options import EvolveOptions, config_hash, find_run, open_run, refuse_mismatch, resume_options
from trinity_cli.evolve.rotation_fit import first_picks, fit_rotation, rotation_states
from trinity_cli.keyed_cache import journal_to
from trinity_cli.policies.head import HeadPolicy
from trinity_cli.pool.pool import open_pool
from trinity_cli.pool_config import load_pool
from trinity_cli.runs import charts, reports
from trinity_cli.runs.run_files import EvolveRun
from trinity_cli.runs.store import JOURNAL, RunStore
from trinity_cli.turns import prompts

# Seed streams: validation episodes, and the rotation episodes an `init_rotate` start is fitted
# to (training generations use their own index; input_fit.py's is 2**31 - 2).
VAL_STREAM, ROTATION_STREAM = 2**31 - 1, 2**31 - 3


@dataclass
class EvolveResult:
    run_id: str
    head_dir: Path
    best_val: float | None
    generations: int
    spent: int
    curves: list[dict[str, Any]] = field(default_factory=list)
    # The fitted start (`init_labels`) as a head, "made": "fitted"; None for a zero start or a
    # run whose checkpoint predates it.
    start_head: head_mod.Head | None = None


def _episode_seed(seed: int, generation: int, j: int) -> int:
    return int(np.random.SeedSequence([seed, generation, j]).generate_state(1)[0])


class Evolution:
    """One evolve run: set up (fresh or resumed), then `run()`."""

    def __init__(self, options: EvolveOptions, resume: str | None = None, progress: ProgressFn | None = None,
                 given: Collection[str] | None = None, parallel: int | None = None, ray: RayOptions | None = None):
        """`given`: the options the user set explicitly (see `resume_options`); only read on resume.
        `parallel`: episodes played at once (None: the pool file's `parallel`); `ray`: play them
        on Ray actors instead (evaluators/ray_actors.py). Neither is an option of the run, so a resume
        may change them."""
        check_ray(ray, parallel)
        self.progress = progress or events.quiet
        self.store = RunStore()
        resumed: tuple[Path, dict[str, Any]] | None = None
        if resume:
            resumed = find_run(self.store, resume)
            options = resume_options(resumed[0].name, resumed[1]["options"], options, given)
        options.validate()
        self.options = options
        self._plan()
        self._make_head()
        self._refuse_small_budget()
        self.parallel = parallel or (1 if ray else self.config.parallel)
        if self.parallel < 1:
            raise ConfigError(f"{option('parallel')} must be at least 1, got {self.parallel}")
        self.manifest = {
            "pool": self.config.name,
            "models": self.config.names,
            "backbone_fingerprint": self.manifest_backbone["fingerprint"],
            "n_params": self.n_params,
            "svf": self.base.manifest.get("svf"),
            "prompt_version": prompts.PROMPT_VERSION,
            "coordinator_version": COORDINATOR_VERSION,
        }
        self.config_hash = self._config_hash()
        if resumed is not None:
            refuse_mismatch(resumed[1], self.manifest)
        self._open_runtime(ray)
        try:
            self.run_dir = (resumed[0] if resumed is not None
                            else open_run(self.store, self.options, self.manifest, self.config_hash, self.progress))
        except BaseException:
            self.close()
            raise
        self.files = EvolveRun(self.run_dir)
        # The generation being played, while it is; None between them.
        self._tally: strategy.GenerationTally | None = None

    def _plan(self) -> None:
        """The pool file and the run's items, checked; nothing is loaded or written."""
        options = self.options
        self.config = load_pool(options.pool)
        self.train_mix = tasks.parse_mix(options.tasks)
        for task, split, *_ in self.train_mix:
            if split != "train":
                raise ConfigError(f"{option('tasks')} {task}:{split}: evolve trains on train splits only",
                                  f"use {task}:train (validation uses the val split automatically)")
        self.val_items = tasks.sample_items(tasks.parse_mix(options.val_mix()), seed=0)
        self.train_items = tasks.sample_items(self.train_mix, seed=options.seed)
        if not self.train_items:
            raise ConfigError(f"{option('tasks')} {options.tasks!r} selects no items")
        if options.input_dims > len(self.train_items):
            raise ConfigError(f"{option('input_dims')} {options.input_dims} needs as many training tasks to fit "
                              f"the projection on; {option('tasks')} {options.tasks!r} has {len(self.train_items)}",
                              f"use a smaller {option('input_dims')}, or more training tasks")
        tasks.check_code_sandbox([*self.train_items, *self.val_items], strict_sandbox=self.config.sandbox == "strict")
        check_scoring([*self.train_items, *self.val_items])

    def _make_head(self) -> None:
        """The untrained base head (its layout: coordinator/head.py) and the coordinator that
        reads it, with SVF targets when `svf`."""
        options = self.options
        fingerprint, _ = describe(options.backbone)
        hidden = hidden_size_of(options.backbone)
        self.manifest_backbone = {"ref": options.backbone, "fingerprint": fingerprint, "hidden_size": hidden}
        base = head_mod.untrained(self.config.name, self.config.names, self.manifest_backbone, hidden,
                                  dims=options.input_dims)
        targets = None
        if options.svf:
            from trinity_cli.coordinator.svf import DEFAULT_TARGETS

            targets = list(options.svf_targets or DEFAULT_TARGETS)
        self.coordinator = Coordinator(base, backbone_ref=options.backbone, device=options.device,
                                       svf_targets=targets)
        if targets:
            svf = self.coordinator.svf
            base.manifest["svf"] = svf.manifest()
            base.svf_offsets = np.zeros(svf.n_params, dtype=np.float32)
        self.base = base
        self.n_params = base.n_params

    def _open_runtime(self, ray: RayOptions | None) -> None:
        """The pool (checked for its files) and the evaluator that plays the episodes."""
        self.pool = open_pool(self.config)
        self.pool.check_assets()
        runtime = Runtime(self.pool, device=self.options.device)
        runtime.adopt(self.coordinator)
        self.evaluator, self.parallel = open_evaluator(runtime, self.parallel, ray)
        self.ray = ray if isinstance(self.evaluator, RayEvaluator) else None  # local Ray may play here

    @property
    def popsize(self) -> int:
        return self.options.popsize or strategy.default_popsize(self.n_params)

    @property
    def per_generation(self) -> int:
        """Training episodes one generation plays: every candidate on one minibatch."""
        return self.popsize * min(self.options.minibatch, len(self.train_items))

    def _refuse_small_budget(self) -> None:
        # A budget below one generation would end before any generation and write an
        # untrained (all-zero) head marked as trained.
        o, per_gen = self.options, self.per_generation
        if o.budget < per_gen and not (o.budget == 0 and o.init_labels):
            batch = min(o.minibatch, len(self.train_items))
            raise ConfigError(
                f"{option('budget')} {o.budget} is smaller than one generation: population {self.popsize} x "
                f"minibatch {batch} = {per_gen} training episodes",
                f"use {option('budget')} {per_gen} or more, or a smaller {option('popsize')} / {option('minibatch')}",
            )

    # -- run directory and checkpoint ---------------------------------------------------
    def _config_hash(self) -> str:
        return config_hash(self.options, self.config.source, self.manifest)

    def _new_state(self) -> dict[str, Any]:
        o = self.options
        center = self._center()
        start = self._start(self._with_input(center)) if o.init_labels else np.zeros(self.n_params)
        state = strategy.new_state(start, o.sigma0, o.seed, self.popsize, self.base.svf_offsets.size, center)
        state["start"] = start.copy()  # the start, kept whatever the search finds (EvolveResult.start_head)
        return state

    def _with_input(self, center: dict[str, Any] | None) -> head_mod.Head:
        """The base head reading features through the run's input (None: uncentred)."""
        if center is None:
            return replace(self.base, manifest={**self.base.manifest, "input": {"center_items": 0, "dims": 0}})
        return self.base.with_input(center["center"], center["scale"], center["items"], center.get("basis"))

    def _start(self, base: head_mod.Head) -> np.ndarray:
        """The start fitted to the sample matrix `init_labels` (evolve/label_fit.py)."""
        assert self.options.init_labels is not None
        labels = read_labels(self.options.init_labels, self.config.names)
        picked = [item for item in self.train_items if item.key in labels]
        inputs = {item.key: base.inputs(self.coordinator.state_feature(item.prompt)) for item in picked}
        fit = fit_start(base, inputs, labels)
        self.progress(events.StartFitted(items=fit.items, ridge=fit.ridge, picked_label_loo=fit.picked_label_loo,
                                         best_fixed_label=fit.best_fixed_label, oracle_label=fit.oracle_label))
        if not self.options.init_rotate:
            return fit.vector
        return self._rotating_start(base, base.with_flat(fit.vector), picked, inputs)

    def _rotating_start(self, base: head_mod.Head, start: head_mod.Head, picked: list[tasks.TaskItem],
                        inputs: dict[str, np.ndarray]) -> np.ndarray:
        """`--init-rotate` (evolve/rotation_fit.py): play the rotation from `start`'s first pick on
        each labelled training item, then fit the member rows to the states it reached."""
        firsts = first_picks(start, inputs)
        self.progress(events.RotationPlaying(episodes=len(picked)))
        seeds = [_episode_seed(self.options.seed, ROTATION_STREAM, j) for j in range(len(picked))]
        xs, targets = rotation_states(self.evaluator, self.coordinator, base, picked, firsts, self.config.names,
                                      self.options.max_turns, seeds)
        fit = fit_rotation(base, xs, targets)
        self.progress(events.RotationFitted(episodes=len(picked), states=fit.states, ridge=fit.ridge,
                                            next_loo=fit.next_loo))
        return fit.vector

    def _center(self) -> dict[str, Any] | None:
        """The head's input centre and projection (module docstring), None with `center_items` 0."""
        picked = center_tasks(self.train_items, self.options.seed, self.options.center_items)
        if not picked:
            return None
        self.progress(events.CentreFitting(items=len(picked)))
        return fit_input(self.coordinator, picked, self.options.input_dims)

    # -- episodes ---------------------------------------------------------------------
    def _spec(self, vector: np.ndarray, item: tasks.TaskItem, seed: int) -> EpisodeSpec:
        return EpisodeSpec(item=item, seed=seed, policy=HeadPolicy(self.base.with_flat(vector), self.options.backbone),
                           max_turns=self.options.max_turns, greedy=self.options.decisions == "greedy")

    def _episode(self, spec: EpisodeSpec, outcome: EpisodeOutcome) -> dict[str, Any]:
        transcript, item = outcome.transcript, spec.item
        assert transcript is not None  # evolve's specs let a ContextOverflow propagate
        tokens = transcript.prompt_tokens + transcript.completion_tokens
        cost = tokens / 1000 if self.options.cost_unit == "tokens" else (transcript.cost_usd or 0.0)
        return {"task": item.task, "item": item.id, "seed": spec.seed, "reward": outcome.reward, "tokens": tokens,
                "cost": cost, "turns": [(t.model, t.role.value) for t in transcript.turns],
                "transcript": transcript.to_dict()}

    def _play(self, specs: list[EpisodeSpec], kind: str) -> list[dict[str, Any]]:
        """Play `specs` through the evaluator; their episode records, in spec order."""
        def progress(event: EpisodeEvent) -> None:
            if isinstance(event, events.EpisodeFinished):
                counters = self._counters()
                if self._tally is not None:  # a kill would otherwise lose this process's counts
                    self.files.write_partial(self._tally.generation, self._tally.episode_finished(counters))
                self.progress(events.EvolveEpisodeFinished(kind=kind, in_flight=event.in_flight, **counters))
            else:
                self.progress(events.EvolveEpisodeStarted(kind=kind, in_flight=event.in_flight))

        outcomes = self.evaluator.evaluate(specs, progress)
        return [self._episode(spec, out) for spec, out in zip(specs, outcomes, strict=True)]

    def _score_set(self, vector: np.ndarray, items: list[tasks.TaskItem], generation: int,
                   kind: str) -> tuple[float, list[dict[str, Any]]]:
        # The validation slice is fixed: same items, same seeds, every time.
        specs = [self._spec(vector, item, _episode_seed(self.options.seed, VAL_STREAM, j))
                 for j, item in enumerate(items)]
        episodes = self._play(specs, kind)
        return float(np.mean([e["reward"] for e in episodes])), episodes

    def _counters(self) -> dict[str, int]:
        st = self.pool.stats
        return {"pool_calls": st.calls, "cache_hits": st.cache_hits, "tokens": st.prompt_tokens + st.completion_tokens,
                "recorded": st.recorded}

    def run(self) -> EvolveResult:
        """Evolve to the budget, holding the run's lock (store.RunStore.lock): a second
        process on the same run is refused before it reads or writes anything of it."""
        try:
            with self.store.lock(self.run_dir), journal_to(self.run_dir / JOURNAL):
                return self._run()
        finally:
            self.close()

    def close(self) -> None:
        """Whatever happened: a cluster's actors, then the models and the caches."""
        self.evaluator.close()
        self.pool.close()
        self.coordinator.close()

    def _run(self) -> EvolveResult:
        o = self.options
        state = self.files.load_checkpoint()
        if state is None:
            state = self._new_state()
        self.base = self._with_input(state["input"])
        whole = max(0, o.budget - state["spent"]) // self.per_generation  # the generations the loop below plays
        self.progress(events.EvolveStarted(run=self.run_dir.name, budget=o.budget, spent=state["spent"],
                                    popsize=state["es"].popsize, n_params=self.n_params, per_gen=self.per_generation,
                                    parallel=self.parallel, ray=self.ray is not None,
                                    ends_at=state["spent"] + whole * self.per_generation))
        if o.init_labels and state["generation"] == 0 and state["best"]["val"] is None:
            self._validate_start(state)
        while state["spent"] + self.per_generation <= o.budget:
            curve = self._generation(state)
            self.progress(events.GenerationFinished(curve=curve, best_val=state["best"]["val"], budget=o.budget))
        return self._finish(state)

    def _validate_start(self, state: dict[str, Any]) -> None:
        """Score the fitted start (`init_labels`) on the validation slice before generation 0."""
        start_val, start_eps = self._score_set(state["best"]["vector"], self.val_items, -1, "val")
        state["val_spent"] += len(start_eps)
        state["best"]["val"] = start_val
        state["start_val"] = start_val  # kept when a later generation becomes the best
        self.files.save_checkpoint(state)
        self.progress(events.StartValidated(val=start_val))

    def _generation(self, state: dict[str, Any]) -> dict[str, Any]:
        """Play generation state["generation"] (module docstring, steps 1-4), write its
        episodes and the checkpoint; its curve."""
        o, es, g = self.options, state["es"], state["generation"]
        started = time.perf_counter()
        before = self._counters()
        # Earlier processes stopped during this generation: their counts go into its curve.
        earlier = self.files.partial(g)
        self._tally = strategy.GenerationTally(g, earlier, before, started)
        rng = np.random.default_rng([o.seed, g])
        idx = rng.choice(len(self.train_items), size=min(o.minibatch, len(self.train_items)), replace=False)
        batch = [self.train_items[i] for i in idx]
        candidates = es.ask()
        played = self._play([self._spec(x, item, _episode_seed(o.seed, g, j))
                             for x in candidates for j, item in enumerate(batch)], "train")
        fitness, episodes = strategy.fitness(played, len(candidates), len(batch), o.cost_weight)
        es.tell(candidates, [-f for f in fitness])
        state["spent"] += len(candidates) * len(batch)
        val = None
        if (g + 1) % o.val_every == 0 or state["spent"] + self.per_generation > o.budget:
            mean = np.asarray(es.mean, dtype=np.float64)
            val, val_eps = self._score_set(mean, self.val_items, g, "val")
            state["val_spent"] += len(val_eps)
            if state["best"]["val"] is None or val > state["best"]["val"]:
                state["best"] = {"vector": mean.copy(), "val": val, "generation": g}
        self._tally = None
        curve = strategy.curve(state, g, fitness, val, time.perf_counter() - started, before, self._counters(),
                               earlier)
        state["curves"].append(curve)
        self.files.write_generation(g, {"generation": g, "fitness": fitness, "episodes": episodes})
        state["generation"] = g + 1
        self.files.save_checkpoint(state)
        self.files.clear_partial()
        return curve

    # -- output -----------------------------------------------------------------------
    def _finish(self, state: dict[str, Any]) -> EvolveResult:
        o = self.options
        best = state["best"]
        start_val = reports.start_validation(state)
        head = self.base.with_flat(best["vector"])
        name = o.name or f"evolved-{self.run_dir.name}"
        # A generation kept: evolved. Else the start: fitted when it was fitted to something.
        made = "evolved" if best["generation"] >= 0 else ("fitted" if self.options.init_labels else "untrained")
        head.manifest = {
            **self.base.manifest,
            "name": name,
            "made": made,
            "trained": made == "evolved",
            "prompt_version": prompts.PROMPT_VERSION,
            "coordinator_version": COORDINATOR_VERSION,
            "training": {
                "run": self.run_dir.name, "tasks": o.tasks, "val_tasks": o.val_mix(), "budget": o.budget,
                "spent": state["spent"], "val_episodes": state["val_spent"], "seed": o.seed,
                "minibatch": o.minibatch, "popsize": state["es"].popsize, "sigma0": o.sigma0,
                "max_turns": o.max_turns, "cost_weight": o.cost_weight, "svf": o.svf, "decisions": o.decisions,
                "best_generation": best["generation"], "best_val": best["val"], "start_val": start_val,
                "curves": state["curves"],
            },
        }
        head_dir = Path(o.out).expanduser() if o.out else paths.user_heads_dir() / name
        head.save(head_dir)
        if state["curves"]:
            with paths.atomic_output(head_dir / "curves.png") as tmp:
                charts.plot_curves(state["curves"], tmp, start_val)
        self.store.save(self.run_dir, {
            "kind": "evolve", "title": f"evolve {self.config.name} on {o.tasks} ({state['spent']} episodes)",
            "options": asdict(o), "head": str(head_dir), "best_val": best["val"],
            "best_generation": best["generation"], "start_val": start_val, "spent": state["spent"],
            "curves": state["curves"], **self.files.training_summary(self.config.names),
        })
        start_head = None if not o.init_labels or state.get("start") is None else self.base.with_flat(state["start"])
        if start_head is not None:
            start_head.manifest = {**head.manifest, "name": f"{name}-start", "made": "fitted", "trained": False,
                                   "training": {**head.manifest["training"], "best_generation": -1,
                                                "best_val": start_val, "curves": []}}
        return EvolveResult(self.run_dir.name, head_dir, best["val"], state["generation"], state["spent"],
                            state["curves"], start_head)

def evolve(options: EvolveOptions, resume: str | None = None, progress: ProgressFn | None = None,
           given: Collection[str] | None = None, parallel: int | None = None,
           ray: RayOptions | None = None) -> EvolveResult:
    """Run (or resume) an evolution and write the head, `parallel` episodes at once (None:
    the pool file's `parallel`), or on Ray actors with `ray`; see the module docstring.

    `given`: on resume, the options the user set explicitly (see `resume_options`)."""
    return Evolution(options, resume=resume, progress=progress, given=given, parallel=parallel, ray=ray).run()
