"""`ask`, `serve` and `bench` play a head with the turn budget it was evolved with (its manifest's
training max_turns) unless --max-turns or a request's `max_turns` says otherwise; heads
that record none get 5. `bench` plays self-loops and random routing at the first head's budget.

The pool never accepts (no two calls give the same answer, so no Verifier agrees), so an
episode plays its whole budget and the number of turns is the budget played."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from trinity_cli.ask import AskOptions
from trinity_cli.ask.answer import ask
from trinity_cli.bench.options import BenchOptions
from trinity_cli.bench.runner import bench
from trinity_cli.coordinator import head as head_mod
from trinity_cli.coordinator.backbone_refs import describe
from trinity_cli.coordinator.head import DEFAULT_MAX_TURNS, turn_budget
from trinity_cli.coordinator.policy import versions
from trinity_cli.runs.reports import bench_view
from trinity_cli.runs.store import RunStore
from trinity_cli.serve import create_app
from trinity_cli.serve.service import ServeOptions

from .conftest import run_main, write_pool


def never_accept(i: int) -> list[dict]:
    """Member i's rules: every answer its own number ("i" then the call's seed), so no two
    answers of an episode agree."""
    return [{"match": "Write the plan or critique now", "reply": "Plan: multiply.\nNext: worker"},
            {"match": "Solve the task now", "reply": f"Answer: {i + 1}{{seed}}"}]


def make_head(directory: Path, max_turns: int | None) -> Path:
    """A trained head for the scripted pool (hash backbone), recording `max_turns` as its
    training budget (None: no training record, like a hand-made head)."""
    fingerprint, _ = describe("hash:16")
    info = {"ref": "hash:16", "fingerprint": fingerprint, "hidden_size": 16}
    head = head_mod.untrained("scripted", ["m0", "m1", "m2"], info, 16)
    head.weights[:] = np.random.default_rng(0).normal(size=head.weights.shape)
    head.manifest.update(name=directory.name, trained=True, **versions())
    if max_turns is not None:
        head.manifest["training"] = {"max_turns": max_turns, "budget": 8}
    head.save(directory)
    return directory


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    models = [{"name": f"m{i}", "kind": "scripted", "rules": never_accept(i), "default": f"default reply from m{i}"}
              for i in range(3)]
    return write_pool(tmp_path, {"name": "scripted", "models": models})


def test_turn_budget_prefers_the_option_then_the_head(tmp_path: Path) -> None:
    trained = head_mod.Head.load(make_head(tmp_path / "two", 2))
    bare = head_mod.Head.load(make_head(tmp_path / "bare", None))
    assert trained.trained_max_turns == 2 and bare.trained_max_turns is None
    assert turn_budget(None, trained) == 2 and turn_budget(7, trained) == 7
    assert turn_budget(None, bare) == DEFAULT_MAX_TURNS == 5
    bad = head_mod.Head(trained.weights, {**trained.manifest, "training": {"max_turns": True}})
    assert bad.trained_max_turns is None  # a boolean is not a turn budget


def test_ask_uses_the_heads_trained_max_turns(tmp_path: Path, pool: Path) -> None:
    head = str(make_head(tmp_path / "two", 2))
    result = ask("What is 12*7?", AskOptions(pool=str(pool), head=head))
    assert len(result.transcript.turns) == 2 and result.record["max_turns"] == 2
    told = ask("What is 12*7?", AskOptions(pool=str(pool), head=head, max_turns=4))
    assert len(told.transcript.turns) == 4 and told.record["max_turns"] == 4
    bare = ask("What is 12*7?", AskOptions(pool=str(pool), head=str(make_head(tmp_path / "bare", None))))
    assert len(bare.transcript.turns) == 5 and bare.record["max_turns"] == 5
    untrained = ask("What is 12*7?", AskOptions(pool=str(pool), head="untrained"))
    assert untrained.record["max_turns"] == 5


def test_ask_command_defaults_to_the_heads_budget(tmp_path: Path, pool: Path, monkeypatch, capsys) -> None:
    head = str(make_head(tmp_path / "three", 3))
    base = ["ask", "What is 12*7?", "--pool", str(pool), "--head", head, "--json", "-q"]
    code, out, err = run_main(base, monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["max_turns"] == 3 and len(json.loads(out)["transcript"]["turns"]) == 3
    code, out, err = run_main([*base, "--max-turns", "1"], monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["max_turns"] == 1


def served_turns(client: TestClient, **body: Any) -> tuple[int, int]:
    """(turns played, max_turns recorded) of one served request."""
    response = client.post("/v1/chat/completions", json={
        "model": "trinity", "messages": [{"role": "user", "content": "What is 12*7?"}], **body})
    assert response.status_code == 200, response.text
    record = RunStore().load(response.headers["X-Trinity-Run"])
    return len(response.json()["trinity"]["turns"]), record["max_turns"]


def test_serve_uses_the_heads_trained_max_turns(tmp_path: Path, pool: Path) -> None:
    head = str(make_head(tmp_path / "two", 2))
    with TestClient(create_app(ServeOptions(pool=str(pool), head=head))) as client:
        assert served_turns(client) == (2, 2)
        assert served_turns(client, max_turns=3) == (3, 3)  # the request's own wins
    with TestClient(create_app(ServeOptions(pool=str(pool), head=head, max_turns=4))) as client:
        assert served_turns(client) == (4, 4)  # --max-turns wins over the head's
        assert served_turns(client, max_turns=1) == (1, 1)
    with TestClient(create_app(ServeOptions(pool=str(pool), head=str(make_head(tmp_path / "bare", None))))) as client:
        assert served_turns(client) == (5, 5)


def test_bench_plays_every_row_at_the_heads_trained_budget(tmp_path: Path, pool: Path) -> None:
    task_file = tmp_path / "t.jsonl"
    task_file.write_text(json.dumps({"id": "q", "prompt": "What is 12*7?", "answer": "84", "scorer": "numeric"}) + "\n")
    two, three = str(make_head(tmp_path / "two", 2)), str(make_head(tmp_path / "three", 3))
    base = dict(pool=str(pool), tasks=f"file:{task_file}:all", systems=["selfloop", "random", "head"])

    captions: list[str] = []

    def budgets(**kw: Any) -> dict[str, tuple[int, int]]:
        """(budget recorded, most turns played) per row; the report's caption kept."""
        data = bench(BenchOptions(**base, **kw)).data
        captions.append(bench_view(data).caption)
        played = {s["name"]: max(len(e["turns"]) for e in data["episodes"] if e["system"] == s["name"])
                  for s in data["systems"]}
        return {s["name"]: (s["max_turns"], played[s["name"]]) for s in data["systems"]}

    # Each head its own; self-loops and random the first head's (the Verifiers never accept).
    got = budgets(heads=[two, three])
    assert got["head:two"] == (2, 2) and got["head:three"] == (3, 3)
    assert got["random"] == (2, 2) and all(got[f"selfloop:{m}"] == (2, 2) for m in ("m0", "m1", "m2"))
    told = budgets(heads=[two, three], max_turns=4)  # --max-turns wins everywhere
    assert set(told.values()) == {(4, 4)}
    no_head = budgets(heads=[str(make_head(tmp_path / "bare", None))])
    assert set(no_head.values()) == {(DEFAULT_MAX_TURNS, DEFAULT_MAX_TURNS)}
    # The caption states the budgets played, not the --max-turns option (None: each head's own).
    assert all(f"{row}, " in captions[0] or f"{row} · " in captions[0]
               for row in ("selfloop:m0 2", "random 2", "head:two 2", "head:three 3"))
    assert " · max turns 4 · " in captions[1]
    assert f" · max turns {DEFAULT_MAX_TURNS} · " in captions[2] and "None" not in captions[0]
