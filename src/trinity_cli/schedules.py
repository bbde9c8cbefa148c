"""Fixed schedules: decision sources that need no head, played by `episode.run_episode`
exactly like a coordinator (bench's single, self-loop, sc and agree systems)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from trinity_cli.errors import ConfigError, ContextOverflow
from trinity_cli.messages import ROLES, ChatMessage, Decision, Role, Turn


class FixedSchedule:
    """A decision source that needs no head: model `model` every turn, in the roles of
    `plan` taken in turn (cycling). It has the two members `run_episode` uses of a
    coordinator, `models` and `decide`, so episodes run with it exactly as with a head.

    single:<m>   FixedSchedule(models, m, (Role.WORKER,)) with max_turns 1
    selfloop:<m> FixedSchedule(models, m, (Role.WORKER, Role.VERIFIER))
    sc:<m>@k     FixedSchedule(models, m, (Role.WORKER,), alone=True) with max_turns k:
                 the greedy reply and k-1 fresh attempts, each from the task alone,
                 settled by plurality (settle.py)

    `alone`: every call is made from the task alone (Decision.alone); `stop_when_agreed`:
    the episode ends at the first agreement (episode.py).
    """

    stop_when_agreed = False

    def __init__(self, models: Sequence[str], model: str, plan: Sequence[Role], alone: bool = False) -> None:
        if model not in models:
            raise ConfigError(f"no model {model!r} among {list(models)}")
        if not plan:
            raise ConfigError("a fixed schedule needs at least one role")
        self.models = list(models)
        self.model = model
        self.plan = tuple(plan)
        self.alone = alone

    def decide(
        self,
        task: str,
        turns: Sequence[Turn],
        rng: np.random.Generator,
        excluded: Collection[str] = (),
        context: Sequence[ChatMessage] = (),
        greedy: bool = False,
    ) -> Decision:
        if self.model in excluded:
            raise ContextOverflow(f"model {self.model!r} cannot hold this task in its context")
        role = self.plan[len(turns) % len(self.plan)]
        return Decision(
            model=self.model,
            role=role,
            model_probs=[float(m == self.model) for m in self.models],
            role_probs=[float(r is role) for r in ROLES],
            alone=self.alone,
        )

    def close(self) -> None:
        """Nothing to free (same interface as `Coordinator`)."""


class Agree:
    """bench's `agree` row: Workers asked from the task alone, the members of `order` in
    turn (round-robin, each asked again makes a fresh attempt), until two answers agree or,
    on code, one passes its examples (`stop_when_agreed`); at the turn budget, the
    plurality (settle.py). Members `run_episode` masks (context too small) are skipped."""

    stop_when_agreed = True

    def __init__(self, models: Sequence[str], order: Sequence[str] | None = None) -> None:
        order = list(order or models)
        unknown = [m for m in order if m not in models]
        if unknown or not order:
            raise ConfigError(f"agree: no model {unknown[0]!r} among {list(models)}" if unknown
                              else "agree needs at least one member")
        self.models = list(models)
        self.order = order

    def decide(
        self,
        task: str,
        turns: Sequence[Turn],
        rng: np.random.Generator,
        excluded: Collection[str] = (),
        context: Sequence[ChatMessage] = (),
        greedy: bool = False,
    ) -> Decision:
        usable = [m for m in self.order if m not in excluded]
        if not usable:
            raise ContextOverflow("no member of the agree procedure can hold this task in its context")
        model = usable[len(turns) % len(usable)]
        return Decision(
            model=model,
            role=Role.WORKER,
            model_probs=[float(m == model) for m in self.models],
            role_probs=[float(r is Role.WORKER) for r in ROLES],
            alone=True,
        )

    def close(self) -> None:
        """Nothing to free (same interface as `Coordinator`)."""
