"""What a registered policy name stands for: a `PolicyKind`, how `ask --mode NAME`, serve's
model `trinity/NAME` and `bench --systems NAME` make the policy of that name; and the kinds
trinity ships, registered by name in registry.py exactly as a package registers its own.

A kind answers three questions, each with a default (`PolicyKind`):

    check(asking)               refuse, before the pool is opened, what it cannot answer with
    engine(pool, asking)        what ask and serve build once and keep between questions (a
                                head's coordinator; None for most), checked against the pool
    answering(pool, engine, asking)
                                the policy that answers one question, its turn budget and
                                decision mode, the run record's fields and the `AskStarted` event
    rows(plan)                  its rows of a bench report (`Row`: name, policy, budget, seeds)

and declares `asks` (ask and serve answer with it; bench-only rows such as `single` do not),
`takes_head` (it reads `--head`), `in_bench` (a row of every bench that names no
`--systems`), `needs_singles` (its row is built on the single runs) and `max_turns` (its turn
budget when none is given). A package's policy class becomes a kind through `PolicyClass`:
asked like `agree`, one bench row named after it, played only when `--systems` names it.

Light on purpose (no model code, no numpy): the command line lists the names and summaries
when it starts; what a kind plays is imported when it is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from trinity_cli.errors import ConfigError, option
from trinity_cli.events import AskStarted
from trinity_cli.messages import Role

if TYPE_CHECKING:
    from trinity_cli.policies.base import Policy
    from trinity_cli.pool.pool import Pool


class Asking(Protocol):
    """What the command line says about who answers a question (`AskOptions` has these): the
    chosen `mode`, a head and its backbone, the turn budget and decision mode when given, the
    conductor's settings, the members left out."""

    mode: str | None
    head: str | None
    backbone: str | None
    device: str
    max_turns: int | None
    greedy: bool | None
    conductor: str | None
    conductor_depth: int
    exclude: Sequence[str]


class HeadEngine(Protocol):
    """What reads the conversation for a head, kept between questions by `ask` and `serve` (a
    `Coordinator`, or a reader's `ReaderSource`)."""

    @property
    def head(self) -> Any: ...

    @property
    def backbone_ref(self) -> str | None: ...

    @property
    def loads_backbone(self) -> bool: ...

    def warm(self) -> None: ...

    def close(self) -> None: ...


@dataclass
class Answering:
    """How one question is answered: the `policy`, its turn budget and decision mode, the run
    record's fields that say who answered (`record`: "mode", "head", "backbone", "greedy",
    "max_turns", ...) and the `started` event `ask` shows first."""

    policy: Policy
    max_turns: int
    greedy: bool
    record: dict[str, Any]
    started: AskStarted


@dataclass
class Row:
    """One row of a bench report (bench/__init__.py). `seeds`: episodes each item gets (random:
    one per seed); `policy` None for rows the bench completes or derives itself (moa,
    `sc:best@K`, vote, best-per-task, the oracle); `stream`: where its episode seeds come from
    (bench/systems.episode_seed); `model`: its member (single, self-loop, sc) or conductor;
    `reported` False for the single runs played only because another row is built on them."""

    name: str
    kind: str
    model: str | None = None
    head: dict[str, Any] | None = None
    seeds: int = 1
    max_turns: int = 1
    stream: str = "fixed"
    policy: Policy | None = None
    greedy: bool = False
    reported: bool = True

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "model": self.model, "head": self.head,
                "seeds": self.seeds, "max_turns": self.max_turns, "greedy": self.greedy}


class Benching(Protocol):
    """What bench's options say to a kind's rows (bench/options.BenchOptions has these)."""

    max_turns: int | None
    backbone: str | None
    decisions: str | None
    random_seeds: int
    conductor: str | None
    conductor_depth: int

    def sc_specs(self) -> list[tuple[str, int | None]]: ...

    def decision_modes(self) -> list[str]: ...


@dataclass
class BenchPlan:
    """What a kind's bench rows are made from: the pool, the options, the heads benchmarked
    (each with the ref it was named by) and `budget`, the turn budget of self-loops and random
    routing (the first head's)."""

    pool: Pool
    options: Benching
    heads: list[tuple[str | None, Any]] = field(default_factory=list)
    budget: int = 5


