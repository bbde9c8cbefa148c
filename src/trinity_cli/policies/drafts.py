"""The `drafts` policy: drafts from the question alone, one at a time, until one meets the
question's stated constraints (episode/schedules.py `DraftSchedule`; bench/drafts.py's
`until-pass@N/<fallback>` row, which scores it from a recorded matrix).

A question that states no constraint trinity reads gets the first member's draft and nothing
more, one call at the pace of one plain draft, unless that draft degenerates (repeats past the
limits: tasks/repeats.py). The first draft streams as it is written; a later one is drawn
only when a check failed. Each draft is asked as a person asks (a free-form
draft: the request alone under a plain system line, answer_kinds/freeform.py), so what prints
is that reply, cleaned (tasks/answer_body.py).

What the validation items chose (docs/freeform.md, 100 IFEval validation items, each member's
greedy draft and a fresh attempt): members are asked in `FIRST_STYLES` order (a `direct` member
first: its plain draft met every instruction on 36 items as printed, a `reason` member's on 31),
and `MAX_DRAFTS` = 4: drafting on until one passes trinity's checks, at most four drafts, met
every instruction on 44 (8 items won, none lost against the first draft alone, p = 0.008) at
2.31 calls. `--max-turns N` draws up to N drafts (1: the first draft alone); without a passing
one the answer is the `FALLBACK` rule's pick among those that do not degenerate
(turns/choose.py).
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
FIRST_STYLES = ("direct", "reason")  # members of these styles first, in this order; then the pool's order


def draw_order(pool: Pool) -> list[str]:
    """The pool's members in the order drafts are drawn: by `FIRST_STYLES`, then pool order."""
    rank = {style: i for i, style in enumerate(FIRST_STYLES)}
    return sorted(pool.names, key=lambda name: rank.get(pool.style(name), len(rank)))


class DraftsKind(PolicyKind):
    name = "drafts"
    summary = ("drafts from the question alone until one meets the constraints the question states and does not "
               "degenerate into repeats (at most --max-turns, by default 4)")
    max_turns = MAX_DRAFTS
    told = False

    def make(self, pool: Pool) -> Policy:
        from trinity_cli.episode.schedules import DraftSchedule
        from trinity_cli.policies.fixed import FixedPolicy

        return FixedPolicy(DraftSchedule(pool.names, draw_order(pool), FALLBACK, told=self.told))

    def rows(self, plan: BenchPlan) -> list[Row]:
        # stream "fresh" for both kinds: the same episode seeds, so a told row's first draft is
        # the drafts row's (one cached call) and the two rows are paired item by item
        return [Row(self.name, self.name, max_turns=plan.options.max_turns or self.turn_budget(), stream="fresh",
                    policy=self.make(plan.pool))]


class DraftsToldKind(DraftsKind):
    """`drafts`, but a draft after one that failed its checks is that draft redrawn by the
    next member, shown it and told in the checks' words what failed (`Decision.told`)."""

    name = "drafts-told"
    summary = ("drafts until one meets the question's stated constraints, each redraw shown the draft before it and "
               "told what failed (at most --max-turns, by default 4)")
    told = True


DRAFTS = DraftsKind()
DRAFTS_TOLD = DraftsToldKind()
