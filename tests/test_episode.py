from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from trinity_cli.coordinator import head as head_mod
from trinity_cli.coordinator.policy import Coordinator
from trinity_cli.episode.loop import run_episode
from trinity_cli.errors import ConfigError, ContextOverflow
from trinity_cli.messages import ROLES, ChatMessage, Role, Transcript, Turn
from trinity_cli.pool.pool import Pool
from trinity_cli.pool.rollout_cache import RolloutCache
from trinity_cli.pool_config import load_pool

from .conftest import scripted_pool, write_pool

BACKBONE = {"ref": "test", "fingerprint": "test", "hidden_size": 4}


class FixedCoordinator(Coordinator):
    """Uses a real Head but fixed features, so routing is controlled without a backbone."""

    def __init__(self, head: head_mod.Head, features: np.ndarray) -> None:
        super().__init__(head, backbone_ref="test")
        self._features = features

    def features(self, text: str) -> np.ndarray:
        return self._features


def make_head(models: list[str], model_bias: list[float], role_bias: list[float]) -> head_mod.Head:
    head = head_mod.untrained("scripted", models, BACKBONE, 4)
    head.weights[:, 0] = np.array(model_bias + role_bias, dtype=np.float32)
    return head


def setup(tmp_path: Path, rules=None, n=3, cache=False, **extra):
    config = load_pool(str(scripted_pool(tmp_path, n, rules, **extra)))
    pool = Pool(config, cache=RolloutCache(tmp_path / "c") if cache else None)
    return config, pool


def test_worker_then_verifier_accepts(tmp_path: Path) -> None:
    config, pool = setup(tmp_path)
    # Strongly prefer m1; roles: worker first (verifier would be overridden anyway).
    head = make_head(config.names, [0, 50, 0], [0, 0, 50])
    coord = FixedCoordinator(head, np.array([1.0, 0, 0, 0]))
    tr = run_episode("What is 12*7?", pool, coord, max_turns=5, seed=1)
    assert tr.turns[0].role is Role.WORKER and tr.turns[0].chosen_role is Role.VERIFIER
    assert "no answer to verify" in (tr.turns[0].override or "")
    assert tr.turns[1].role is Role.VERIFIER and tr.turns[1].verdict == "ACCEPT"
    assert tr.accepted and tr.stop_reason == "accepted" and len(tr.turns) == 2
    assert tr.answer is not None and "84" in tr.answer
    assert all(t.model == "m1" for t in tr.turns)
    assert tr.turns[1].model_probs[1] > 0.99


def test_thinker_suggestion_is_honoured(tmp_path: Path) -> None:
    config, pool = setup(tmp_path)
    head = make_head(config.names, [0, 0, 0], [50, 0, 0])  # always thinker
    coord = FixedCoordinator(head, np.array([1.0, 0, 0, 0]))
    tr = run_episode("What is 12*7?", pool, coord, max_turns=3, seed=0)
    assert tr.turns[0].role is Role.THINKER and tr.turns[0].suggestion is Role.WORKER
    assert tr.turns[1].role is Role.WORKER and tr.turns[1].override == "thinker suggested worker"
    # Turn 3: the thinker was chosen again, with no suggestion pending.
    assert tr.turns[2].role is Role.THINKER
    assert tr.answer and "84" in tr.answer and not tr.accepted and tr.stop_reason == "max_turns"


def test_last_turn_forces_a_worker(tmp_path: Path) -> None:
    rules = [{"match": "critique now", "reply": "Think harder."}]
    config, pool = setup(tmp_path, rules=rules)
    head = make_head(config.names, [0, 0, 0], [50, 0, 0])
    coord = FixedCoordinator(head, np.array([1.0, 0, 0, 0]))
    tr = run_episode("Q?", pool, coord, max_turns=2)
    assert [t.role for t in tr.turns] == [Role.THINKER, Role.WORKER]
    assert tr.turns[1].override and "last turn" in tr.turns[1].override
    assert tr.answer is not None