class PolicyKind:
    """What a registered policy name stands for (module docstring). The defaults fit a policy
    that needs nothing but the pool (`make`): asked like `agree`, one bench row."""

    name: str = ""
    summary: str = ""
    asks: bool = True
    takes_head: bool = False
    in_bench: bool = False
    needs_singles: bool = False
    max_turns: int = 5

    def make(self, pool: Pool) -> Policy:
        raise ConfigError(f"{self.name} is a row of bench's report, not a policy that answers a question",
                          "trinity pools lists the policies")

    def turn_budget(self) -> int:
        """The turn budget when none is given (`max_turns`)."""
        return self.max_turns

    def check(self, asking: Asking) -> None:
        if asking.head is not None and not self.takes_head:
            raise ConfigError(f"{option('mode')} {self.name} asks no head: it takes no {option('head')}",
                              f"leave out {option('head')}, or use {option('mode')} coordinator")

    def engine(self, pool: Pool, asking: Asking) -> HeadEngine | None:
        return None

    def answering(self, pool: Pool, engine: HeadEngine | None, asking: Asking) -> Answering:
        max_turns = asking.max_turns or self.turn_budget()
        record = {"mode": self.name, "head": None, "backbone": None, "greedy": None, "max_turns": max_turns}
        return Answering(self.make(pool), max_turns, False, record, self.started(pool, asking))

    def started(self, pool: Pool, asking: Asking, **fields: Any) -> AskStarted:
        """The `AskStarted` of a question this kind answers (a procedure's, unless `fields` say
        otherwise)."""
        said: dict[str, Any] = {"head": None, "uniform": False, "procedure": self.name,
                                "procedure_is_default": asking.mode is None, "summary": self.summary, **fields}
        return AskStarted(pool=pool.config.name, models=tuple(pool.names), excluded=tuple(asking.exclude), **said)

    def rows(self, plan: BenchPlan) -> list[Row]:
        return [Row(self.name, self.name, max_turns=plan.options.max_turns or self.turn_budget(), stream=self.name,
                    policy=self.make(plan.pool))]


class PolicyClass(PolicyKind):
    """The kind of a policy class a package registers: made with no arguments; the first line
    of its docstring is its summary, its `max_turns` (when it has one) its turn budget."""

    def __init__(self, name: str, factory: Any) -> None:
        self.name = name
        self.factory = factory
        self.summary = ((getattr(factory, "__doc__", None) or "").strip().splitlines() or [""])[0]
        self.max_turns = int(getattr(factory, "max_turns", PolicyKind.max_turns))

    def make(self, pool: Pool) -> Policy:
        policy: Policy = self.factory()
        return policy


# -- the kinds trinity ships ------------------------------------------------------------------


