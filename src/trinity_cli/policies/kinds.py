"""What a registered policy name stands for: a `PolicyKind`, how `ask --mode NAME`, serve's
model `trinity/NAME` and `bench --systems NAME` make the policy of that name, with the rows of a
bench report it makes (`Row`); and the kinds trinity ships that answer questions (a head, agree,
the conductor; drafts.py: drafts), registered by name in registry.py exactly as a package
registers its own. The kinds that are rows of bench's report alone (each member alone, self-loops,
self-consistency, random routing, and the rows built on the single runs) are in bench_rows.py.

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

What bench does with a kind's rows is the kind's to say, each with a default (bench/ reads
these and never a policy's name):

    single_runs         its rows are the single runs, each member's one reply to an item: what
                        rows that `needs_singles` are built on (bench plays them, unreported,
                        when only those rows are asked for)
    derive(row, items, singles)
                        a row computed from the single runs with no call of its own (vote,
                        best-per-task, the oracle): its outcome per item; None (the default):
                        the row plays episodes of its own
    played_by(row, member, models)
                        the policy of a row that waits for the single runs (`Row.by_best_single`:
                        sc:best@K, moa's aggregator), played by their best member
    aggregates_singles  its episodes aggregate the members' single answers (bench/moa.py)
                        instead of answering the item
    routes              its rows route among the members (heads, random, the conductor): their
                        gaps to the best single row and to `gaps_against`, the shares of turns
                        each member and role got, how their episodes ended
    plays_workflows     its episodes play a workflow a model wrote: how the workflows were read
    paired_against      what each of its rows is paired with (exact McNemar on the same items):
                        `Against`; a row's other decision mode (`Row.variant_of`) too

Light on purpose (no model code, no numpy): the command line lists the names and summaries
when it starts; what a kind plays is imported when it is made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from trinity_cli.errors import ConfigError, option
from trinity_cli.events import AskStarted

if TYPE_CHECKING:
    from trinity_cli.policies.base import Policy
    from trinity_cli.pool.pool import Pool
    from trinity_cli.tasks.items import TaskItem


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
    one per seed); `policy` None for rows derived from the single runs (`PolicyKind.derive`)
    or played once they are in (`by_best_single`); `stream`: where its episode seeds come from
    (bench/systems.episode_seed); `model`: its member (single, self-loop, sc) or conductor;
    `reported` False for the single runs played only because another row is built on them.
    `owner`: the kind that made it (set by bench when it plans the rows), which says what bench
    does with it (module docstring); `stream_per_seed`: seed r of the row plays the episode seeds
    of stream "<stream>:<r>" (random routing), else every seed those of `stream`;
    `by_best_single`: it is played once the single runs are in, by their best member
    (`PolicyKind.played_by`); `variant_of`: the row it plays in another decision mode (a head's
    `head:<name>/<mode>`), which it is paired with."""

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
    owner: PolicyKind = field(default_factory=lambda: PolicyKind(), repr=False, compare=False)
    stream_per_seed: bool = False
    by_best_single: bool = False
    variant_of: str | None = None

    def seed_stream(self, r: int) -> str:
        """The stream of its `r`-th seed's episode seeds (bench/systems.episode_seed)."""
        return f"{self.stream}:{r}" if self.stream_per_seed else self.stream

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


class SingleRun(Protocol):
    """One member's single run on one item, as a row derived from the single runs reads it
    (`PolicyKind.derive`; bench/systems.EpisodeResult is one): its task, reward and answer."""

    task: str
    reward: float
    answer: str | None

    @property
    def key(self) -> str: ...  # "<task>/<item id>"


Run = TypeVar("Run", bound=SingleRun)


@dataclass(frozen=True)
class Derived(Generic[Run]):
    """A derived row's outcome on one item (`PolicyKind.derive`): its `reward`, and `uses`, the
    single runs it took, whose calls, tokens, seconds and cost are its own; `is_run`: it is the
    one run in `uses` itself, whose turns are its turns (else it has none)."""

    task: str
    key: str
    reward: float
    uses: tuple[Run, ...]
    is_run: bool = False


@dataclass(frozen=True)
class Against:
    """What a row is paired with in bench's paired test (`PolicyKind.paired_against`): the most
    accurate reported row of kind `kind` (ties: the first), under `key`; with `key` None, each
    row of that kind, under "vs_<its name>"."""

    kind: str
    key: str | None = None


