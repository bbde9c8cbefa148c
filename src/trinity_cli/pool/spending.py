"""Spending caps (`limit_spending`, the one-command evolve's --max-calls and --max-usd): calls
made to a model (not served from a cache) and their dollars are counted over every pool of the
process while a cap is set; a call that would start after the cap is reached raises
`SpendingCapReached` instead (`check`, before each model call; `charge`, after it: pool.py).
What was made is cached, so the same command with a higher cap goes on from there."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from trinity_cli.errors import SpendingCapReached, option
from trinity_cli.messages import Completion


@dataclass
class Spending:
    """Model calls made and their dollars while a cap is set."""

    max_calls: int | None = None
    max_usd: float | None = None
    calls: int = 0
    usd: float = 0.0

    def check(self) -> None:
        if self.max_calls is not None and self.calls >= self.max_calls:
            raise SpendingCapReached(f"{self.calls} model calls made, the cap {option('max_calls')} {self.max_calls}",
                                     "what was made is cached: run the same command with a higher cap to go on")
        if self.max_usd is not None and self.usd >= self.max_usd:
            raise SpendingCapReached(f"${self.usd:.4f} spent on model calls, the cap {option('max_usd')} "
                                     f"{self.max_usd}",
                                     "what was made is cached: run the same command with a higher cap to go on")

    def charge(self, completion: Completion) -> None:
        self.calls += 1
        self.usd += completion.cost_usd or 0.0


_SPENDING = Spending()
_SPENDING_LOCK = threading.Lock()


def check() -> None:
    """Raise `SpendingCapReached` when the cap in force is reached (before a model call)."""
    with _SPENDING_LOCK:
        _SPENDING.check()


def charge(completion: Completion) -> None:
    """Count one model call (and its dollars) against the cap in force."""
    with _SPENDING_LOCK:
        _SPENDING.charge(completion)


@contextmanager
def limit_spending(max_calls: int | None = None, max_usd: float | None = None) -> Iterator[Spending]:
    """Cap the model calls (and dollars) of every pool in this process until the block ends."""
    global _SPENDING
    with _SPENDING_LOCK:
        before, _SPENDING = _SPENDING, Spending(max_calls, max_usd)
    try:
        yield _SPENDING
    finally:
        with _SPENDING_LOCK:
            _SPENDING = before
