"""How an episode ends early and which answer is final: rules a decision source declares
(episode/loop.py asks its source, never decides itself).

`Endings` is the declaration every decision source carries; its defaults are the rules
every fixed schedule and head has played by:
    stop(turns, kind)   after each turn: the index of the turn whose reply ends the episode
                        now ("agreed"), or None to go on. With `stop_when_agreed` (the fixed
                        `agree`): the first agreement (turns/settle.agreement; on code, the
                        first code passing its shown examples). With `stop_when_code_passes`
                        (rule 5, every head): on code only, the first code passing them.
    final(turns, kind)  at the end without an ACCEPT or a stop: the episode's answer, the
                        plurality of votes (turns/settle.settled_answer).
A policy that decides these itself (a reader: coordinator/reader.py) overrides the two
methods; the loop has no other early ending than a Verifier's ACCEPT and the budgets.
"""

from __future__ import annotations

from collections.abc import Sequence

from trinity_cli.messages import Turn
from trinity_cli.turns import settle


class Endings:
    """The ending rules of a decision source (module docstring)."""

    stop_when_agreed: bool = False
    stop_when_code_passes: bool = False

    def stop(self, turns: Sequence[Turn], kind: str | None) -> int | None:
        if self.stop_when_agreed or (kind == "code" and self.stop_when_code_passes):
            return settle.agreement(turns, kind)
        return None

    def final(self, turns: Sequence[Turn], kind: str | None) -> str | None:
        return settle.settled_answer(turns, kind)