# The baselines every system under test is paired with, in the order bench reports them.
BASELINES = (Against("single", "vs_best_single"), Against("selfloop", "vs_best_selfloop"),
             Against("agree", "vs_agree"), Against("sc", "vs_best_sc"))


class PolicyKind:
    """What a registered policy name stands for (module docstring). The defaults fit a policy
    that needs nothing but the pool (`make`): asked like `agree`, one bench row, played on
    every item and reported as its episodes scored."""

    name: str = ""
    summary: str = ""
    asks: bool = True
    takes_head: bool = False
    in_bench: bool = False
    max_turns: int = 5
    # What bench does with its rows (module docstring):
    single_runs: bool = False  # they are the single runs that rows built on them read
    needs_singles: bool = False  # they are built on the single runs (which bench then plays)
    aggregates_singles: bool = False  # their episodes aggregate the single answers (bench/moa.py)
    routes: bool = False  # they route among the members: gaps, shares of turns, how episodes ended
    gaps_against: tuple[str, ...] = ("oracle",)  # a routed row's gaps: "vs_<kind>" to that kind's row
    plays_workflows: bool = False  # their episodes play a written workflow: how it was read
    paired_against: tuple[Against, ...] = ()  # each row's paired tests (`Against`)

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

    def derive(self, row: Row, items: Sequence[TaskItem],
               singles: Mapping[str, Sequence[Run]]) -> list[Derived[Run]] | None:
        """`row` computed from the single runs with no call of its own: its outcome on each item
        (an item it has none on is left out of its numbers). `singles`: member -> its single
        runs, members in pool order, each member's runs in item order. None (the default): the
        row plays episodes of its own."""
        return None

    def played_by(self, row: Row, member: str, models: Sequence[str]) -> Policy:
        """The policy that plays `row`, a row that waits for the single runs
        (`Row.by_best_single`), as `member`: the member whose single runs scored best (ties:
        pool order), picked with the bench's own labels. `models`: the pool's members."""
        raise NotImplementedError(f"{type(self).__name__} makes rows played by the best single member: "
                                  "it must define played_by(row, member, models)")


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


# -- the kinds trinity ships that answer (bench's own rows: bench_rows.py) ----------------------


class HeadKind(PolicyKind):
    """A head (or a reader) reads the conversation and picks a member and a role every turn."""

    name = "coordinator"
    summary = "a head picks a member and a role every turn (--head; bench calls its rows head)"
    takes_head = True
    in_bench = True
    routes = True
    paired_against = BASELINES

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
        record = {"mode": self.name, "head": {"name": head.manifest.get("name"), "trained": head.learned,
                                              "policy": head.policy, "made": head.made,
                                              "default": asking.head is None},
                  "backbone": engine.backbone_ref, "greedy": greedy, "max_turns": max_turns}
        started = self.started(pool, asking, head=str(head.manifest.get("name")), uniform=head.uniform,
                               procedure=None, procedure_is_default=False, summary="", played=head.describe(),
                               head_is_default=asking.head is None)
        return Answering(head_policy(head, engine.backbone_ref), max_turns, greedy, record, started)

    def rows(self, plan: BenchPlan) -> list[Row]:
        """A row per head and decision mode: `head:<name>` in the default mode, `head:<name>/<mode>`
        in the other (`--decisions both`, paired with the first); both modes play the same
        episode seeds."""
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
                                stream="head", policy=head_policy(head, plan.options.backbone), greedy=greedy,
                                variant_of=None if row == name else name))
        return rows


def head_policy(head: Any, backbone: str | None = None) -> Policy:
    """The policy that plays a head (read by `backbone`, None: its own) or a reader."""
    from trinity_cli.coordinator.reader import Reader
    from trinity_cli.policies.head import HeadPolicy
    from trinity_cli.policies.reader import ReaderPolicy

    return ReaderPolicy(head) if isinstance(head, Reader) else HeadPolicy(head, backbone)


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


class ConductorKind(PolicyKind):
    name = "conductor"
    summary = ("one model writes the whole workflow (member, subtask, which earlier outputs each step reads) "
               "and trinity runs it")
    routes = True
    plays_workflows = True
    paired_against = (*BASELINES, Against("coordinator"))  # and each head row: two coordinators compared

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


COORDINATOR = HeadKind()
AGREE = AgreeKind()
CONDUCTOR = ConductorKind()
