"""Log-probabilities as an output of a call: the summary's layout (backends/confidence.py),
filling them into recorded replies without touching their keys (pool/pool.py), and carrying
the filled replies in recordings (recordings/fileformat.py, transfer.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from trinity_cli.backends import confidence
from trinity_cli.backends.scripted import ScriptedBackend
from trinity_cli.messages import ChatMessage, Completion, GenParams
from trinity_cli.pool.pool import Pool
from trinity_cli.pool.rollout_cache import RolloutCache
from trinity_cli.pool_config import load_pool
from trinity_cli.recordings import fileformat, transfer
from trinity_cli.recordings.fileformat import Entry

from .conftest import write_pool
from .test_recordings import _entry as recorded_entry

MESSAGES = [ChatMessage("user", "Solve: what is six times seven?")]


def test_the_summary_of_a_reply_s_tokens() -> None:
    lp = [-0.1] * 20 + [-2.0] * 4 + [-0.5] * 16
    stats = confidence.summarize(lp, [1.0] * len(lp))
    assert stats["v"] == 1 and stats["n"] == 40
    assert stats["mean"] == pytest.approx(sum(lp) / 40, abs=1e-4) and stats["min"] == -2.0
    assert stats["tail"] == pytest.approx(-0.5)  # the last 16 tokens
    # The worst window of 16 holds the four -2.0 tokens and twelve others.
    worst = min(sum(lp[i:i + 16]) / 16 for i in range(len(lp) - 15))
    assert stats["low"] == pytest.approx(worst, abs=1e-4) and stats["entropy"] == 1.0
    short = confidence.summarize([-1.0, -3.0], [0.5, 0.5])
    assert short["low"] == short["mean"] == short["tail"] == -2.0  # shorter than a window
    assert confidence.summarize([], []) == {"v": 1, "n": 0}


def _pool(tmp_path: Path, reply: str = "Answer: 42", **kw: object) -> tuple[Pool, ScriptedBackend]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = write_pool(tmp_path, {"name": "p", "models": [
        {"name": "m", "kind": "scripted", "rules": [{"match": "Solve", "reply": reply, "logprob": -0.25}]}]})
    config = load_pool(str(path))
    backend = ScriptedBackend(config.models[0])  # type: ignore[arg-type]
    return Pool(config, cache=RolloutCache(tmp_path / "cache"), backends={"m": backend}, **kw), backend


def _record_without_stats(pool: Pool, text: str = "Answer: 42") -> str:
    """Put in the pool's cache the reply a recording made before log-probabilities held."""
    params = pool.params("m")
    key = pool.cache_key("m", MESSAGES, params)
    assert key is not None and pool.cache is not None
    request = pool._request("m", MESSAGES, params)
    assert request is not None
    pool.cache.put(key, Completion(text, 5, 2, 0.5), request)
    return key


def test_a_recorded_reply_is_made_again_to_fill_its_log_probabilities_under_the_same_key(tmp_path: Path) -> None:
    pool, backend = _pool(tmp_path, fill_logprobs=True)
    key = _record_without_stats(pool)
    got = pool.chat("m", MESSAGES)
    assert len(backend.calls) == 1 and not got.cached and got.text == "Answer: 42"
    assert got.logprob_stats is not None and got.logprob_stats["mean"] == -0.25
    assert pool.cache_key("m", MESSAGES) == key  # an output never moves the key
    again = pool.chat("m", MESSAGES)
    assert again.cached and again.logprob_stats == got.logprob_stats and len(backend.calls) == 1
    assert again.latency_s == 0.5  # the recorded call's timing is kept


def test_without_fill_mode_or_in_replay_only_a_recorded_reply_is_served_as_it_is(tmp_path: Path) -> None:
    for kw in ({}, {"fill_logprobs": True, "replay_only": True}):
        pool, backend = _pool(tmp_path / str(len(kw)), **kw)  # type: ignore[arg-type]
        _record_without_stats(pool)
        got = pool.chat("m", MESSAGES)
        assert got.cached and got.logprob_stats is None and not backend.calls


def test_a_call_made_again_that_answers_otherwise_keeps_the_recorded_reply(tmp_path: Path, caplog) -> None:
    pool, backend = _pool(tmp_path, reply="Answer: 41", fill_logprobs=True)
    _record_without_stats(pool, "Answer: 42")
    got = pool.chat("m", MESSAGES)
    assert got.text == "Answer: 42" and got.logprob_stats == {"v": 1, "unmatched": True}
    assert "came out different" in caplog.text
    assert pool.chat("m", MESSAGES).cached and len(backend.calls) == 1  # not made a third time


def _entry(stats: dict | None) -> Entry:
    """A recorded reply (test_recordings' entry 1), filled in with `stats` when given (made
    again, so it took another time)."""
    entry = recorded_entry(1)
    if stats is None:
        return entry
    return replace(entry, value={**entry.value, "latency_s": 0.7, "logprob_stats": stats})


STATS = {"v": 1, "n": 2, "mean": -0.3, "min": -0.5, "tail": -0.3, "low": -0.3, "entropy": 0.4}


def test_a_filled_reply_is_appended_to_a_recording_and_read_in_place_of_the_old(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl.gz"
    old, filled = _entry(None), _entry(STATS)
    assert fileformat.fills(filled, old) and not fileformat.fills(old, filled)
    other = Entry(old.cache, old.key, old.request, {**filled.value, "text": "Answer: 7"})
    assert not fileformat.fills(other, old)  # another reply is no filling
    assert fileformat.append(path, [old]) == (1, 1)
    before = path.read_bytes()
    assert fileformat.append(path, [filled]) == (1, 1)  # one key, now filled
    assert path.read_bytes().startswith(before)  # the old bytes stay
    assert fileformat.append(path, [filled]) == (0, 1) and fileformat.append(path, [old]) == (0, 1)
    entries, refused = fileformat.read(path)
    assert not refused and [e.value.get("logprob_stats") for e in entries] == [STATS]


def test_import_fills_a_held_reply_in_and_a_held_filled_reply_counts_as_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home"))
    plain, filled = tmp_path / "plain", tmp_path / "filled"
    fileformat.append(transfer.calls_path(plain), [_entry(None)])
    fileformat.append(transfer.calls_path(filled), [_entry(STATS)])
    assert transfer.import_recording(plain).added["rollouts"] == 1
    result = transfer.import_recording(filled)
    assert result.filled == 1 and not result.conflicts
    cache = RolloutCache()
    try:
        got = cache.get(_entry(None).key)
        assert got is not None and got.logprob_stats == STATS and got.recorded
    finally:
        cache.close()
    again = transfer.import_recording(plain)  # the older recording: same reply, nothing to do
    assert again.held["rollouts"] == 1 and not again.conflicts and again.filled == 0


def test_completions_written_before_the_field_read_back() -> None:
    old = {"text": "x", "prompt_tokens": 1, "completion_tokens": 1, "latency_s": 0.1, "finish_reason": "stop"}
    assert Completion.from_dict(old).logprob_stats is None
    stats = confidence.constant(-0.1, 3)
    done = replace(Completion.from_dict(old), logprob_stats=stats)
    assert Completion.from_dict(done.to_dict()).logprob_stats == stats
    assert math.isclose(stats["mean"], -0.1) and GenParams().seed == 0
