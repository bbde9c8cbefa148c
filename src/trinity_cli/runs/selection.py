"""Who did what: the Share of a list of (model, acting role) turns. Bench's and evolve's
selection shares are both counted here, and both reports draw them (runs/reports.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from trinity_cli.messages import ROLES


def turn_shares(turns: Sequence[tuple[str, str]], models: Sequence[str]) -> dict[str, Any]:
    """The Share of a list of (model, acting role) turns: {"models": {model: share},
    "roles": {role: share}, "pairs": {model: {role: share}}}, each a share of all the turns,
    in pool and role order (0.0 everywhere when there are none)."""
    role_names = [r.value for r in ROLES]
    total = len(turns)
    m_counts = Counter(model for model, _ in turns)
    r_counts = Counter(role for _, role in turns)
    p_counts = Counter((model, role) for model, role in turns)

    def share(n: int) -> float:
        return n / total if total else 0.0

    return {"models": {m: share(m_counts[m]) for m in models},
            "roles": {r: share(r_counts[r]) for r in role_names},
            "pairs": {m: {r: share(p_counts[(m, r)]) for r in role_names} for m in models}}
