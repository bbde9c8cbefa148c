"""Computing a conversation's next prompt ahead (backends/chunk_schedule.py,
Pool.prefill, ask/conversation.next_calls, serve/service.ServedPool): the parts that need no
model. The real model's side (a reply never changes; the next call evaluates its message
alone) is in tests/test_llamacpp_integration.py."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from trinity_cli import conversation
from trinity_cli.ask import AskOptions
from trinity_cli.ask import conversation as conv_mod
from trinity_cli.backends.chunk_schedule import TASK_CHUNKS, TURN_CHUNKS, chunk_points, kept_prefix
from trinity_cli.backends.llamacpp import LlamaCppBackend
from trinity_cli.backends.scripted import ScriptedBackend
from trinity_cli.chat.session import ChatSession
from trinity_cli.messages import ChatMessage, GenParams, Role
from trinity_cli.pool.pool import Pool
from trinity_cli.pool.rollout_cache import RolloutCache
from trinity_cli.pool_config import load_pool
from trinity_cli.turns import prompts

from .conftest import write_pool


def test_chunks_end_every_n_batch_and_where_a_conversation_s_last_message_starts() -> None:
    assert chunk_points(100, 32) == [32, 64, 96]
    assert chunk_points(64, 32) == [32, 64]
    assert chunk_points(100, 32, [40]) == [32, 40, 72]
    assert chunk_points(100, 32, [64]) == [32, 64, 96]
    assert chunk_points(20, 32, [10]) == [10]
    assert chunk_points(100, 32, [100]) == [32, 64, 96]  # no message after it: no boundary
    # where the last message starts, then where the new message starts inside it
    assert chunk_points(200, 32, [40, 90]) == [32, 40, 72, 90, 122, 154, 186]
    assert chunk_points(200, 32, [90, 40, 90, 0, 250]) == [32, 40, 72, 90, 122, 154, 186]


def test_only_chunks_both_prompts_end_alike_from_the_start_are_kept() -> None:
    assert kept_prefix([32, 64, 96], [32, 64, 96, 128], 120) == 96
    assert kept_prefix([32, 64, 96], [32, 64, 96, 128], 70) == 64  # the prompts share 70 tokens
    # a prefill up to the next message's start, then that message's call: all of it kept
    assert kept_prefix([32, 40], [32, 40, 72], 71) == 40
    # the same point after differing chunks is not the same chunk
    assert kept_prefix([32, 40, 72], [32, 64, 72, 104], 200) == 32
    assert kept_prefix([], [32, 64], 100) == 0


def test_only_a_conversation_s_prompt_has_a_key_of_its_own(tmp_path: Path) -> None:
    config = load_pool("smollm2").models[0]
    backend = LlamaCppBackend(config)  # nothing loads: the tag is read off the messages
    one = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hi")]
    conversation = [*one, ChatMessage("assistant", "Hello."), ChatMessage("user", "Go on.")]
    params = GenParams(max_tokens=8, temperature=0.0, seed=0)
    split = GenParams(max_tokens=8, temperature=0.0, seed=0, split_last=True)
    assert backend.schedule_tag(one, split) is None and backend.schedule_tag(conversation, split) == TURN_CHUNKS
    assert backend.schedule_tag(conversation, params) is None  # the conductor's step asked again
    assert not backend.loaded
    pool = Pool(load_pool("smollm2"), cache=RolloutCache(tmp_path / "rollouts"))
    name = pool.names[0]
    kept = {"v": 2, "fingerprint": backend.fingerprint, "messages": [["system", "Be brief."], ["user", "Hi"]],
            "params": {"max_tokens": 8, "temperature": 0.0, "top_p": params.top_p, "seed": 0, "stop": []}}
    assert pool._request(name, one, params) == pool._request(name, one, split) == kept  # every recorded call's key
    assert pool._request(name, conversation, split)["schedule"] == TURN_CHUNKS
    assert "schedule" not in pool._request(name, conversation, params)
    # a turn prompt holding the new message after the earlier conversation and the instructions
    turn = [ChatMessage("system", "Be brief."),
            ChatMessage("user", "Earlier conversation: ...\n\nTask:\nGo on.\n\nNow.")]
    task = replace(split, split_before="Go on.")
    assert backend.schedule_tag(turn, task) == TASK_CHUNKS
    assert backend.schedule_tag(turn, replace(params, split_before="Go on.")) is None  # not a conversation's call
    assert backend.schedule_tag(turn, replace(split, split_before="elsewhere")) is None
    assert backend.schedule_tag(one, replace(split, split_before="Hi")) is None  # the message opens it: nothing before
    assert backend.schedule_tag([*conversation[:-1], turn[1]], task) == f"{TURN_CHUNKS}+{TASK_CHUNKS}"
    assert pool._request(name, turn, task)["schedule"] == TASK_CHUNKS
    assert not backend.loaded


def test_every_call_of_an_episode_that_continues_a_conversation_is_split_at_its_last_message(tmp_path: Path) -> None:
    seen: list[GenParams] = []
    with ChatSession(AskOptions(pool=str(_pool(tmp_path)))) as chat:
        original = chat.served.pool._call

        def spy(name, messages, params, on_text):
            seen.append(params)
            return original(name, messages, params, on_text)

        chat.served.pool._call = spy
        chat.say("Write two lines about the sea.")
        assert seen and not any(p.split_last for p in seen)  # the first message: no conversation yet
        seen.clear()
        chat.say("Make it about a lake.")
        assert seen and all(p.split_last and p.split_before == "Make it about a lake." for p in seen)
        seen.clear()
        chat.say("What is 6*7?")  # a short answer's turns: split where the message starts too
        assert seen and all(p.split_last and p.split_before == "What is 6*7?" for p in seen)


def _pool(tmp_path: Path) -> Path:
    models = [{"name": f"m{i}", "kind": "scripted", "style": style, "rules": [{"match": "sea", "reply": "Waves."}],
               "default": "42"} for i, style in enumerate(("reason", "direct"))]
    return write_pool(tmp_path, {"name": "two", "router": "agree", "models": models})


def test_the_next_message_is_computed_ahead_as_the_last_one_was_answered(tmp_path: Path, monkeypatch) -> None:
    asked: list[tuple[str, list[ChatMessage]]] = []

    def prefill(self, messages, stop=None) -> int:
        asked.append((self.name, list(messages)))
        return 0

    monkeypatch.setattr(ScriptedBackend, "prefill", prefill)
    with ChatSession(AskOptions(pool=str(_pool(tmp_path)))) as chat:
        chat.say("Write two lines about the sea.")  # a whole answer: drafted, `direct` first
        _wait_for(asked, 2)
        context = conversation.messages(None, chat.conversation.history(), "")[:-1]
        (drafter, draft), (worker, turn) = asked
        assert drafter == "m1"  # the direct member drafts first (policies/drafts.py); a whole answer's first
        assert [(m.role, m.content) for m in draft[1:]] == [
            ("user", "Write two lines about the sea."), ("assistant", "Waves."), ("user", "")]
        # a short answer's first turn: the reason member's Worker prompt, up to where the task goes
        full = prompts.build_messages(Role.WORKER, "What is 6*7?", [], context, style="reason", alone=True)
        assert worker == "m0" and turn[0] == full[0]
        assert full[1].content.startswith(turn[1].content) and turn[1].content.endswith("Task:\n")
        assert turn[1].content.startswith("Earlier conversation:\nuser: Write two lines")
        assert prompts.INSTRUCTIONS["reason"][Role.WORKER] in turn[1].content  # the instructions before the task
        asked.clear()
        chat.say("What is 6*7?")  # a short answer: the turn first, then the draft
        _wait_for(asked, 2)
        assert [name for name, _ in asked] == ["m0", "m1"]
        assert asked[1][1][-1] == ChatMessage("user", "")


def _wait_for(calls: list, n: int) -> None:
    for _ in range(200):  # the thread computing ahead runs beside the test
        if len(calls) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{len(calls)} calls computed ahead, not {n}")


def test_members_sharing_a_model_compute_it_once_and_a_stop_ends_it(tmp_path: Path) -> None:
    pool = Pool(load_pool(str(_pool(tmp_path))))
    seen: list[str] = []

    class Counting(ScriptedBackend):
        def prefill(self, messages, stop=None) -> int:
            seen.append(self.name)
            return 3

    for name in pool.names:
        pool._backends[pool._keys[name]] = Counting(pool.config.model(name))
    opened = [ChatMessage("user", "x")]
    assert pool.prefill([("m0", opened), ("m0", opened), ("m1", opened)]) == 6 and seen == ["m0", "m1"]
    assert pool.prefill([("m0", opened)], stop=lambda: True) == 0
    pool._keys["m1"] = pool._keys["m0"]  # m1 shares m0's model
    seen.clear()
    assert pool.prefill([("m0", opened), ("m1", opened)]) == 3 and seen == ["m0"]


def test_a_model_not_loaded_is_not_loaded_to_compute_ahead() -> None:
    pool = Pool(load_pool("smollm2"))
    assert pool.prefill([(pool.names[0], [ChatMessage("user", "Hi")])]) == 0
    assert not pool.backend(pool.names[0]).loaded


@pytest.mark.parametrize("kind", ["freeform", None])
def test_nothing_is_computed_ahead_of_a_first_message(kind: str | None) -> None:
    assert conv_mod.next_calls(conv_mod.Conversation(), AskOptions(kind=kind), Pool(load_pool("smollm2"))) == []


def test_a_conversation_s_turn_is_told_what_to_do_before_its_task_and_no_other_prompt_moves() -> None:
    context = [ChatMessage("user", "Is 13 a prime number?"), ChatMessage("assistant", "Yes")]
    instruction = prompts.INSTRUCTIONS["reason"][Role.WORKER]
    request = prompts.REQUEST["reason"][Role.WORKER]
    asked = prompts.build_messages(Role.WORKER, "What about 17?", [], context, style="reason")[1].content
    assert asked == ("Earlier conversation:\nuser: Is 13 a prime number?\nassistant: Yes\n\n"
                     f"{instruction}\n\nTask:\nWhat about 17?\n\n{request}")
    alone = prompts.build_messages(Role.WORKER, "What about 17?", [], style="reason")[1].content
    assert alone == f"Task:\nWhat about 17?\n\n{instruction}\n{request}"  # every recorded prompt's order
