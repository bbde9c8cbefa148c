"""API pools in parallel, against a real (deliberately slow) HTTP server on 127.0.0.1:
--parallel overlaps the calls, `max_concurrency` caps what the server sees, 429s are still
retried, and bench.json does not depend on any of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trinity_cli.bench.options import BenchOptions
from trinity_cli.bench.runner import bench

from .conftest import write_pool
from .slow_openai import SlowOpenAI
from .test_parallel import strip


def task_file(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Question {i}: what is six times seven?",
                                         "answer": 42, "scorer": "numeric"}) + "\n" for i in range(80)))
    return tasks


def run_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: SlowOpenAI, models: list[dict],
              parallel: int, label: str, gather: int = 0) -> dict:
    """`bench --systems single` in a fresh home: one call per model and item (`gather`: the
    server holds each call until that many are in: SlowOpenAI)."""
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / f"home-{label}"))
    pool = write_pool(tmp_path, {"name": "api", "models": models}, name=f"{label}.yaml")
    server.reset()
    server.gather = gather
    options = BenchOptions(pool=str(pool), tasks=f"file:{task_file(tmp_path)}:test", systems=["single"],
                           random_seeds=0, max_turns=1)
    data = json.loads((bench(options, parallel=parallel).run_dir / "bench.json").read_text())
    data["pool"].pop("source")
    data["options"].pop("pool")
    return data


@pytest.mark.slow
def test_parallel_16_overlaps_api_calls_and_max_concurrency_caps_them(tmp_path: Path, monkeypatch) -> None:
    with SlowOpenAI(delay_s=0.05) as server:
        serial = run_bench(tmp_path, monkeypatch, server, server.models(2, max_concurrency=16), 1, "serial")
        assert server.most == 1
        n_calls = server.requests
        assert n_calls == 2 * len(serial["items"]) >= 20

        wide = run_bench(tmp_path, monkeypatch, server, server.models(2, max_concurrency=16), 16, "wide", gather=8)
        assert server.requests == n_calls
        assert server.most >= 8  # serial: 1; the 16 episodes in flight wait on the server together

        capped = run_bench(tmp_path, monkeypatch, server, server.models(1, max_concurrency=3), 16, "capped")
        assert 2 <= server.most <= 3

    assert strip(wide) == strip(serial)
    assert capped["stats"]["backend_calls"] == len(capped["items"])


@pytest.mark.slow
def test_rate_limited_calls_are_retried_under_concurrency(tmp_path: Path, monkeypatch) -> None:
    with SlowOpenAI(delay_s=0.02) as calm:
        reference = run_bench(tmp_path, monkeypatch, calm, calm.models(2), 1, "calm")
    with SlowOpenAI(delay_s=0.02, fail_every=4) as busy:
        # Every 4th request of the server is refused, whichever call it belongs to, so one call
        # can be refused several times in a row: with 12 retries that happens with chance 4^-13.
        limited = run_bench(tmp_path, monkeypatch, busy, busy.models(2, max_concurrency=8, max_retries=12), 8,
                            "busy")
        assert busy.refused > 0 and busy.most > 1
    assert not any(e["error"] for e in limited["episodes"])
    assert strip(limited) == strip(reference)
