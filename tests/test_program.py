"""Program-style members: the code they write runs in the sandbox and its printed value
becomes the turn's answer; a program Verifier's tests decide a code task's verdict."""

from __future__ import annotations

from pathlib import Path

from trinity_cli.answer_kinds import score_item
from trinity_cli.episode.loop import run_episode
from trinity_cli.messages import Role
from trinity_cli.pool.pool import Pool
from trinity_cli.pool_config import load_pool
from trinity_cli.tasks.items import TaskItem
from trinity_cli.turns import program
from trinity_cli.turns.source_rules import SourceRules

from .conftest import write_pool


def test_printed_value_becomes_the_answer() -> None:
    reply, run = program.run_reply("Here:\n```python\nx = 6 * 7\nprint('working...')\nprint(x)\n```")
    assert run.answer == "42" and run.returncode == 0
    assert reply.startswith("Here:") and reply.rstrip().endswith("Answer: 42")
    assert score_item(TaskItem("t", "1", "q", "42", "numeric"), reply) == 1.0


def test_answer_variable_when_nothing_is_printed() -> None:
    reply, run = program.run_reply("```python\nanswer = sum(range(5))\n```")
    assert run.answer == "10" and reply.endswith("Answer: 10")


def test_a_crash_gives_no_answer_and_says_why() -> None:
    reply, run = program.run_reply("```python\nanswer = 1\nraise ValueError('boom')\n```")
    assert run.answer is None and run.returncode not in (0, None)
    assert "ValueError: boom" in reply and "Answer:" not in reply


def test_a_function_only_program_leaves_the_reply_readable() -> None:
    code = "```python\ndef add(a, b):\n    return a + b\n```"
    reply, run = program.run_reply(code)
    assert run.answer is None and reply.startswith(code) and "(nothing printed)" in reply


def test_run_tests_accepts_and_revises() -> None:
    proposed = "```python\ndef add(a, b):\n    return a + b\n```"
    good = "```python\nassert add(1, 2) == 3\n```"
    bad = "```python\nassert add(1, 2) == 4\n```"
    assert program.run_tests(proposed, good)[0] == "ACCEPT"
    assert program.run_tests(proposed, bad)[0] == "REVISE"
    # Tests that exit early must not pass for the proposed code.
    assert program.run_tests(proposed, "```python\nimport sys\nsys.exit(0)\n```")[0] == "REVISE"


class _Schedule(SourceRules):
    """Worker on model 0, then Verifier on model 1."""


    def __init__(self, models: list[str]) -> None:
        self.models = models

    def decide(self, task, turns, rng, excluded=(), context=(), greedy=False, kind=None):
        from trinity_cli.messages import Decision

        role = Role.WORKER if not turns else Role.VERIFIER
        model = self.models[0] if not turns else self.models[-1]
        return Decision(model, role, [float(m == model) for m in self.models], [0.0, 1.0, 0.0])


def _program_pool(tmp_path: Path, worker_reply: str, verifier_reply: str) -> Pool:
    models = [
        {"name": "coder", "kind": "scripted", "style": "program",
         "rules": [{"match": "Write the program now", "reply": worker_reply}]},
        {"name": "checker", "kind": "scripted", "style": "program",
         "rules": [{"match": "Write (the program|your asserts) now", "reply": verifier_reply}]},
    ]
    return Pool(load_pool(str(write_pool(tmp_path, {"name": "prog", "models": models}))))


def test_episode_runs_program_turns_and_compares_results(tmp_path: Path) -> None:
    pool = _program_pool(tmp_path, "```python\nprint(12 * 7)\n```", "```python\nprint(7 * 12)\n```")
    task = "What is 12*7?\n\nEnd your reply with a line of the form 'Answer: <number>'."
    transcript = run_episode(task, pool, _Schedule(pool.names), max_turns=2, kind="numeric")
    worker, verifier = transcript.turns
    assert worker.execution is not None and worker.execution["answer"] == "84"
    assert transcript.answer is not None and transcript.answer.endswith("Answer: 84")
    # Asked alone, the Verifier's own program printed 84 too: agreement.
    assert (verifier.verdict, verifier.verdict_source, verifier.agreed_with) == ("ACCEPT", "agreed", 0)
    assert verifier.alone and "print(12 * 7)" not in verifier.messages[1].content
    # The model's own text is what was asked and cached; the reply adds the run.
    assert "Program output" in worker.reply

    (tmp_path / "w").mkdir()
    wrong = _program_pool(tmp_path / "w", "```python\nprint(12 * 7)\n```", "```python\nprint(12 + 7)\n```")
    transcript = run_episode(task, wrong, _Schedule(wrong.names), max_turns=2, kind="numeric")
    assert transcript.turns[1].verdict == "REVISE"


def test_episode_program_verifier_runs_tests_on_code_tasks(tmp_path: Path) -> None:
    (tmp_path / "ok").mkdir()
    pool = _program_pool(tmp_path / "ok", "```python\ndef add(a, b):\n    return a + b\n```",
                         "```python\nassert add(2, 2) == 4\n```")
    task = "Write add(a, b).\n\nReply with the complete function in one ```python code block."
    transcript = run_episode(task, pool, _Schedule(pool.names), max_turns=2, kind="code")
    verifier = transcript.turns[1]
    assert (verifier.verdict, verifier.verdict_source) == ("ACCEPT", "executed")
    assert verifier.execution is not None and "assert add(2, 2) == 4" in verifier.execution["code"]
    assert "def add" in verifier.messages[1].content  # it was shown the code it tests


def test_a_printed_label_is_not_part_of_the_answer() -> None:
    reply, run = program.run_reply('```python\nprint("Answer: ", 8.0)\n```')
    assert run.answer == "8.0" and reply.endswith("\nAnswer: 8.0")


def test_a_strict_pool_refuses_programs_without_isolation(tmp_path: Path, monkeypatch) -> None:
    import pytest

    from trinity_cli.errors import SandboxUnavailable

    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on PATH
    models = [{"name": "coder", "kind": "scripted", "style": "program",
               "rules": [{"match": "Write the program now", "reply": "```python\nprint(1)\n```"}]}]
    pool = Pool(load_pool(str(write_pool(tmp_path, {"name": "p", "sandbox": "strict", "models": models}))))
    with pytest.raises(SandboxUnavailable):
        run_episode("What is 1?", pool, _Schedule(pool.names), max_turns=1)
