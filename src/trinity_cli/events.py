"""Progress events: what library code reports while it works, as frozen dataclasses that
render/progress.py matches on. A `ProgressFn` receives each event as it happens; `quiet`
drops them all. Events are plain data: an emitter never waits on what a callback does with
them, but a callback that raises stops the work (that is how a test stops a run).

Who emits what:
    episode/loop.py                       DecisionMade, TextWritten, TurnPlayed (one episode)
    conductor/run.py                      TurnPlayed                         (one workflow)
    ask/answer.py                         AskStarted, ContextShortened, RunAllocated, then the
                                          episode's
    ask/conversation.py                   KindFollowed, then ask/answer.py's
    serve/service.py                      ServeLoading, RequestAnswered, RequestFailed; per
                                          request RunAllocated, DecisionMade, TurnPlayed
    serve/run.py                          ServeStarted
    viewer/web.py                         ViewerStarted
    evaluators (local.py, ray_actors.py)  EpisodeStarted, EpisodeFinished   (index: the spec's)
    evolve/evolution.py                   RunResumed, CentreFitting, StartFitted, RotationPlaying,
                                          RotationFitted, EvolveStarted, StartValidated, EvolveEpisodeStarted,
                                          EvolveEpisodeFinished, GenerationFinished
    bench/runner.py                       BenchStarted, SystemStarted, BenchEpisodeFinished,
                                          MemberFailing (a member's first failed call of the bench)
    bench/matrix.py                       MatrixItemPlayed
    evolve/reader_fit.py                  ReaderGeneration
    evolve/recipe.py                      RecipePhase, then its phases' events (matrix, evolve, bench)
With several episodes at once (threads or Ray) episodes finish out of order; `in_flight` is
how many were running when the event was sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trinity_cli.messages import Decision, Turn


# -- one episode: ask, serve's requests, anything that plays run_episode or run_conductor ----
@dataclass(frozen=True)
class DecisionMade:
    """The coordinator picked turn `index`'s member and role (before the call is made)."""

    index: int
    decision: Decision


@dataclass(frozen=True)
class TurnPlayed:
    """A turn is recorded, numbered and settled (a conductor's turns once their level is done)."""

    turn: Turn


@dataclass(frozen=True)
class TextWritten:
    """A piece of turn `index`'s reply, as the member writes it (a cached reply: all of it
    at once), before the turn is recorded; `role` is the acting role."""

    index: int
    model: str
    role: str
    text: str


@dataclass(frozen=True)
class RunAllocated:
    """A run directory exists for the question now (serve answers with its id at once)."""

    run: str


# -- trinity ask ------------------------------------------------------------------------------
@dataclass(frozen=True)
class AskStarted:
    """The pool and the head (or, in conductor mode, the conductor) are loaded and checked."""

    pool: str
    models: tuple[str, ...]
    head: str | None  # None in conductor and agree mode
    uniform: bool  # the head routes uniformly at random (an untrained head)
    excluded: tuple[str, ...]
    conductor: str | None = None  # conductor mode: who writes the workflow
    conductor_depth: int = 0
    procedure: str | None = None  # a policy that needs no head answers: its name ("agree", a package's)
    procedure_is_default: bool = False  # ... because the pool file says `router: agree`
    summary: str = ""  # that policy in one line (its kind's summary: policies/base.py)
    # The answer kind the question is played as, and whether it was read from the question's wording
    # (answer_kinds.detect) rather than given (--kind): ask's first line says it and how to override it.
    answer_kind: str = ""
    kind_read: bool = False
    played: str = ""  # the head or reader that answers, in words (its `describe()`); "" without one
    head_is_default: bool = False  # ... picked because none was named: the pool's default head


@dataclass(frozen=True)
class ContextShortened:
    """The earlier conversation did not fit every member's context with the question:
    `left_out` of its `messages` (the oldest; conversation.shortenings) are not shown to
    members. `n_ctx`: the smallest context among the members asked."""

    left_out: int
    messages: int
    n_ctx: int


@dataclass(frozen=True)
class KindFollowed:
    """A message of a conversation whose wording asks for no kind of its own is answered as
    `kind`, the kind of the answer before it (ask/conversation.py `follow_up_kind`)."""

    kind: str


# -- trinity serve ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ServeLoading:
    """A step of start-up: "pool" (its files checked) or "backbone" (the default head's).
    `default`: "agree" when the pool's default is the agree procedure (its pool file says
    `router: agree`, and no --head was given), said on the first line; else ""."""

    step: str
    what: str
    default: str = ""


@dataclass(frozen=True)
class ServeStarted:
    url: str
    exposed: bool  # listening beyond loopback without a token
    models: tuple[str, ...]  # the model ids clients may ask for
    pool: str
    members: tuple[str, ...]
    head: str
    auth: bool
    host: str


@dataclass(frozen=True)
class ViewerStarted:
    """`trinity inspect --serve` listens at `url`; `exposed`: beyond loopback."""

    url: str
    host: str
    exposed: bool
    runs: str  # the runs folder it shows


@dataclass(frozen=True)
class RequestAnswered:
    result: Any  # ask.AskResult


@dataclass(frozen=True)
class RequestFailed:
    error: Any  # errors.TrinityError


# -- any batch of episodes ------------------------------------------------------------------
@dataclass(frozen=True)
class EpisodeStarted:
    index: int
    in_flight: int
    done: int
    total: int


