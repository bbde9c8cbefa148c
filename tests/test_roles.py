from __future__ import annotations

from trinity_cli import roles
from trinity_cli.messages import Role, Turn


def _turn(role: Role, reply: str, i: int = 0) -> Turn:
    return Turn(index=i, model="m", role=role, chosen_role=role, model_probs=[1.0], role_probs=[1 / 3] * 3,
                messages=[], reply=reply, prompt_tokens=1, completion_tokens=1, latency_s=0.0, coordinator_s=0.0)


def test_final_answer_forms() -> None:
    assert roles.final_answer("so the total is\nAnswer: $1,200.") == "1200"
    assert roles.final_answer("It is 84.0 apples") == "84"
    assert roles.final_answer("Answer: (C)") == "c"
    assert roles.final_answer("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert roles.final_answer("no numbers here") is None


def test_verdict_compares_independent_answer() -> None:
    # The model says ACCEPT but its own answer differs: the comparison wins.
    assert roles.verdict("7*12=84\nAnswer: 84\nVerdict: ACCEPT", "Answer: 85") == ("REVISE", "compared")
    assert roles.verdict("Answer: 84\nVerdict: REVISE", "the result is 84") == ("ACCEPT", "compared")


def test_verdict_stated_and_unparseable() -> None:
    assert roles.verdict("ACCEPT. Looks right.", "a proof without numbers") == ("ACCEPT", "stated")
    assert roles.verdict("I am not sure.", "a proof") == ("REVISE", "stated")
    assert roles.verdict("", None) == ("REVISE", "stated")


def test_suggestion_parsing() -> None:
    assert roles.suggestion("Plan...\nNext: verifier") is Role.VERIFIER
    assert roles.suggestion("**Next:** worker") is Role.WORKER
    assert roles.suggestion("no suggestion") is None


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