def test_exclusion_masks_models(tmp_path: Path) -> None:
    config, pool = setup(tmp_path)
    head = make_head(config.names, [0, 50, 0], [0, 50, 0])  # prefers m1
    coord = FixedCoordinator(head, np.array([1.0, 0, 0, 0]))
    tr = run_episode("Q 12*7", pool, coord, max_turns=3, exclude=["m1"], seed=3)
    assert all(t.model != "m1" for t in tr.turns)
    assert all(t.model_probs[1] == 0.0 for t in tr.turns)
    assert abs(sum(tr.turns[0].model_probs) - 1) < 1e-9
    with pytest.raises(ConfigError, match="every model"):
        run_episode("Q", pool, coord, exclude=["m0", "m1", "m2"])
    with pytest.raises(ConfigError, match="did you mean"):
        run_episode("Q", pool, coord, exclude=["m7"])


def test_same_seed_same_transcript_and_uniform_untrained(tmp_path: Path) -> None:
    config, pool = setup(tmp_path)
    head = head_mod.untrained("scripted", config.names, BACKBONE, 4)
    coord = Coordinator(head, backbone_ref="test")  # zero head: the backbone is never loaded
    a = run_episode("Q 12*7", pool, coord, max_turns=4, seed=7)
    b = run_episode("Q 12*7", pool, coord, max_turns=4, seed=7)
    assert [(t.model, t.role) for t in a.turns] == [(t.model, t.role) for t in b.turns]
    assert all(np.allclose(t.model_probs, 1 / 3) for t in a.turns)
    assert all(np.allclose(t.role_probs, 1 / 3) for t in a.turns)
    seqs = {tuple((t.model, t.chosen_role) for t in run_episode("Q", pool, coord, 4, seed=s).turns)
            for s in range(8)}
    assert len(seqs) > 1  # different seeds route differently


def test_transcript_round_trips(tmp_path: Path) -> None:
    config, pool = setup(tmp_path)
    head = make_head(config.names, [0, 0, 0], [50, 0, 0])
    tr = run_episode("Q", pool, FixedCoordinator(head, np.array([1.0, 0, 0, 0])), max_turns=3)
    again = Transcript.from_dict(tr.to_dict())
    assert again.to_dict() == tr.to_dict()


def test_every_transcript_field_survives_a_round_trip_away_from_its_default() -> None:
    """A field `from_dict` drops comes back at its default: so every field here is set to
    something that is not its default, and the check fails on any field that is lost."""
    message = ChatMessage(role="user", content="Q")
    turn = Turn(index=2, model="m", role=Role.VERIFIER, chosen_role=Role.WORKER, model_probs=[0.25, 0.75],
                role_probs=[0.1, 0.2, 0.7], messages=[message], reply="Answer: 4", prompt_tokens=11,
                completion_tokens=7, latency_s=1.5, coordinator_s=0.25, cost_usd=0.001, cached=True,
                override="overridden", verdict="ACCEPT", verdict_source="example", suggestion=Role.THINKER,
                truncated_turns=1, execution={"ok": True}, alone=True, attempt=3, temperature=0.7,
                sample_seed=99, examples={"passed": True}, vote=True, agreed_with=0, max_tokens=64,
                finish_reason="length", logprob_stats={"v": 1, "n": 0}, error="RuntimeError: x")
    tr = Transcript(task="Q", turns=[turn], answer="4", accepted=True, stop_reason="accepted",
                    context=[ChatMessage(role="system", content="be brief")], workflow={"steps": []})
    for obj in (turn, tr):  # the fixture itself must leave no field at its default
        for f in dataclasses.fields(obj):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            assert getattr(obj, f.name) != default, f"{type(obj).__name__}.{f.name} is at its default"
    again = Transcript.from_dict(tr.to_dict())
    assert again == tr