@dataclass(frozen=True)
class EpisodeFinished:
    index: int
    in_flight: int
    done: int
    total: int
    outcome: Any  # evaluators/local.py's EpisodeOutcome


# -- trinity evolve ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RunResumed:
    """The same command found an unfinished run with the same configuration and goes on with it."""

    run: str


@dataclass(frozen=True)
class CentreFitting:
    """A fresh run reads the turn-0 features of `items` training tasks to fix the head's input."""

    items: int


@dataclass(frozen=True)
class StartFitted:
    """The starting head fitted to a sample matrix (`--init-labels`): its held-out scores."""

    items: int
    ridge: float
    picked_label_loo: float
    best_fixed_label: float
    oracle_label: float


@dataclass(frozen=True)
class RotationPlaying:
    """The rotating start (`--init-rotate`) plays its rotation on `episodes` labelled training items."""

    episodes: int


@dataclass(frozen=True)
class RotationFitted:
    """The rotating start (`--init-rotate`) fitted to the states of rotation episodes on the
    labelled training items: `next_loo` is the share of states whose asked member it ranks
    first, held out."""

    episodes: int
    states: int
    ridge: float
    next_loo: float


@dataclass(frozen=True)
class EvolveStarted:
    run: str
    budget: int
    spent: int  # training episodes already spent (a resumed run)
    popsize: int
    n_params: int
    per_gen: int
    parallel: int
    ray: bool
    ends_at: int  # training episodes spent when the run ends: a generation is played only whole


@dataclass(frozen=True)
class StartValidated:
    """The fitted start's validation score, before generation 0."""

    val: float


@dataclass(frozen=True)
class EvolveEpisodeStarted:
    kind: str  # "train" or "val"
    in_flight: int


@dataclass(frozen=True)
class EvolveEpisodeFinished:
    kind: str  # "train" or "val"
    in_flight: int
    pool_calls: int  # the run's pool counters so far
    cache_hits: int
    tokens: int
    recorded: int = 0  # of the cache hits, calls imported from a recording


@dataclass(frozen=True)
class GenerationFinished:
    curve: Mapping[str, Any]  # the generation's curve (docs/files.md#evolve-runs)
    best_val: float | None
    budget: int


# -- trinity bench ----------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchStarted:
    run: str
    items: int
    systems: tuple[str, ...]
    episodes: int
    parallel: int
    ray: bool


@dataclass(frozen=True)
class SystemStarted:
    """A system's first episode started (its episodes may be played among other systems'
    episodes: an item's episodes are played together)."""

    name: str
    episodes: int
    in_flight: int


@dataclass(frozen=True)
class BenchEpisodeFinished:
    system: str
    task: str
    item: str
    reward: float
    cached: bool  # every turn came from the rollout cache
    cache_hits: int  # the pool's counters so far
    pool_calls: int
    in_flight: int
    recorded: int = 0  # of the cache hits, calls imported from a recording


@dataclass(frozen=True)
class MemberFailing:
    """A member's call failed (its backend raised: pool/pool.py's `MemberFailed`), the first of
    its failures in this bench, seen when the episode of `system` that made it finished: `error`
    says why. Its episodes go on without it (a failed turn: episode/turn.py); a row where every
    call failed is reported as failed, not as wrong answers."""

    member: str
    kind: str  # the member's kind in the pool file ("gguf", "openai", a package's)
    error: str
    system: str


# -- trinity matrix --------------------------------------------------------------------------
@dataclass(frozen=True)
class MatrixItemPlayed:
    """Every member's replies to item `index` (1-based, of `total`) are in; the pool's
    counters so far."""

    index: int
    total: int
    key: str
    calls: int
    cache_hits: int


@dataclass(frozen=True)
class ReaderGeneration:
    """A reader's search (evolve/reader_fit.py) finished `generation` of `generations`: its
    mean's training and validation accuracy and validation tokens a question (None without a
    validation matrix); `kept`, the generation whose mean scores best on the training items so
    far (0: the start)."""

    generation: int
    generations: int
    train: float
    val: float | None
    val_tokens: float | None
    kept: int


# -- trinity evolve as the recipe -----------------------------------------------------------
@dataclass(frozen=True)
class RecipePhase:
    """A phase of the one-command evolve begins ("plan", "matrix", "search", "start",
    "validate"): `detail` says what it does, in one line."""

    name: str
    detail: str


Event = (DecisionMade | TextWritten | TurnPlayed | RunAllocated | AskStarted | ContextShortened | KindFollowed
         | ServeLoading | ServeStarted
         | ViewerStarted
         | RequestAnswered
         | RequestFailed | EpisodeStarted | EpisodeFinished | RunResumed | CentreFitting | StartFitted
         | RotationPlaying | RotationFitted | EvolveStarted | StartValidated | EvolveEpisodeStarted
         | EvolveEpisodeFinished | GenerationFinished | BenchStarted | SystemStarted | BenchEpisodeFinished
         | MemberFailing
         | MatrixItemPlayed | RecipePhase | ReaderGeneration)
ProgressFn = Callable[[Event], None]
EpisodeEvent = EpisodeStarted | EpisodeFinished
EpisodeProgressFn = Callable[[EpisodeEvent], None]  # what an evaluator reports


def quiet(event: Event) -> None:
    """A `ProgressFn` that reports nothing."""
