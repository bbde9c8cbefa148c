"""A reply that degenerates into repeats (tasks/repeats.py): found, trimmed, left alone where the
request asks for repetition, and read by the free-form checks (answer_kinds/constraints.py)."""

from __future__ import annotations

import pytest

from trinity_cli.answer_kinds import answer_kind
from trinity_cli.messages import Role, Turn
from trinity_cli.tasks.repeats import LINE_LIMIT, asks_for_repetition, repeated, trim
from trinity_cli.turns.choose import Draft, pick

HEAD = "| Feature | TCP | UDP |\n|---|---|---|\n| Reliable | Yes | No |\n| Ordered | Yes | No |\n"
RUNAWAY = HEAD + "| Encryption | Yes | No |\n" * 132
SONG = ("Verse 1:\nthe rain comes down upon the town\n\nChorus:\noh rain, oh rain, come wash me clean\n"
        "and sing the song of all things green\n") + ("\nChorus:\noh rain, oh rain, come wash me clean\n"
                                                       "and sing the song of all things green\n") * 3


def test_a_line_repeated_past_the_limit_is_found_and_trimmed_to_its_first_copy() -> None:
    found = repeated(RUNAWAY)
    assert found is not None and found.kind == "line" and found.count == 132
    assert "encryption | yes | no" in found.describe() and "132 times" in found.describe()
    trimmed = trim(RUNAWAY)
    assert trimmed == (HEAD + "| Encryption | Yes | No |").strip()
    assert repeated(trimmed) is None


def test_numbered_copies_are_one_line_and_short_structural_lines_do_not_count() -> None:
    listed = "\n".join(f"{i}. The UK is a constitutional monarchy." for i in range(1, 10))
    assert repeated(listed) is not None and repeated(listed).count == 9  # type: ignore[union-attr]
    assert trim(listed) == "1. The UK is a constitutional monarchy."
    rubric = "\n".join(f"**{i}. Part {i}**\n- **Weight:** 20%\n***" for i in range(8))
    assert repeated(rubric) is None  # "Weight: 20%" and "***" are structure, not text
    at_limit = "\n".join(["We sail at dawn toward the sea."] * LINE_LIMIT)
    assert repeated(at_limit) is None and trim(at_limit) == at_limit


def test_a_chorus_sung_four_times_is_no_repeat() -> None:
    assert repeated(SONG) is None and trim(SONG) == SONG


def test_a_loop_of_words_is_cut_where_its_second_turn_begins() -> None:
    looped = "Mom, mother, " + ", ".join(["mother"] * 300)
    found = repeated(looped)
    assert found is not None and found.kind == "words"
    assert trim(looped) == "Mom, mother"


def test_a_request_that_asks_for_repetition_is_read_as_such() -> None:
    assert asks_for_repetition("Repeat the word hello 10 times.")
    assert asks_for_repetition("Write 'I will not talk in class' 20 times.")
    assert asks_for_repetition("Say my name over and over.")
    for plain in ("Write a song with a chorus.", "Use the word war at least 8 times.",
                  "First repeat the request word for word without change, then give your answer.",
                  "Refrain from using any commas.", "Make sure that no name is repeated."):
        assert not asks_for_repetition(plain), plain


def test_the_free_form_checks_record_repeats_apart_from_the_stated_constraints() -> None:
    kind = answer_kind("freeform")
    plain = kind.checks("Compare TCP and UDP in a table.")
    assert plain is not None and plain.items == () and plain.repeats
    run = plain.run(RUNAWAY)
    # nothing stated: the stated constraints' verdict is not shown to anyone (checked 0)...
    assert run["checked"] == 0 and run["passed"] and "132 times" in run["repeats"]
    assert plain.run(HEAD)["repeats"] is None
    # ...and a turn that records it has no examples verdict, as before: prompts and the coordinator unchanged
    turn = Turn(index=0, model="m", role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[], role_probs=[],
                messages=[], reply=RUNAWAY, prompt_tokens=1, completion_tokens=1, latency_s=0.0, coordinator_s=0.0,
                examples=run)
    assert turn.examples_passed is None
    draft = Draft.of(turn)
    assert draft.passed is False and draft.repeats and draft.printed == trim(RUNAWAY)
    # asked for: the repeats are the answer, neither checked nor trimmed
    asked = kind.checks("Repeat the line 'I will not talk in class' 20 times.")
    assert asked is None
    stated = kind.checks("Repeat the line 'I will not talk in class' 20 times, without commas.")
    assert stated is not None and not stated.repeats and stated.run("a\n" * 30)["repeats"] is None


def test_a_draft_cut_at_the_token_cap_fails_where_that_is_on_and_the_rules_prefer_drafts_that_do_not_degenerate(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from trinity_cli.turns import choose

    def turn(reply: str, finish: str = "stop") -> Turn:
        return Turn(index=0, model="m", role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[], role_probs=[],
                    messages=[], reply=reply, prompt_tokens=1, completion_tokens=1, latency_s=0.0, coordinator_s=0.0,
                    examples={"passed": False, "failing": None, "error": "x", "checked": 1, "repeats": None},
                    finish_reason=finish)

    assert not choose.CUT_FAILS  # off, as validation chose: a cut draft is recorded as cut, nothing more
    assert Draft.of(turn("A long answer that was", "length")).cut
    assert not Draft.of(turn("A long answer that was", "length")).degenerate
    monkeypatch.setattr(choose, "CUT_FAILS", True)
    cut, failing = Draft.of(turn("A long answer that was", "length")), Draft.of(turn("A short answer."))
    assert cut.cut and cut.degenerate and cut.passed is False and not failing.degenerate
    assert pick("first", [cut, failing]) == 1  # neither passes: the first that does not degenerate
    assert pick("first", [cut, cut]) == 0  # every one degenerates: the rule's own pick
