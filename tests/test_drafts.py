"""Choosing among free-form drafts (turns/choose.py) and scoring every way of choosing from a
matrix (bench/drafts.py), with no model call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trinity_cli.answer_kinds import answer_kind
from trinity_cli.bench import drafts
from trinity_cli.bench.procedures import Reply
from trinity_cli.episode.loop import run_episode
from trinity_cli.episode.schedules import DraftSchedule
from trinity_cli.messages import Role, Turn
from trinity_cli.pool.pool import open_pool
from trinity_cli.pool_config import load_pool
from trinity_cli.tasks.items import TaskItem
from trinity_cli.turns import choose
from trinity_cli.turns.choose import Draft

from .conftest import write_pool


def test_mbr_picks_the_draft_the_others_agree_with() -> None:
    texts = ["the cat sat on the mat", "a dog ran in the park today", "the cat sat on a mat", "the cat is on the mat"]
    assert choose.mbr([Draft(t) for t in texts]) == 0
    assert choose.similarity(choose.words("A b c"), choose.words("a B c")) == 1.0
    assert choose.similarity([], []) == 0.0


def test_the_passing_rules_fall_back_when_no_draft_passed_or_none_was_checked() -> None:
    unchecked = [Draft("one"), Draft("two")]
    assert choose.passing(unchecked) == 0
    failed = [Draft("x y", passed=False, certainty=1.0), Draft("x y z", passed=False, certainty=3.0),
              Draft("x y", passed=True, certainty=2.0), Draft("q", passed=True, certainty=0.5)]
    assert choose.passing(failed) == 2
    assert choose.certainty(failed) == 1
    assert choose.passing_certainty(failed) == 2
    assert choose.passing_mbr(failed) in (2, 3)
    assert choose.confidence([Draft("a", confidence=-1.0), Draft("b", confidence=-0.2)]) == 1
    assert choose.certainty([Draft("a"), Draft("b")]) == 0  # none known: the earlier


def _turn(reply: str, passed: bool | None, certainty: float, tokens: int = 10) -> Turn:
    examples: dict[str, Any] | None = (None if passed is None else
                                       {"passed": passed, "failing": None, "error": None, "checked": 1})
    return Turn(index=0, model="m", role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[], role_probs=[],
                messages=[], reply=reply, prompt_tokens=tokens, completion_tokens=tokens, latency_s=1.0,
                coordinator_s=0.0, examples=examples,
                logprob_stats={"v": 1, "n": 3, "mean": -0.5, "certainty": certainty})


def _item(i: int) -> TaskItem:
    ref = {"benchmark": "ifeval", "prompt": "Write.", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
    return TaskItem(task="ifeval", id=str(i), prompt="Write. Do not use any commas.", reference=ref, scorer="freeform")


def test_every_row_is_scored_from_the_matrix_and_paired_with_the_best_member() -> None:
    # item 0: a's greedy draft has a comma, b's has none; item 1: both fine; item 2: only a's second attempt is fine
    rows = [
        {"a": [("one, two", False, 1.0), ("one two", True, 2.0)], "b": [("one two", True, 1.5), ("x, y", False, 0.1)]},
        {"a": [("fine text", True, 1.0), ("fine text", True, 1.0)], "b": [("good text", True, 1.0), ("ok", True, 1.0)]},
        {"a": [("a, b", False, 1.0), ("a b", True, 0.5)], "b": [("c, d", False, 3.0), ("e, f", False, 2.0)]},
    ]
    items = [_item(i) for i in range(3)]
    matrix = {item.key: {m: [Reply(_turn(*r), "," not in r[0]) for r in replies] for m, replies in row.items()}
              for item, row in zip(items, rows, strict=True)}
    result = drafts.analyse(matrix, items, ["a", "b"], 2)
    table = result["rows"]
    assert table["draft:a"]["strict"] == 1 and table["draft:b"]["strict"] == 2
    assert result["best_member"] == "draft:b"
    # drawn in order a0, b0, a1, b1 until one passes the stated checks
    until = table["until-pass@4/first"]
    assert until["strict"] == 3 and until["calls"] == (2 + 1 + 3) / 3
    assert table["oracle@4"]["strict"] == 3 and table["oracle@4"]["bound"]
    assert table["certainty@4"]["strict"] == 2  # item 2's most certain draft has a comma
    assert table["until-pass@4/first"]["paired"] == {"b": 1, "c": 0, "p_value": 1.0}
    assert table["draft:a"]["inst_strict"] == 1 and table["draft:a"]["instructions"] == 3
    assert table["draft:a"]["tokens"] == table["draft:b"]["tokens"] == 20 and table["draft:b"]["calls"] == 1
    # drawn b first: b0 passes on items 0 and 1, item 2 draws b0, a0, b1 and then a1 passes
    assert table["until-pass@4/first b>a"]["calls"] == (1 + 1 + 4) / 3
    assert result["best"] == "until-pass@4/first"  # 3 of 3, with the fewest tokens of those
    text = drafts.markdown(result, "ifeval:val:3")
    assert "until-pass@4/first" in text and "vs draft:b" in text


def _draft_pool(tmp_path: Path) -> Path:
    models = [{"name": "m-a", "kind": "scripted", "style": "reason", "default": "Rain, on the roof."},
              {"name": "m-b", "kind": "scripted", "style": "direct", "default": "Rain on the roof."}]
    return write_pool(tmp_path, {"name": "scripted", "models": models})


def test_the_draft_policy_draws_until_a_draft_passes_and_no_further(tmp_path: Path) -> None:
    task = "Write a haiku about rain without using any commas."
    with open_pool(load_pool(_draft_pool(tmp_path))) as pool:
        source = DraftSchedule(pool.names, pool.names)
        checks = answer_kind("freeform").checks(task)
        transcript = run_episode(task, pool, source, max_turns=4, kind="freeform", examples=checks)
        assert [t.model for t in transcript.turns] == ["m-a", "m-b"]
        assert transcript.answer == "Rain on the roof." and transcript.stop_reason == "drafted"
        # no stated constraint: the first draft is the answer, and the only call
        plain = run_episode("Write a haiku about rain.", pool, DraftSchedule(pool.names, pool.names), max_turns=4,
                            kind="freeform", examples=answer_kind("freeform").checks("Write a haiku about rain."))
        assert len(plain.turns) == 1 and plain.answer == "Rain, on the roof."
        # every draft fails: the fallback rule picks among them (first: the first draft)
        strict = "Write a haiku about rain in all capital letters."
        failed = run_episode(strict, pool, DraftSchedule(pool.names, ["m-b", "m-a"]), max_turns=3, kind="freeform",
                             examples=answer_kind("freeform").checks(strict))
        assert [t.model for t in failed.turns] == ["m-b", "m-a", "m-b"] and failed.answer == "Rain on the roof."
        assert failed.turns[2].attempt == 1  # m-b asked again: a fresh attempt, as in the matrix


RUNAWAY = "| Feature | TCP | UDP |\n|---|---|---|\n" + "| Encryption | Yes | No |\n" * 40
TABLE = "| Feature | TCP | UDP |\n|---|---|---|\n| Reliable | Yes | No |\n| Ordered | Yes | No |\n| Fast | No | Yes |"


def _table_pool(tmp_path: Path, reason_reply: str) -> Path:
    models = [{"name": "m-reason", "kind": "scripted", "style": "reason", "default": reason_reply},
              {"name": "m-direct", "kind": "scripted", "style": "direct", "default": RUNAWAY}]
    return write_pool(tmp_path, {"name": "scripted", "models": models})


def test_a_draft_that_repeats_is_redrawn_and_trimmed_when_every_draft_repeats(tmp_path: Path) -> None:
    task = "Compare TCP and UDP in a table."  # no constraint stated: only the repeats are checked
    checks = answer_kind("freeform").checks(task)
    with open_pool(load_pool(_table_pool(tmp_path, TABLE))) as pool:
        drawn = run_episode(task, pool, DraftSchedule(pool.names, ["m-direct", "m-reason"]), max_turns=4,
                            kind="freeform", examples=checks)
        assert [t.model for t in drawn.turns] == ["m-direct", "m-reason"] and drawn.answer == TABLE
        assert drawn.turns[0].examples["repeats"] and drawn.turns[0].examples_passed is None
    with open_pool(load_pool(_table_pool(tmp_path, RUNAWAY))) as pool:
        every = run_episode(task, pool, DraftSchedule(pool.names, ["m-direct", "m-reason"]), max_turns=3,
                            kind="freeform", examples=checks)
        assert len(every.turns) == 3
        assert every.answer == "| Feature | TCP | UDP |\n|---|---|---|\n| Encryption | Yes | No |"


def test_ask_streams_each_draft_and_prints_one_answer(tmp_path: Path, monkeypatch, capsys) -> None:
    from trinity_cli.policies.drafts import MAX_DRAFTS

    from .conftest import run_main

    pool = _table_pool(tmp_path, TABLE)
    code, out, err = run_main(["ask", "--pool", str(pool), "--no-warm", "Compare TCP and UDP in a table."],
                              monkeypatch, capsys)
    assert code == 0, err
    # the first draft streams at once (stderr); a redraw only because it repeats; stdout holds one answer
    assert err.count("| Encryption | Yes | No |") >= 40 and "repeats" in err
    assert out == TABLE + "\n" if MAX_DRAFTS > 1 else out.count("| Encryption | Yes | No |") == 1
    assert out.count("| Feature | TCP | UDP |") == 1


def _told_pool(tmp_path: Path) -> Path:
    # each member writes commas until it is told the commas are what is wrong
    told = {"match": "Your answer does not follow my request: .*comma", "reply": "Rain on the roof."}
    models = [{"name": "m-direct", "kind": "scripted", "style": "direct", "default": "Rain, on the roof.",
               "rules": [told]},
              {"name": "m-reason", "kind": "scripted", "style": "reason", "default": "Rain, again, on the roof.",
               "rules": [told]}]
    return write_pool(tmp_path, {"name": "scripted", "models": models})


def test_a_told_redraw_is_shown_the_failed_draft_and_what_its_checks_found(tmp_path: Path) -> None:
    task = "Write a haiku about rain without using any commas."
    checks = answer_kind("freeform").checks(task)
    with open_pool(load_pool(_told_pool(tmp_path))) as pool:
        order = ["m-direct", "m-reason"]
        fresh = run_episode(task, pool, DraftSchedule(pool.names, order), max_turns=4, kind="freeform",
                            examples=checks)
        assert len(fresh.turns) == 4 and fresh.answer == "Rain, on the roof."  # no fresh draft drops its commas
        told = run_episode(task, pool, DraftSchedule(pool.names, order, told=True), max_turns=4, kind="freeform",
                           examples=checks)
        assert [t.model for t in told.turns] == order and told.answer == "Rain on the roof."
        first, second = told.turns
        assert first.messages == fresh.turns[0].messages  # the first draft is the drafts policy's own call
        # the redraw: the draft's own conversation, the failed draft, then what failed, said as a person says it
        assert [m.role for m in second.messages] == ["system", "user", "assistant", "user"]
        assert second.messages[2].content == "Rain, on the roof."
        assert first.examples["error"] in second.messages[3].content
        assert not second.alone and second.attempt == 0
        # a draft that passed, or a kind with no redraft messages, is redrawn fresh
        plain = run_episode("Write a haiku about rain.", pool, DraftSchedule(pool.names, order, told=True),
                            max_turns=4, kind="freeform", examples=answer_kind("freeform").checks("x"))
        assert len(plain.turns) == 1


def test_what_failed_says_the_checks_sentences_and_nothing_for_a_draft_that_passed() -> None:
    turn = _turn("Rain, on the roof.", False, 0.5)
    turn.examples = {"passed": False, "checked": 1, "error": "it uses 1 comma; the request forbids commas",
                     "repeats": None}
    assert choose.what_failed(turn) == "it uses 1 comma; the request forbids commas"
    turn.examples = {"passed": True, "checked": 1, "error": None, "repeats": 'it repeats the line "x y z" 9 times'}
    assert choose.what_failed(turn) == 'it repeats the line "x y z" 9 times'  # degenerate: fails
    turn.examples = {"passed": True, "checked": 1, "error": None, "repeats": None}
    assert choose.what_failed(turn) is None
