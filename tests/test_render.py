"""What render/terminal.py prints: footers, and model text shown literally."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from trinity_cli.messages import Transcript
from trinity_cli.render import console, terminal


@pytest.fixture
def screens(monkeypatch: pytest.MonkeyPatch) -> dict[str, io.StringIO]:
    """render's two consoles, writing plain text to buffers."""
    buffers = {"out": io.StringIO(), "err": io.StringIO()}
    monkeypatch.setattr(console, "out", Console(file=buffers["out"], width=200, highlight=False, soft_wrap=True))
    monkeypatch.setattr(console, "err", Console(file=buffers["err"], width=200, highlight=False))
    return buffers


@pytest.mark.parametrize(
    "stop_reason,accepted,words",
    [
        ("accepted", True, "accepted by a verifier"),
        ("max_turns", False, "turn budget spent"),
        ("token_budget", False, "token budget spent"),
        ("cost_budget", False, "cost budget spent"),
    ],
)
def test_footer_names_what_ended_the_episode(screens, stop_reason: str, accepted: bool, words: str) -> None:
    transcript = Transcript(task="Q", stop_reason=stop_reason, accepted=accepted)
    terminal.ask_footer("run-3", transcript, 1.0)
    shown = screens["err"].getvalue()
    assert words in shown
    assert all(other not in shown for other in terminal.STOP_REASONS.values() if other != words)

    record = {"id": "run-3", "pool": {"name": "p", "models": []}, "head": {"name": "h"}, "seed": 0,
              "transcript": {**transcript.to_dict(), "answer": "42"}}
    terminal.replay_ask(record)
    assert f"Answer ({words})" in screens["out"].getvalue()