class HeadKind(PolicyKind):
    """A head (or a reader) reads the conversation and picks a member and a role every turn."""

    name = "coordinator"
    summary = "a head picks a member and a role every turn (--head; bench calls its rows head)"
    takes_head = True
    in_bench = True

    def check(self, asking: Asking) -> None:
        return None

    def engine(self, pool: Pool, asking: Asking) -> HeadEngine:
        from trinity_cli.coordinator.policy import Coordinator, resolve_head
        from trinity_cli.coordinator.reader import Reader, ReaderSource

        found = resolve_head(asking.head, pool.config.name, pool.config.names, asking.backbone)
        if isinstance(found, Reader):
            return ReaderSource(found)
        return Coordinator(found, backbone_ref=asking.backbone, device=asking.device)

    def answering(self, pool: Pool, engine: HeadEngine | None, asking: Asking) -> Answering:
        from trinity_cli.coordinator.head import default_greedy, turn_budget

        assert engine is not None
        head = engine.head
        max_turns = turn_budget(asking.max_turns, head)
        greedy = asking.greedy if asking.greedy is not None else default_greedy(head)
        record = {"mode": self.name, "head": {"name": head.manifest.get("name"), "trained": head.learned},
                  "backbone": engine.backbone_ref, "greedy": greedy, "max_turns": max_turns}
        started = self.started(pool, asking, head=str(head.manifest.get("name")), uniform=head.uniform,
                               procedure=None, procedure_is_default=False, summary="")
        return Answering(head_policy(head, engine.backbone_ref), max_turns, greedy, record, started)

    def rows(self, plan: BenchPlan) -> list[Row]:
        """A row per head and decision mode: `head:<name>` in the default mode, `head:<name>/<mode>`
        in the other (`--decisions both`); both modes play the same episode seeds."""
        from trinity_cli.coordinator.head import DEFAULT_DECISIONS, turn_budget

        rows: list[Row] = []
        taken: set[str] = set()
        for head_ref, head in plan.heads:
            name = f"head:{head.manifest.get('name') or 'unnamed'}"
            base, k = name, 2
            while name in taken:
                name, k = f"{base}#{k}", k + 1
            taken.add(name)
            info = {"name": head.manifest.get("name"), "trained": head.learned, "ref": head_ref}
            for mode in plan.options.decision_modes():
                row = name if mode == DEFAULT_DECISIONS else f"{name}/{mode}"
                # Left to the default, an untrained head is sampled (head.default_greedy).
                greedy = mode == "greedy" and (head.learned or plan.options.decisions is not None)
                rows.append(Row(row, "head", head=info, max_turns=turn_budget(plan.options.max_turns, head),
                                stream="head", policy=head_policy(head, plan.options.backbone), greedy=greedy))
        return rows


def head_policy(head: Any, backbone: str | None = None) -> Policy:
    """The policy that plays a head (read by `backbone`, None: its own) or a reader."""
    from trinity_cli.coordinator.reader import Reader
    from trinity_cli.policies.head import HeadPolicy
    from trinity_cli.policies.reader import ReaderPolicy

    return ReaderPolicy(head) if isinstance(head, Reader) else HeadPolicy(head, backbone)


class RandomKind(PolicyKind):
    name = "random"
    summary = "an untrained head: a member and a role drawn at random every turn (one row per --random-seeds)"
    asks = False
    in_bench = True

    def rows(self, plan: BenchPlan) -> list[Row]:
        from trinity_cli.coordinator.policy import resolve_head

        if not plan.options.random_seeds:
            return []
        pool = plan.pool
        untrained = resolve_head("untrained", pool.config.name, pool.names, plan.options.backbone)
        return [Row("random", "random", seeds=plan.options.random_seeds, max_turns=plan.budget, stream="random",
                    policy=head_policy(untrained, plan.options.backbone))]


class AgreeKind(PolicyKind):
    name = "agree"
    summary = ("the members in order, each from the question alone, until two answers agree (code: until one "
               "passes the question's examples)")
    in_bench = True

    def turn_budget(self) -> int:
        from trinity_cli.episode.schedules import AGREE_TURNS

        return AGREE_TURNS

    def make(self, pool: Pool) -> Policy:
        from trinity_cli.episode.schedules import agree
        from trinity_cli.policies.fixed import FixedPolicy

        return FixedPolicy(agree(pool.names))

    def rows(self, plan: BenchPlan) -> list[Row]:
        # `ask --mode agree`'s budget, whatever the heads': the row is that command
        return [Row("agree", "agree", max_turns=plan.options.max_turns or self.turn_budget(), stream="fresh",
                    policy=self.make(plan.pool))]


class SingleKind(PolicyKind):
    name = "single"
    summary = "each member alone, one reply (a row per member)"
    asks = False
    in_bench = True

    def rows(self, plan: BenchPlan) -> list[Row]:
        from trinity_cli.policies.fixed import schedule_policy

        models = plan.pool.names
        return [Row(f"single:{m}", "single", model=m, policy=schedule_policy(models, m, (Role.WORKER,)))
                for m in models]


class SelfLoopKind(PolicyKind):
    name = "selfloop"
    summary = "each member alone as worker and verifier in turn (a row per member)"
    asks = False
    in_bench = True

    def rows(self, plan: BenchPlan) -> list[Row]:
        from trinity_cli.policies.fixed import schedule_policy

        models = plan.pool.names
        return [Row(f"selfloop:{m}", "selfloop", model=m, max_turns=plan.budget,
                    policy=schedule_policy(models, m, (Role.WORKER, Role.VERIFIER))) for m in models]


