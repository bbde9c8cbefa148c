"""What a free-form answer prints: no transcript scaffolding (tasks/answer_body.py), on hand-made
replies and on every free-form reply the repository's recordings hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from trinity_cli.answer_kinds.freeform import DRAFT_SYSTEM
from trinity_cli.recordings import fileformat
from trinity_cli.tasks.answer_body import SCAFFOLDING, answer_body

RECORDINGS = Path(__file__).resolve().parent.parent / "recordings"
# What the free-form kind's own prompts say (answer_kinds/freeform.py): a call holding one is free-form.
FREEFORM_MARKS = ("You answer the request in full", "You revise the latest answer", DRAFT_SYSTEM)


@pytest.mark.parametrize(("reply", "expected"), [
    ("A plain answer.\n\nWith two paragraphs.", "A plain answer.\n\nWith two paragraphs."),
    ("Turns so far:\nFlakes dance in the air,\nSilent winter's breath.",
     "Flakes dance in the air,\nSilent winter's breath."),
    ("[Worker]\nThe sum is even.\n\n[Verifier]\nLooks right.\nVerdict: ACCEPT", "The sum is even."),
    ("Task:\nWrite a haiku.\n\nTurns so far:\n[Worker]\nold draft\n\n[Verifier]\nVerdict: REVISE\n\n"
     "[Worker]\nnew draft", "new draft"),
    ("The proof goes like this.\n\nVerdict: ACCEPT\nThe answer is correct.", "The proof goes like this."),
    ("Sure! Here is the revised answer:\n\nA better answer.", "A better answer."),
    ("### Revised Proof by Induction\n\nBase case.", "### Proof by Induction\n\nBase case."),
    ("**Revised answer:**\nThe text.", "The text."),
    ("An answer.\n\nThis revised answer fixes the comma problem.", "An answer."),
    ("An answer.\n(trinity checked this answer against the request's stated constraints: all met)", "An answer."),
])
def test_scaffolding_is_taken_off(reply: str, expected: str) -> None:
    assert answer_body(reply) == expected
    assert not SCAFFOLDING.search(answer_body(reply))


def test_an_answer_that_mentions_a_task_in_a_sentence_is_left_alone() -> None:
    text = "Task: pick one habit.\nThen keep it for a week; the verdict comes later."
    assert answer_body(text) == text


def _freeform_replies() -> list[str]:
    entries, _ = fileformat.read_many(sorted(RECORDINGS.glob("*/calls*.jsonl.gz")))
    replies = []
    for entry in entries:
        if entry.cache != "rollouts":
            continue
        said = "\n".join(content for _, content in entry.request.get("messages", []))
        if any(mark in said for mark in FREEFORM_MARKS):
            replies.append(entry.value.get("text") or "")
    return replies


def test_no_recorded_free_form_reply_prints_scaffolding() -> None:
    replies = _freeform_replies()
    assert len(replies) >= 90  # the free-form calls recorded since the kind landed
    left = [answer_body(r)[:200] for r in replies if SCAFFOLDING.search(answer_body(r))]
    assert left == []
