"""The `drafts` policy: drafts from the question alone, one at a time, until one meets the
question's stated constraints (episode/schedules.py `DraftSchedule`; bench/drafts.py's
`until-pass@N/<fallback>` row, which scores it from a recorded matrix).

A question that states no constraint trinity reads gets the first member's draft and nothing
more: one call, the pace of one plain draft. Each draft is asked as a person asks (a free-form
draft: the request alone under a plain system line, answer_kinds/freeform.py), so what prints
is that reply, cleaned (tasks/answer_body.py). `MAX_DRAFTS` and `FALLBACK` are what the
validation items chose (docs/freeform.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trinity_cli.policies.kinds import PolicyKind, Row

if TYPE_CHECKING:
    from trinity_cli.policies.base import Policy
    from trinity_cli.policies.kinds import BenchPlan
    from trinity_cli.pool.pool import Pool

MAX_DRAFTS = 4
FALLBACK = "first"


class DraftsKind(PolicyKind):
    name = "drafts"
    summary = ("drafts from the question alone, in member order, until one meets the constraints the question "
               "states (none stated: the first draft alone)")
    max_turns = MAX_DRAFTS

    def make(self, pool: Pool) -> Policy:
        from trinity_cli.episode.schedules import DraftSchedule
        from trinity_cli.policies.fixed import FixedPolicy

        return FixedPolicy(DraftSchedule(pool.names, pool.names, FALLBACK))

    def rows(self, plan: BenchPlan) -> list[Row]:
        return [Row("drafts", "drafts", max_turns=plan.options.max_turns or self.turn_budget(), stream="fresh",
                    policy=self.make(plan.pool))]


DRAFTS = DraftsKind()
