"""The shipped default (heads/default, the reader of reply signals) and the head it replaced
(heads/rotation), and how `ask` and serve say who played: ask's first stderr line, the run
record, `/v1/models`' descriptions. No model is loaded: scripted pools, and heads read from
their files."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from trinity_cli import paths
from trinity_cli.coordinator import reader as reader_mod
from trinity_cli.coordinator.head import Head, available_heads
from trinity_cli.coordinator.policy import DEFAULT_HEAD, resolve_head
from trinity_cli.coordinator.reader import Reader
from trinity_cli.runs.store import RunStore
from trinity_cli.serve import ServeOptions, create_app

from .conftest import run_main, scripted_pool

ROOT = Path(__file__).resolve().parents[1]
LOCAL = ["qwen1.5b-reason", "qwen1.5b-direct", "qwen1.5b-program"]
QUESTION = [{"role": "user", "content": "What is 12*7?"}]


def test_the_shipped_default_is_the_recorded_reader_and_the_old_head_is_rotation() -> None:
    """heads/default is recordings/local/heads/local-reader under the name `default`, weight for
    weight (its manifest says where it was copied from); the head it replaced ships as
    heads/rotation, named so, with its weights."""
    shipped = available_heads()
    assert shipped[DEFAULT_HEAD] == ROOT / "heads" / "default" and reader_mod.is_reader(shipped[DEFAULT_HEAD])
    default = reader_mod.load(shipped[DEFAULT_HEAD])
    source = json.loads((ROOT / "heads" / "default" / "manifest.json").read_text())["copied_from"]
    recorded = reader_mod.load(ROOT / source)
    assert source == "recordings/local/heads/local-reader"
    assert default.manifest["name"] == "default" and recorded.manifest["name"] == "local-reader"
    assert (default.pool, default.models, default.calls) == (recorded.pool, recorded.models, recorded.calls)
    assert default.weights == recorded.weights and default.centres == recorded.centres
    assert default.made == "evolved" and default.policy == "reader"
    rotation = Head.load(shipped["rotation"])
    assert rotation.manifest["name"] == "rotation" and rotation.made == "fitted" and rotation.policy == "head"
    assert rotation.models == LOCAL and rotation.learned


def test_the_default_pool_plays_the_reader_when_no_head_is_named() -> None:
    """resolve_head(None) on the default pool is the shipped reader, read from its file alone
    (no backbone); `rotation` is the rotating head, by name."""
    found = resolve_head(None, "local", LOCAL)
    assert isinstance(found, Reader) and found.manifest["name"] == "default"
    assert found.describe() == "reader default (evolved: reads the replies' signals)"
    assert resolve_head("rotation", "local", LOCAL).manifest["name"] == "rotation"


def _default_reader(pool: str = "scripted", models: tuple[str, ...] = ("m0", "m1", "m2")) -> None:
    """A reader saved as the user's `default` head (user heads win on a clash)."""
    reader = Reader.agree_start(pool, list(models))
    reader.manifest["name"] = "default"
    reader_mod.save(reader, paths.user_heads_dir() / "default")


def test_ask_names_who_played_on_its_first_line_and_in_the_run(tmp_path: Path, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    _default_reader()
    code, out, err = run_main(["ask", "What is 12*7?", "--pool", str(pool)], monkeypatch, capsys)
    assert code == 0 and out == "84\n", err
    first = err.strip().splitlines()[0]  # the kind read, then who played
    assert first.startswith("answer kind: short, read from the question")
    assert "· pool scripted: m0, m1, m2 · reader default (agree: reads the replies' signals)" in first
    assert "the default head" in first
    head = RunStore().load("run-1")["head"]
    assert head == {"name": "default", "trained": False, "policy": "reader", "made": "agree", "default": True}

    code, out, err = run_main(["ask", "What is 12*7?", "--pool", str(pool), "--head", "untrained"],
                              monkeypatch, capsys)
    assert code == 0, err
    first = err.strip().splitlines()[0]
    assert "untrained head (uniform random routing)" in first and "the default head" not in first
    head = RunStore().load("run-2")["head"]
    assert head["policy"] == "head" and head["made"] == "untrained" and head["default"] is False


def test_models_list_says_what_answers_under_each_id(tmp_path: Path) -> None:
    """`/v1/models`: "trinity" is described by the default reader and each answer kind's own
    procedure (free-form: drafts), "trinity/HEAD" by its manifest, a policy by its summary."""
    pool = scripted_pool(tmp_path)
    _default_reader()
    with TestClient(create_app(ServeOptions(pool=str(pool)))) as client:
        listing = {m["id"]: m["description"] for m in client.get("/v1/models").json()["data"]}
    assert listing["trinity"] == ("answers as trinity ask does: reader default (agree: reads the replies' "
                                  "signals); freeform questions: the drafts policy")
    assert listing["trinity/default"] == "reader default (agree)"
    assert listing["trinity/untrained"] == "untrained head (uniform random routing)"
    assert listing["trinity/agree"].startswith("the members in order")