class ScKind(PolicyKind):
    name = "sc"
    summary = "self-consistency: K replies of one member, each from the task alone, settled by plurality (--sc)"
    asks = False
    in_bench = True

    def rows(self, plan: BenchPlan) -> list[Row]:
        """The `sc:<member>@K` rows of `--sc` (`sc:best@K`'s member is set once the single runs
        are played: bench/runner.py)."""
        from trinity_cli.errors import did_you_mean
        from trinity_cli.policies.fixed import sc_policy

        models = plan.pool.names
        rows: list[Row] = []
        for who, k in plan.options.sc_specs():
            turns = k or plan.budget
            if who not in ("all", "best") and who not in models:
                raise ConfigError(f"{option('sc')}: the pool has no model {who!r}", did_you_mean(who, models))
            for model in models if who == "all" else [who]:
                name = f"sc:{model}@{turns}"
                if all(r.name != name for r in rows):
                    policy = None if model == "best" else sc_policy(models, model)
                    rows.append(Row(name, "sc", model=None if model == "best" else model, max_turns=turns,
                                    stream="fresh", policy=policy))
        return rows


class ConductorKind(PolicyKind):
    name = "conductor"
    summary = ("one model writes the whole workflow (member, subtask, which earlier outputs each step reads) "
               "and trinity runs it")

    def _spec(self, conductor: str | None, depth: int) -> Any:
        from trinity_cli.conductor.workflow import ConductorSpec

        return ConductorSpec(conductor, depth)

    def engine(self, pool: Pool, asking: Asking) -> None:
        self._spec(asking.conductor, asking.conductor_depth).name(pool)  # refused now, not mid-question

    def answering(self, pool: Pool, engine: HeadEngine | None, asking: Asking) -> Answering:
        from trinity_cli.policies.conductor import ConductorPolicy

        spec = self._spec(asking.conductor, asking.conductor_depth)
        record = {"mode": self.name, "conductor_depth": spec.depth, "head": None, "backbone": None, "greedy": None,
                  "max_turns": None}
        started = self.started(pool, asking, conductor=asking.conductor or pool.config.conductor_name,
                               conductor_depth=asking.conductor_depth, procedure=None, procedure_is_default=False,
                               summary="")
        return Answering(ConductorPolicy(spec), 0, False, record, started)

    def rows(self, plan: BenchPlan) -> list[Row]:
        from trinity_cli.policies.conductor import ConductorPolicy

        spec = self._spec(plan.options.conductor, plan.options.conductor_depth)
        return [Row("conductor", "conductor", model=spec.name(plan.pool), max_turns=spec.max_steps,
                    stream="conductor", policy=ConductorPolicy(spec))]


class BuiltOnSingles(PolicyKind):
    """A bench row built on the single runs, which are then played: mixture-of-agents (its
    aggregator episodes, bench/moa.py) or computed from them with no further call (vote,
    best-per-task, the oracle: bench/stats.py)."""

    asks = False
    in_bench = True
    needs_singles = True

    def __init__(self, name: str, summary: str) -> None:
        self.name = name
        self.summary = summary

    def rows(self, plan: BenchPlan) -> list[Row]:
        return [Row(self.name, self.name)]


class MoaKind(BuiltOnSingles):
    def rows(self, plan: BenchPlan) -> list[Row]:
        return [Row(self.name, self.name, max_turns=len(plan.pool.names) + 1)]


COORDINATOR = HeadKind()
RANDOM = RandomKind()
AGREE = AgreeKind()
SINGLE = SingleKind()
SELFLOOP = SelfLoopKind()
SC = ScKind()
CONDUCTOR = ConductorKind()
MOA = MoaKind("moa", "mixture-of-agents: one member aggregates every member's single reply")
VOTE = BuiltOnSingles("vote", "the plurality of the single replies (no further call)")
BEST_PER_TASK = BuiltOnSingles("best-per-task", "each task's best single member (chosen on the bench's own labels)")
ORACLE = BuiltOnSingles("oracle", "right when any single reply is right (an upper bound)")
