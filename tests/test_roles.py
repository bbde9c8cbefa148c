from __future__ import annotations

import pytest

from trinity_cli import roles
from trinity_cli.messages import Role, Turn


def _turn(role: Role, reply: str, i: int = 0) -> Turn:
    return Turn(index=i, model="m", role=role, chosen_role=role, model_probs=[1.0], role_probs=[1 / 3] * 3,
                messages=[], reply=reply, prompt_tokens=1, completion_tokens=1, latency_s=0.0, coordinator_s=0.0)


def test_verdict_compares_independent_answer() -> None:
    # The model says ACCEPT but its own answer differs: the comparison wins.
    assert roles.verdict("7*12=84\nAnswer: 84\nVerdict: ACCEPT", "Answer: 85") == ("REVISE", "compared")
    assert roles.verdict("Answer: 84\nVerdict: REVISE", "the result is 84") == ("ACCEPT", "compared")
    assert roles.verdict("Answer: B\nVerdict: ACCEPT", "Answer: C", "choice") == ("REVISE", "compared")
    assert roles.verdict("So \\boxed{\\frac{1}{2}}", "Answer: 0.5", "math") == ("ACCEPT", "compared")


def test_verdict_stated_and_unparseable() -> None:
    assert roles.verdict("ACCEPT. Looks right.", "a proof without numbers") == ("ACCEPT", "stated")
    assert roles.verdict("I am not sure.", "a proof") == ("REVISE", "stated")
    assert roles.verdict("", None) == ("REVISE", "stated")


# Replies that fooled the old parser: each quotes the proposed answer without making it its own.
ADVERSARIAL_VERDICTS = [
    # "answer: X" inside a sentence about the proposed answer is not the Verifier's answer.
    ("The proposed answer: 18 is wrong.\nVerdict: REVISE", "Answer: 18", "numeric", "REVISE"),
    ("The proposed answer: 18 is wrong.\nVerdict: REVISE", "Answer: 18", None, "REVISE"),
    ("Their answer: 18, but 3*5 = 15.\nVerdict: REVISE", "Answer: 18", None, "REVISE"),
    # Only a last number (weak) cannot overrule the stated verdict.
    ("I checked 18 twice and it is not right.\nVerdict: REVISE", "Answer: 18", "numeric", "REVISE"),
    # The Verifier's own anchored answer line still decides.
    ("The proposed answer: 18 is wrong. 3*5 = 15.\nAnswer: 15\nVerdict: REVISE", "Answer: 15", "numeric",
     "ACCEPT"),
    ("**Final answer:** 18\nVerdict: ACCEPT", "Answer: 18", None, "ACCEPT"),
    # "A total of 42" is a number answer, not the choice letter A.
    ("Answer: A total of 42\nVerdict: ACCEPT", "Answer: 42", None, "ACCEPT"),
    ("Answer: A total of 42\nVerdict: ACCEPT", "Answer: A", None, "REVISE"),
    # Code cannot be compared by reading: the stated verdict decides.
    ("```python\ndef f(): return 1\n```\nVerdict: REVISE", "```python\ndef f(): return 1\n```", "code", "REVISE"),
]


@pytest.mark.parametrize(("reply", "proposed", "kind", "expected"), ADVERSARIAL_VERDICTS)
def test_verdict_adversarial(reply: str, proposed: str, kind: str | None, expected: str) -> None:
    assert roles.verdict(reply, proposed, kind)[0] == expected


def test_suggestion_parsing() -> None:
    assert roles.suggestion("Plan...\nNext: verifier") is Role.VERIFIER
    assert roles.suggestion("**Next:** worker") is Role.WORKER
    assert roles.suggestion("Plan.\n**Next: worker**.") is Role.WORKER
    assert roles.suggestion("no suggestion") is None


def test_suggestion_ignores_echoed_instructions() -> None:
    # A Thinker that copies the instruction lists every role: no suggestion, not THINKER.
    echo = "1. Add the numbers.\nEnd with 'Next: worker' or 'Next: verifier' or 'Next: thinker'."
    assert roles.suggestion(echo) is None
    assert roles.suggestion("Next: worker / Next: verifier / Next: thinker") is None
    # A Next: line that is not the last line is not the suggestion either.
    assert roles.suggestion("Next: verifier\nActually, first compute 3*5.") is None


def test_styles_have_every_role_and_differ() -> None:
    for style in ("reason", "direct", "program"):
        for role in (Role.THINKER, Role.WORKER, Role.VERIFIER):
            msgs = roles.build_messages(role, "What is 1+2?", [], style=style)
            assert msgs[0].content == roles.SYSTEM[style][role]
            assert msgs[1].content.endswith(roles.REQUEST[style][role])
    workers = {roles.SYSTEM[s][Role.WORKER] for s in ("reason", "direct", "program")}
    assert len(workers) == 3
    with pytest.raises(ValueError, match="unknown style"):
        roles.build_messages(Role.WORKER, "t", [], style="poetic")


def test_direct_and_program_verifiers_answer_without_seeing_the_answer() -> None:
    turns = [_turn(Role.THINKER, "add them up", 0), _turn(Role.WORKER, "Answer: 3", 1)]
    for style in ("direct", "program"):
        for kind in (None, "number", "choice"):
            msgs = roles.build_messages(Role.VERIFIER, "What is 1+2?", turns, style=style, kind=kind)
            # Neither the proposed answer nor the turns holding it: a small model copies it.
            assert "Proposed answer" not in msgs[1].content
            assert "Turns so far" not in msgs[1].content and "Answer: 3" not in msgs[1].content
            assert "add them up" not in msgs[1].content and "Task:\nWhat is 1+2?" in msgs[1].content
        # On a code task the proposed code is shown: it cannot be compared otherwise.
        code = roles.build_messages(Role.VERIFIER, "Write f.", turns, style=style, kind="code")
        assert "Proposed answer to check:\nAnswer: 3" in code[1].content
        assert "Turns so far" in code[1].content
    reason = roles.build_messages(Role.VERIFIER, "What is 1+2?", turns, style="reason")
    assert "Proposed answer to check:\nAnswer: 3" in reason[1].content


def test_worker_prompts_do_not_invite_copied_headings() -> None:
    # Small models copy prompt words as headings ("Plan", "Understand the Problem"): the
    # Worker prompts name no such sections, and a code task gets its code first.
    for style in ("reason", "direct", "program"):
        text = roles.SYSTEM[style][Role.WORKER]
        for heading in ("Understand", "Plan:", "Implementation", "Fixing Mistakes"):
            assert heading not in text
    assert "code first" in roles.SYSTEM["reason"][Role.WORKER]


def test_build_messages_layout_and_truncation() -> None:
    turns = [_turn(Role.THINKER, "plan one", 0), _turn(Role.WORKER, "Answer: 3", 1)]
    msgs = roles.build_messages(Role.VERIFIER, "What is 1+2?", turns)
    assert [m.role for m in msgs] == ["system", "user"]
    assert "Task:\nWhat is 1+2?" in msgs[1].content
    assert "Proposed answer to check:\nAnswer: 3" in msgs[1].content
    short = roles.build_messages(Role.WORKER, "What is 1+2?", turns, keep_last=1)
    assert "plan one" not in short[1].content and "1 earlier turns omitted" in short[1].content
    none = roles.build_messages(Role.WORKER, "What is 1+2?", turns, keep_last=0)
    assert "Turns so far" not in none[1].content
