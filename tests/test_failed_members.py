"""A member whose backend raises is a failed turn, not a failed command (issue 76): the pool
names the member and its kind and caches nothing (pool/pool.py), the turn records the error
(episode/turn.py), the episode goes on with the others or ends when none is left (rule 6,
turns/source_rules.py), `ask` fails only when no member answered and `bench` saves its run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from trinity_cli import cli
from trinity_cli.episode.loop import run_episode
from trinity_cli.episode.schedules import FixedSchedule, agree
from trinity_cli.errors import MemberFailed
from trinity_cli.messages import ChatMessage, GenParams, Role, Transcript
from trinity_cli.pool.pool import Pool
from trinity_cli.pool.rollout_cache import RolloutCache
from trinity_cli.pool_config import load_pool
from trinity_cli.runs.store import RunStore

from .conftest import SOLVER_RULES, run_main, write_pool
from .test_episode import FixedCoordinator, make_head

BOOM = "toy backend exploded on purpose"


def failing_pool(tmp_path: Path, good: int = 2) -> Path:
    """A pool whose first member `bad` raises on every call, then `good` members that answer 84."""
    models = [{"name": "bad", "kind": "scripted", "raises": BOOM}]
    models += [{"name": f"m{i}", "kind": "scripted", "rules": SOLVER_RULES} for i in range(good)]
    return write_pool(tmp_path, {"name": "shaky", "models": models})


def test_the_pool_names_a_failing_member_and_caches_nothing_of_it(tmp_path: Path) -> None:
    pool = Pool(load_pool(str(failing_pool(tmp_path))), cache=RolloutCache(tmp_path / "c"))
    messages = [ChatMessage("user", "What is 12*7?")]
    for _ in range(2):
        with pytest.raises(MemberFailed) as info:
            pool.chat("bad", messages, GenParams())
        assert str(info.value) == f"member 'bad' (kind scripted) failed: RuntimeError: {BOOM}"
        assert (info.value.member, info.value.kind) == ("bad", "scripted")
    assert len(pool.backend("bad").calls) == 2  # asked again: nothing was cached
    assert pool.cache is not None and pool.cache.get(pool.cache_key("bad", messages, GenParams())) is None
    assert pool.stats.calls == 0


def test_a_failed_turn_is_recorded_and_the_episode_goes_on_without_that_member(tmp_path: Path) -> None:
    pool = Pool(load_pool(str(failing_pool(tmp_path))))
    transcript = run_episode("What is 12*7?", pool, agree(pool.names), max_turns=4)
    failed, *answered = transcript.turns
    assert (failed.model, failed.error, failed.reply) == ("bad", f"RuntimeError: {BOOM}", "")
    assert failed.completion_tokens == 0 and not failed.vote and failed.finish_reason is None
    assert [t.model for t in answered] == ["m1", "m0"] and all(t.error is None for t in answered)
    assert transcript.stop_reason == "agreed" and "84" in (transcript.answer or "")
    assert transcript.failures() == {"bad": f"RuntimeError: {BOOM}"}
    assert len(pool.backend("bad").calls) == 1  # left out after its failure
    assert Transcript.from_dict(transcript.to_dict()).turns[0].error == failed.error


def test_a_head_that_picks_the_failing_member_is_routed_to_the_others(tmp_path: Path) -> None:
    pool = Pool(load_pool(str(failing_pool(tmp_path))))
    head = make_head(pool.names, [50, 0, 0], [0, 50, 0])  # bad, as a Worker
    transcript = run_episode("What is 12*7?", pool, FixedCoordinator(head, np.array([1.0, 0, 0, 0])), max_turns=3)
    assert transcript.turns[0].error is not None and transcript.turns[0].role is Role.WORKER
    assert all(t.model != "bad" for t in transcript.turns[1:]) and "84" in (transcript.answer or "")


def test_an_episode_ends_when_every_member_it_can_ask_failed(tmp_path: Path) -> None:
    pool = Pool(load_pool(str(failing_pool(tmp_path))))
    selfloop = FixedSchedule(pool.names, "bad", (Role.WORKER, Role.VERIFIER))
    transcript = run_episode("What is 12*7?", pool, selfloop, max_turns=4)
    assert len(transcript.turns) == 1 and transcript.stop_reason == "failed" and transcript.answer is None
    (tmp_path / "alone").mkdir()
    alone = Pool(load_pool(str(failing_pool(tmp_path / "alone", good=0))))
    transcript = run_episode("What is 12*7?", alone, agree(alone.names), max_turns=4)
    assert len(transcript.turns) == 1 and transcript.stop_reason == "failed" and transcript.answer is None


def test_ask_answers_from_the_others_and_shows_the_failed_turn(tmp_path: Path) -> None:
    pool = failing_pool(tmp_path)
    result = CliRunner().invoke(cli.app, ["ask", "What is 12*7?", "--pool", str(pool), "--mode", "agree",
                                          "--no-warm"])
    assert result.exit_code == 0, result.output
    assert "84" in result.stdout
    assert f"failed: RuntimeError: {BOOM}" in " ".join(result.stderr.split())  # however Rich wrapped it
    (run,) = RunStore().list()
    record = RunStore().load(run.id)
    assert record["transcript"]["turns"][0]["error"] == f"RuntimeError: {BOOM}"
    shown = CliRunner().invoke(cli.app, ["inspect", run.id])
    assert shown.exit_code == 0 and "the call failed" in shown.stdout and BOOM in " ".join(shown.stdout.split())


def test_ask_with_no_member_answering_is_one_line_naming_the_member(tmp_path: Path, monkeypatch, capsys) -> None:
    pool = failing_pool(tmp_path, good=0)
    code, out, err = run_main(["ask", "What is 12*7?", "--pool", str(pool), "--mode", "agree", "--no-warm", "-q"],
                              monkeypatch, capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"error: member 'bad' (kind scripted) failed: RuntimeError: {BOOM}")
    assert "--exclude" in err and "unexpected" not in err and len(err.strip().splitlines()) == 1
    assert RunStore().list() == []  # no answer: nothing saved


def test_bench_completes_and_saves_its_run_with_the_failures_noted(tmp_path: Path, monkeypatch, capsys) -> None:
    pool = failing_pool(tmp_path)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Q{i}: what is 12*7?", "answer": 84,
                                         "scorer": "numeric"}) + "\n" for i in range(12)))
    code, out, err = run_main(["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test", "--systems",
                               "single,agree", "--random-seeds", "0", "--json", "-q"], monkeypatch, capsys)
    assert code == 0, err
    data = json.loads(out)
    results = data["results"]
    assert results["single:bad"]["overall"]["accuracy"] == 0.0
    assert results["agree"]["overall"]["accuracy"] == 1.0 and results["single:m0"]["overall"]["accuracy"] == 1.0
    (note,) = [n for n in data["notes"] if "'bad'" in n]
    items = len(data["items"])  # one failed call a system and item: single:bad's, and agree's first
    assert note.startswith(f"member 'bad' (kind scripted): {2 * items} calls failed") and BOOM in note
    (run,) = RunStore().list()
    assert run.kind == "bench" and run.status == "done"
    episodes = [json.loads(line) for line in (RunStore().path(run.id) / "episodes.jsonl").read_text().splitlines()]
    failed = [e for e in episodes if any(t["error"] for t in e["transcript"]["turns"])]
    assert len(failed) == 2 * items and {e["system"] for e in failed} == {"single:bad", "agree"}
