"""Fixed schedules: decision sources that need no head, played by `episode.run_episode`
exactly like a coordinator (bench's single and self-loop systems)."""

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
    """

    def __init__(self, models: Sequence[str], model: str, plan: Sequence[Role]) -> None:
        if model not in models:
            raise ConfigError(f"no model {model!r} among {list(models)}")
        if not plan:
            raise ConfigError("a fixed schedule needs at least one role")
        self.models = list(models)
        self.model = model
        self.plan = tuple(plan)

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
        )

    def close(self) -> None:
        """Nothing to free (same interface as `Coordinator`)."""
