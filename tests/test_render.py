"""What render/terminal.py prints: footers, and model text shown literally."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from trinity_cli.messages import Transcript
from trinity_cli.render import console, progress, terminal


@pytest.fixture
def screens(monkeypatch: pytest.MonkeyPatch) -> dict[str, io.StringIO]:
    """render's two consoles, writing plain text to buffers."""
    buffers = {"out": io.StringIO(), "err": io.StringIO()}
    monkeypatch.setattr(console, "out", Console(file=buffers["out"], width=200, highlight=False, soft_wrap=True))
    monkeypatch.setattr(console, "err", Console(file=buffers["err"], width=200, highlight=False))
    return buffers


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """render/progress.py's clock, set by the test (clock[0] seconds), and a plain line at every update."""
    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    monkeypatch.setenv("TRINITY_PROGRESS_EVERY", "0")
    return now


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


def test_plain_progress_counts_time_left_at_the_recent_pace_not_the_replays(screens, clock) -> None:
    """A resumed bench replays its 400 recorded episodes in 40 s, then plays a new one a minute:
    after 20 minutes of those, the time left for the other 1,380 is at a minute each (23 h),
    not at the pace since the process started (which promised 1h08m)."""
    bar = progress.PlainProgress("run-6 bench")
    for done in range(1, 401):
        clock[0] = done * 0.1
        bar.update(done, 1800)
    for minute in range(1, 21):
        clock[0] = 40 + 60 * minute
        bar.update(400 + minute, 1800)
    last = screens["err"].getvalue().splitlines()[-1]
    assert last == "run-6 bench: 420/1800 episodes · 20m40s elapsed · about 23h00m left"
    clock[0] += 1800  # nothing finished for 30 minutes: the whole process's pace again
    bar.update(420, 1800)
    last = screens["err"].getvalue().splitlines()[-1]
    whole_pace = progress._duration(3040 / 420 * 1380)
    assert last == f"run-6 bench: 420/1800 episodes · 50m40s elapsed · about {whole_pace} left"
    # The live bar on a terminal looks back as far (Rich's default 30 s would see no episode end).
    assert progress._bar("{task.description}", quiet=True).speed_estimate_period == 900


def test_plain_progress_counts_the_pace_from_the_first_computed_episode(screens, clock) -> None:
    """Told how many calls were computed so far, the lines leave the replays out of the pace at
    once: three minutes into new episodes (one a minute) the other 1,397 take a minute each,
    not the 5 minutes that 403 episodes in 3m40s would suggest."""
    bar = progress.PlainProgress("run-6 bench")
    for done in range(1, 401):
        clock[0] = done * 0.1
        bar.update(done, 1800, computed=0)
    assert "left" not in screens["err"].getvalue()  # nothing computed yet: no pace to go by
    for minute in range(1, 4):
        clock[0] = 40 + 60 * minute
        bar.update(400 + minute, 1800, computed=2 * minute)
    last = screens["err"].getvalue().splitlines()[-1]
    assert last == "run-6 bench: 403/1800 episodes · 3m40s elapsed · about 23h17m left"
    bar.update(404, 1800, computed=6)  # a replay among new ones counts: the pace is of all episodes
    assert bar.origin == (40.0, 400)


def test_evolve_progress_counts_whole_generations_and_tells_no_time_while_validating(screens, clock) -> None:
    """A budget of 2,000 at 768 episodes a generation plays 1,536: the lines count to that; a
    validation episode does not advance the training count, so its lines say no time left
    (run-75's said "about 106h38m left" there)."""
    from trinity_cli import events

    shown = progress.EvolveProgress()
    shown(events.EvolveStarted(run="run-75", budget=2000, spent=768, popsize=8, n_params=3462, per_gen=768,
                               parallel=1, ray=False, ends_at=1536))
    assert "(the budget of 2000 holds 2)" in screens["err"].getvalue()
    for i in range(1, 11):
        clock[0] = 60.0 * i
        shown(events.EvolveEpisodeFinished(kind="train", in_flight=0, pool_calls=3 * i, cache_hits=i, tokens=0))
    last = screens["err"].getvalue().splitlines()[-1]
    assert "778/1536 episodes" in last and "left" in last
    clock[0] += 3600
    shown(events.EvolveEpisodeFinished(kind="val", in_flight=0, pool_calls=40, cache_hits=10, tokens=0))
    last = screens["err"].getvalue().splitlines()[-1]
    assert "778/1536 episodes" in last and "validating" in last and "left" not in last


URL = "https://example.org/a/very/long/path/that/no/terminal/of/eighty/columns/holds/on/one/line/index.html"


def _inside(text: str) -> str:
    """What the panels of a replay hold, their borders and padding taken off, lines joined by
    spaces (a folded token is joined again by `"".join` in the test)."""
    inner = []
    for line in text.splitlines():
        core = line.strip().strip("│╭╮╰╯─").strip()
        inner.append(core.strip("│").strip())
    return " ".join(inner)


def test_a_replay_wraps_every_prompt_and_reply_inside_its_panels_at_80_columns(monkeypatch) -> None:
    """`trinity inspect RUN` at 80 columns: every word of a long prompt line, a long reply and a
    long unbroken token is shown (render/console.py: panels printed without soft wrap)."""
    from trinity_cli.messages import ChatMessage, Role, Turn

    buffer = io.StringIO()
    # As render/console.py makes `out`: soft-wrapping, here 80 columns wide.
    monkeypatch.setattr(console, "out", Console(file=buffer, width=80, highlight=False, soft_wrap=True, emoji=False))
    prompt = ("You are one member of a team of assistants that solve tasks together. Follow the plan the "
              "thinker wrote, step by step, and end with the final answer on a line of its own. " * 2).strip()
    reply = " ".join(f"step{i}-of-the-plan" for i in range(60)) + " see " + URL
    turn = Turn(index=0, model="qwen", role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[1.0],
                role_probs=[0.0, 1.0, 0.0], messages=[ChatMessage("system", prompt), ChatMessage("user", URL)],
                reply=reply, prompt_tokens=10, completion_tokens=20, latency_s=1.0, coordinator_s=0.01)
    workflow = {"conductor": "qwen", "topology": "chain", "turn": 0, "steps": [
        {"model": "qwen", "access": [], "turns": [0], "subtask": "Plan " + " ".join(f"sub{i}" for i in range(40))}]}
    record = {"id": "run-1", "pool": {"name": "p", "models": ["qwen"]}, "head": {"name": "h"}, "seed": 0,
              "answer": "42", "transcript": {"task": "What is 6*7?", "turns": [turn.to_dict()], "accepted": False,
                                             "stop_reason": "max_turns", "workflow": workflow}}
    terminal.replay_ask(record)
    shown = buffer.getvalue()
    assert all(len(line) <= 80 for line in shown.splitlines()), shown
    words = _inside(shown).split()
    for text in (prompt, reply, workflow["steps"][0]["subtask"]):
        for word in text.split():
            if word != URL:
                assert word in words, (word, shown)
    assert _inside(shown).replace(" ", "").count(URL) == 2, shown  # folded, whole: in the prompt and the reply