def test_context_overflow_routes_around_then_fails(tmp_path: Path) -> None:
    models = [
        {"name": "small", "kind": "scripted", "n_ctx": 256, "default": "Answer: 1"},
        {"name": "big", "kind": "scripted", "n_ctx": 8192, "default": "Answer: 1"},
    ]
    config = load_pool(str(write_pool(tmp_path, {"name": "ctx", "models": models})))
    pool = Pool(config)
    head = head_mod.untrained("ctx", config.names, BACKBONE, 4)
    coord = Coordinator(head, backbone_ref="test")
    long_task = "word " * 400
    tr = run_episode(long_task, pool, coord, max_turns=3, seed=0)
    assert {t.model for t in tr.turns} == {"big"}
    with pytest.raises(ContextOverflow, match="longer than every model"):
        run_episode("word " * 9000, pool, coord, max_turns=1)


def test_cache_serves_repeat_calls(tmp_path: Path) -> None:
    config, pool = setup(tmp_path, cache=True)
    head = head_mod.untrained("scripted", config.names, BACKBONE, 4)
    coord = Coordinator(head, backbone_ref="test")
    first = run_episode("Q 12*7", pool, coord, max_turns=3, seed=5)
    calls_before = sum(len(pool.backend(n).calls) for n in config.names)
    second = run_episode("Q 12*7", pool, coord, max_turns=3, seed=5)
    calls_after = sum(len(pool.backend(n).calls) for n in config.names)
    assert calls_after == calls_before
    assert all(t.cached for t in second.turns) and not any(t.cached for t in first.turns)
    assert [t.reply for t in first.turns] == [t.reply for t in second.turns]


THINK_RULES = [
    {"match": "critique now", "reply": "Plan: multiply.\nNext: thinker"},
    {"match": "Solve the task now", "reply": "Answer: 84"},
]


def test_token_budget_spent_before_any_worker_still_ends_with_a_worker(tmp_path: Path) -> None:
    config, pool = setup(tmp_path, rules=THINK_RULES)
    head = make_head(config.names, [0, 0, 0], [50, 0, 0])  # always thinker
    coord = FixedCoordinator(head, np.array([1.0, 0, 0, 0]))
    tr = run_episode("What is 12*7?", pool, coord, max_turns=5, token_budget=1)
    assert [t.role for t in tr.turns] == [Role.THINKER, Role.WORKER]
    assert tr.turns[1].override == "token budget spent and no answer yet: worker"
    assert tr.answer == "Answer: 84" and tr.stop_reason == "token_budget"


def test_cost_budget_spent_before_any_worker_still_ends_with_a_worker(tmp_path: Path) -> None:
    models = [{"name": f"m{i}", "kind": "scripted", "rules": THINK_RULES,
               "price": {"input_per_1k": 1.0, "output_per_1k": 1.0}} for i in range(2)]
    config = load_pool(str(write_pool(tmp_path, {"name": "priced", "models": models})))
    pool = Pool(config)
    head = make_head(config.names, [0, 0], [50, 0, 0])
    coord = FixedCoordinator(head, np.array([1.0, 0, 0, 0]))
    tr = run_episode("What is 12*7?", pool, coord, max_turns=5, cost_budget=1e-9)
    assert [t.role for t in tr.turns] == [Role.THINKER, Role.WORKER]
    assert tr.turns[1].override == "cost budget spent and no answer yet: worker"
    assert tr.answer == "Answer: 84" and tr.stop_reason == "cost_budget"


def test_budget_spent_with_an_answer_stops_at_once(tmp_path: Path) -> None:
    config, pool = setup(tmp_path, rules=THINK_RULES)
    head = make_head(config.names, [0, 0, 0], [0, 50, 0])  # always worker
    coord = FixedCoordinator(head, np.array([1.0, 0, 0, 0]))
    tr = run_episode("What is 12*7?", pool, coord, max_turns=5, token_budget=1)
    assert [t.role for t in tr.turns] == [Role.WORKER]
    assert tr.stop_reason == "token_budget" and tr.answer == "Answer: 84"
    unbounded = run_episode("What is 12*7?", pool, coord, max_turns=3)
    assert len(unbounded.turns) == 3 and unbounded.stop_reason == "max_turns"


