"""What `trinity bench` runs: its options and the held-out task mix (bench/__init__.py
documents the whole bench). Its rows are named by policy names (`systems`), which the
policies registry resolves (policies/registry.py): built-in ones and a package's alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trinity_cli import paths, tasks
from trinity_cli.answer_kinds import played_as
from trinity_cli.conductor.workflow import DEFAULT_DEPTH, ConductorSpec
from trinity_cli.coordinator.head import DECISIONS, DEFAULT_DECISIONS
from trinity_cli.errors import ConfigError, option
from trinity_cli.policies.kinds import PolicyKind
from trinity_cli.policies.registry import POLICIES, in_bench, policy_kind
from trinity_cli.tasks.mix import MixEntry

BENCH_FORMAT = "trinity-bench/1"
DEFAULT_TASKS = "gsm8k:test:100,arc-challenge:test:100,mbpp:test:100"
DEFAULT_SC = ("best",)
Z95 = 1.959963984540054  # two-sided 95% normal quantile
ANSWER_CHARS = 300



@dataclass
class BenchOptions:
    """What `trinity bench` runs: `heads` None means the shipped default head when it fits
    the pool (none otherwise); `max_turns` None gives each head its training max_turns and
    self-loops and random routing the first head's (so every row plays the same budget as
    the head it is compared with; DEFAULT_MAX_TURNS without a head), and `agree` AGREE_TURNS
    (what `ask --mode agree` plays); `random_seeds` 0
    leaves random routing out. `decisions`: how head rows take their decisions, "sampled",
    "greedy", or "both" (two rows per head, the second named `head:<name>/<mode>`).
    `sc`: the self-consistency rows, each `MEMBER[@K]`, `all[@K]` (one row per member) or
    `best[@K]` (the member with the best single row of this bench: a baseline chosen on the
    bench's own labels, which can only flatter the baseline); K defaults to the head's turn
    budget. `conductor`, `conductor_depth`: the `conductor` row (conductor/run.py).
    `use_cache` False: replies are neither read from nor written to the rollout cache, so
    every call reaches the member's backend as its code is now (a backend being developed);
    such a run, stopped, starts again from nothing, and a row that repeats another's call
    (the self-loop's first turn is the single run's) makes it again.
    `kind_from` "detect": IFEval's and IFBench's items are played as the answer kind `trinity ask`
    reads from their prompts, not their family's preset kind (answer_kinds.played_as)."""

    pool: str | None = None
    tasks: str = DEFAULT_TASKS
    heads: Sequence[str] | None = None
    max_turns: int | None = None
    random_seeds: int = 1
    seed: int = 0
    decisions: str | None = None  # None: DEFAULT_DECISIONS
    backbone: str | None = None
    device: str = "auto"
    systems: Sequence[str] | None = None
    sc: Sequence[str] | None = None  # None: DEFAULT_SC
    conductor: str | None = None  # the conductor row's conductor (None: the pool's)
    conductor_depth: int = DEFAULT_DEPTH  # the conductor row's recursion depth (conductor/run.py)
    use_cache: bool = True  # read and write the rollout cache (False: `--no-cache`)
    kind_from: str = "preset"  # "preset" or "detect" (answer_kinds.played_as)

    def sc_specs(self) -> list[tuple[str, int | None]]:
        """`sc` parsed: (member, "all" or "best"; K or None for the turn budget)."""
        specs = []
        for spec in self.sc or DEFAULT_SC:
            who, _, k = spec.partition("@")
            if not who or (k and (not k.isdigit() or int(k) < 1)):
                raise ConfigError(f"{option('sc')} {spec!r}: expected MEMBER@K, all@K or best@K "
                                  "(K a number, 1 or more)",
                                  f"e.g. {option('sc')} best@5 or {option('sc')} qwen1.5b-reason@4")
            specs.append((who, int(k) if k else None))
        return specs

    def kinds(self) -> list[PolicyKind]:
        """The policy kinds whose rows are reported: those `systems` names, else the built-in
        ones every bench plays (`in_bench`: all but the conductor, which costs several calls an
        item), in the registry's order (built-in ones first, as registered)."""
        if not self.systems:
            return in_bench()
        named = [(name, policy_kind(name, "systems")) for name in self.systems]
        order = POLICIES.names()
        kinds: list[PolicyKind] = []
        for _, kind in sorted(named, key=lambda found: order.index(found[0])):
            if kind not in kinds:
                kinds.append(kind)
        return kinds

    def decision_modes(self) -> list[str]:
        """The decision modes of head rows, the default mode first."""
        if self.decisions == "both":
            return sorted(DECISIONS, key=lambda mode: mode != DEFAULT_DECISIONS)
        return [self.decisions or DEFAULT_DECISIONS]

    def validate(self) -> list[MixEntry]:
        """Check the options; return the parsed mix, refusing splits that are not held out."""
        for name in self.systems or ():
            policy_kind(name, "systems")  # an unknown name is refused with the close ones
        self.sc_specs()
        if self.decisions not in (None, *DECISIONS, "both"):
            raise ConfigError(f"{option('decisions')}: unknown mode {self.decisions!r}", "use sampled, greedy or both")
        if self.max_turns is not None and self.max_turns < 1:
            raise ConfigError(f"{option('max_turns')} must be at least 1, got {self.max_turns}")
        ConductorSpec(self.conductor, self.conductor_depth).check()
        played_as([], self.kind_from)  # an unknown name is refused before anything runs
        if self.random_seeds < 0:
            raise ConfigError(f"{option('random_seeds')} must be 0 or more, got {self.random_seeds}")
        if not self.use_cache and paths.replay_only():
            raise ConfigError(f"{option('no_cache')} reads no reply from the caches, and replay-only mode "
                              f"({paths.REPLAY_ONLY_ENV}, --replay-only) takes every reply from them",
                              f"leave out {option('no_cache')} to replay, or replay-only to call the models")
        return held_out_mix(self.tasks)


def held_out_mix(text: str) -> list[MixEntry]:
    """Parse a mix for benchmarking: train splits (and `all` of a built-in task, which
    contains its train split) are refused, since heads are evolved on them."""
    entries = tasks.parse_mix(text)
    for entry in entries:
        count = f":{entry.n}" if entry.n is not None else ""
        if entry.split == "train":
            raise ConfigError(
                f"{option('tasks')} {entry}: bench measures held-out accuracy, and heads are evolved on train items",
                f"use {entry.task}:test{count}",
            )
        if entry.split == "all" and not entry.task.startswith("file:"):
            raise ConfigError(
                f"{option('tasks')} {entry}: 'all' includes the train split that heads are evolved on",
                f"use {entry.task}:test{count}",
            )
    return entries
