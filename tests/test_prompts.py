from __future__ import annotations

import pytest

from trinity_cli.answer_kinds import answer_kind
from trinity_cli.messages import Role, Turn
from trinity_cli.turns import prompts, replies


def _turn(role: Role, reply: str, i: int = 0) -> Turn:
    return Turn(index=i, model="m", role=role, chosen_role=role, model_probs=[1.0], role_probs=[1 / 3] * 3,
                messages=[], reply=reply, prompt_tokens=1, completion_tokens=1, latency_s=0.0, coordinator_s=0.0)


def test_code_verdict_is_the_stated_one() -> None:
    assert replies.verdict("ACCEPT. Looks right.") == "ACCEPT"
    assert replies.verdict("The loop is off by one.\nVerdict: REVISE") == "REVISE"
    assert replies.verdict("**Verdict:** accept") == "ACCEPT"
    assert replies.verdict("I am not sure.") == "REVISE"
    assert replies.verdict("") == "REVISE"


def test_suggestion_parsing() -> None:
    assert replies.suggestion("Plan...\nNext: verifier") is Role.VERIFIER
    assert replies.suggestion("**Next:** worker") is Role.WORKER
    assert replies.suggestion("Plan.\n**Next: worker**.") is Role.WORKER
    assert replies.suggestion("no suggestion") is None


def test_suggestion_ignores_echoed_instructions() -> None:
    # A Thinker that copies the instruction lists every role: no suggestion, not THINKER.
    echo = "1. Add the numbers.\nEnd with 'Next: worker' or 'Next: verifier' or 'Next: thinker'."
    assert replies.suggestion(echo) is None
    assert replies.suggestion("Next: worker / Next: verifier / Next: thinker") is None
    # A Next: line that is not the last line is not the suggestion either.
    assert replies.suggestion("Next: verifier\nActually, first compute 3*5.") is None


def test_p4_layout_one_system_message_and_instructions_last() -> None:
    # One system message for every style and role, the role's instructions and request last:
    # consecutive calls share the system message, the task and the turns as a prefix.
    turns = [_turn(Role.THINKER, "add them up", 0), _turn(Role.WORKER, "Answer: 3", 1)]
    for style in ("reason", "direct", "program"):
        for role in (Role.THINKER, Role.WORKER, Role.VERIFIER):
            msgs = prompts.build_messages(role, "What is 1+2?", turns, style=style, kind=answer_kind("code"))
            assert [m.role for m in msgs] == ["system", "user"]
            assert msgs[0].content == prompts.SYSTEM
            assert msgs[1].content.startswith("Task:\nWhat is 1+2?\n\nTurns so far:\n[Thinker]\nadd them up")
            assert msgs[1].content.endswith(f"{prompts.INSTRUCTIONS[style][role]}\n{prompts.REQUEST[style][role]}")
    workers = {prompts.INSTRUCTIONS[s][Role.WORKER] for s in ("reason", "direct", "program")}
    assert len(workers) == 3
    with pytest.raises(ValueError, match="unknown style"):
        prompts.build_messages(Role.WORKER, "t", [], style="poetic")


def test_verifiers_outside_code_are_asked_alone_as_a_worker_would_be() -> None:
    turns = [_turn(Role.THINKER, "add them up", 0), _turn(Role.WORKER, "Answer: 3", 1)]
    for style in ("reason", "direct", "program"):
        for name in (None, "numeric", "choice", "math"):
            kind = answer_kind(name)
            msgs = prompts.build_messages(Role.VERIFIER, "What is 1+2?", turns, style=style, kind=kind)
            # Neither the proposed answer nor the turns holding it: a small model copies it.
            assert "Answer: 3" not in msgs[1].content and "add them up" not in msgs[1].content
            # Exactly the fresh Worker call from the task alone: one cached reply serves both.
            assert msgs == prompts.build_messages(Role.WORKER, "What is 1+2?", [], style=style, kind=kind)
            assert msgs == prompts.build_messages(Role.WORKER, "What is 1+2?", turns, style=style, kind=kind,
                                                alone=True)
        # On a code task the proposed code is shown, with its example run when there is one.
        code_turns = [turns[0], _turn(Role.WORKER, "def f(): return 3", 1)]
        code_turns[1].examples = {"passed": False, "failing": "assert f() == 4", "error": "AssertionError: "}
        code = prompts.build_messages(Role.VERIFIER, "Write f.", code_turns, style=style, kind=answer_kind("code"))
        assert "Proposed code to check:\ndef f(): return 3\n(trinity ran the task's examples" in code[1].content
        assert "failed `assert f() == 4`: AssertionError:" in code[1].content
        assert "Turns so far" in code[1].content


def test_worker_prompts_do_not_invite_copied_headings() -> None:
    # Small models copy prompt words as headings ("Plan", "Understand the Problem"): the
    # Worker prompts name no such sections, and a code task gets its code first.
    for style in ("reason", "direct", "program"):
        text = prompts.INSTRUCTIONS[style][Role.WORKER]
        for heading in ("Understand", "Plan:", "Implementation", "Fixing Mistakes"):
            assert heading not in text
    assert "code first" in prompts.INSTRUCTIONS["reason"][Role.WORKER]


def test_build_messages_layout_and_truncation() -> None:
    turns = [_turn(Role.THINKER, "plan one", 0), _turn(Role.WORKER, "Answer: 3", 1)]
    msgs = prompts.build_messages(Role.THINKER, "What is 1+2?", turns)
    assert "Task:\nWhat is 1+2?" in msgs[1].content and "[Worker]\nAnswer: 3" in msgs[1].content
    short = prompts.build_messages(Role.WORKER, "What is 1+2?", turns, keep_last=1)
    assert "plan one" not in short[1].content and "1 earlier turns omitted" in short[1].content
    none = prompts.build_messages(Role.WORKER, "What is 1+2?", turns, keep_last=0)
    assert "Turns so far" not in none[1].content