@pytest.mark.parametrize("row,role", [(0, Role.THINKER), (1, Role.WORKER), (2, Role.VERIFIER)])
def test_head_role_rows_follow_the_documented_layout(row: int, role: Role) -> None:
    # head.py: rows are the pool's models, then the roles thinker, worker, verifier; the manifest
    # records that order, and the coordinator must decide by it.
    models = ["m0", "m1", "m2"]
    role_bias = [0.0, 0.0, 0.0]
    role_bias[row] = 50.0
    head = make_head(models, [0, 0, 0], role_bias)
    assert head.manifest["roles"][row] == role.value
    decision = FixedCoordinator(head, np.array([1.0, 0, 0, 0])).decide("Q", [], np.random.default_rng(0))
    assert decision.role is role
    assert decision.role_probs[row] > 0.99 and ROLES.index(role) == row


def test_role_max_tokens_caps_each_role_and_keys_its_cache_entry(tmp_path: Path) -> None:
    rules = [{"match": "critique now", "reply": "one two three four five six seven\nNext: worker"},
             {"match": "Solve the task", "reply": "w1 w2 w3 w4 w5 w6 Answer: 84"}]
    models = [{"name": "m0", "kind": "scripted", "rules": rules, "max_tokens": 50,
               "role_max_tokens": {"thinker": 3}}]
    config = load_pool(str(write_pool(tmp_path, {"name": "capped", "models": models})))
    pool = Pool(config, cache=RolloutCache(tmp_path / "c"))
    assert pool.params("m0", "thinker").max_tokens == 3
    assert pool.params("m0", "worker").max_tokens == pool.params("m0").max_tokens == 50
    head = make_head(config.names, [0], [50, 0, 0])  # thinker first; the last turn is a worker
    tr = run_episode("What is 12*7?", pool, FixedCoordinator(head, np.array([1.0, 0, 0, 0])), max_turns=2, seed=0)
    assert [t.role for t in tr.turns] == [Role.THINKER, Role.WORKER]
    assert tr.turns[0].reply == "one two three"  # clipped to the thinker's cap
    assert tr.turns[1].reply.endswith("Answer: 84")  # the worker keeps max_tokens
    # Each call is cached under its role's parameters: a replay is served from the cache.
    again = run_episode("What is 12*7?", pool, FixedCoordinator(head, np.array([1.0, 0, 0, 0])), max_turns=2, seed=0)
    assert [t.cached for t in again.turns] == [True, True]


def test_the_answer_kind_is_resolved_once_and_rides_on_the_episode_as_the_object(tmp_path: Path) -> None:
    """answer_kinds.resolve_kind: an `AnswerKind` stays itself, a name is looked up, None is
    detected from the task; `Episode` holds the resolved object, and run_episode gives that one
    object to its decision source every turn (turns/source_rules.py)."""
    from trinity_cli.answer_kinds import answer_kind, resolve_kind
    from trinity_cli.answer_kinds.base import AnswerKind
    from trinity_cli.episode.schedules import FixedSchedule
    from trinity_cli.policies.base import Episode

    code = answer_kind("code")
    assert resolve_kind(code, "What is 12*7?") is code
    assert resolve_kind("numeric", "Write a python function f.") is answer_kind("numeric")
    assert resolve_kind(None, "Write a python function f.") is code
    assert resolve_kind(None, "What is 12*7?") is answer_kind(None)
    episode = Episode("Write a python function f.")
    assert episode.kind is code and dataclasses.replace(episode, max_turns=2).kind is code
    assert Episode("t", kind="contains").kind is answer_kind(None)  # a family's own scorer: read kind-free

    seen: list[AnswerKind] = []

    class Watching(FixedSchedule):
        def stop(self, turns, kind):
            seen.append(kind)
            return super().stop(turns, kind)

        def final(self, turns, kind):
            seen.append(kind)
            return super().final(turns, kind)

    _, pool = setup(tmp_path)
    run_episode("What is 12*7?", pool, Watching(pool.names, pool.names, (Role.WORKER,)), max_turns=3,
                kind="numeric")
    assert len(seen) == 4 and all(kind is answer_kind("numeric") for kind in seen)
