"""The rules a decision source declares and the turn loop (episode/loop.py) obeys: which role
acts after the source's pick, when the episode ends early, and which answer is final. The
loop decides none of them itself.

`SourceRules` holds the rules every fixed schedule and head plays by; a source overrides what
it decides otherwise (a reader, coordinator/reader.py, decides stop and final answer).

    acting_role(...)    the role that acts this turn and why it differs from the source's
                        pick (None: it does not; a source's `label`, where it has one, then
                        marks the turn instead: a conductor's fallback). Applied in this order:
        1. A Thinker's `Next: <role>` suggestion replaces the role of the following turn;
           the source still picks the model.
        2. A Verifier picked before any answer exists acts as a Worker instead (there is
           nothing to verify; the turn is not wasted).
        3. After the latest proposed answer failed the task's checks (code: its shown
           examples; free-form: the constraints the request states), a Verifier picked then
           acts as a Worker: its verdict is known already (an ACCEPT of a failing answer is
           not taken). Without this rule a head that keeps picking Verifiers re-judges the
           same failing code until the turns run out. On free-form it revises the answer,
           shown what failed; on code it writes from the task alone (`asked_alone`).
        4. On the last turn, if no answer exists yet, the role is Worker, so every episode
           ends with an answer. The last turn is turn `max_turns`, or the turn after the one
           that reached the token or cost budget (`spent`).
    asked_alone(...)    whether the acting role is asked from the task alone, shown no turns:
                        when the pick says so (`Decision.alone`: sc, agree), a Verifier of a kind
                        compared by value (turns/rules.asked_alone), and, after an answer that
                        failed its checks on a kind that retries from the task alone
                        (`AnswerKind.retry_from_task_alone`: code), the next Worker (rule 3:
                        shown the failing code, members repeat it).
    stop(turns, kind)   after each turn: the index of the turn whose reply ends the episode
                        now (stop_reason `stop_reason`, "agreed"), or None to go on. With
                        `stop_when_agreed` (the fixed `agree`): the first agreement
                        (turns/settle.agreement; on code, the first code passing its shown
                        examples). With `stop_when_checks_settle` (rule 5, every head): on a
                        kind whose checks are its whole judgement (the pair's other half,
                        `AnswerKind.passing_checks_settle`: code), the first answer passing them.
    final(turns, kind)  at the end without an ACCEPT or a stop: the episode's answer, the
                        plurality of votes (turns/settle.settled_answer).
    can_pick(models, excluded)
                        6. A member whose call failed (Turn.error: episode/turn.py) is left
                        out of the rest of the episode, as the members whose context cannot
                        hold the task are; once no member the source picks from is left, the
                        episode ends (stop_reason "failed"). Every member of the pool, or a
                        fixed schedule's own (episode/schedules.py).

`kind` is the episode's `AnswerKind` (answer_kinds/base.py), the object episode/loop.py
resolved once when the episode started.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.messages import Decision, Role, Turn
from trinity_cli.turns import rules, settle


class SourceRules:
    """The rules of a decision source (module docstring)."""

    # Stop at the first agreement (the fixed `agree`: turns/settle.agreement).
    stop_when_agreed: bool = False
    # Rule 5 (every head): stop at the first answer whose passing checks settle it, on a kind
    # that says they do (`AnswerKind.passing_checks_settle`: code's shown examples).
    stop_when_checks_settle: bool = False
    stop_reason = "agreed"  # the Transcript.stop_reason of an episode `stop` ends
    label: str | None = None  # Turn.override of this source's turns where no rule overrode the pick

    def acting_role(self, decision: Decision, suggested: Role | None, proposed: Turn | None, last: bool,
                    spent: str | None, kind: AnswerKind) -> tuple[Role, str | None]:
        """Rules 1-4 (module docstring): the acting role and why it differs from the pick."""
        role, override = decision.role, None
        if suggested is not None and suggested is not role:
            role, override = suggested, f"thinker suggested {suggested.value}"
        if role is Role.VERIFIER and proposed is None:
            role, override = Role.WORKER, "no answer to verify yet: verifier acts as worker"
        if role is Role.VERIFIER and proposed is not None and proposed.examples_passed is False:
            role, override = Role.WORKER, kind.failed_check_override
        if last and proposed is None and role is not Role.WORKER:
            why = "last turn" if spent is None else f"{spent.replace('_', ' ')} spent"
            role, override = Role.WORKER, f"{why} and no answer yet: worker"
        return role, override if override is not None else self.label

    def asked_alone(self, decision: Decision, role: Role, proposed: Turn | None, kind: AnswerKind) -> bool:
        """Whether the acting `role` is asked from the task alone (module docstring); after a
        failed check only on a kind that retries from the task alone (`retry_from_task_alone`)."""
        retry = kind.retry_from_task_alone and proposed is not None and proposed.examples_passed is False
        return rules.asked_alone(role, kind, decision.alone) or (retry and role is Role.WORKER)

    def stop(self, turns: Sequence[Turn], kind: AnswerKind) -> int | None:
        if self.stop_when_agreed or (self.stop_when_checks_settle and kind.passing_checks_settle):
            return settle.agreement(turns, kind)
        return None

    def final(self, turns: Sequence[Turn], kind: AnswerKind) -> str | None:
        return settle.settled_answer(turns, kind)

    def can_pick(self, models: Sequence[str], excluded: Collection[str]) -> bool:
        """Rule 6 (module docstring): whether a member of `models` this source picks from is
        left after `excluded`."""
        return any(m not in excluded for m in models)
