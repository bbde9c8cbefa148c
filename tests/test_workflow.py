"""Reading a Conductor's workflow from a reply: what is repaired, what is refused, and the
order and shape of its steps."""

from __future__ import annotations

import json

import pytest

from trinity_cli.conductor.workflow import SELF, Workflow, levels, read_workflow, topology

MEMBERS = ["reason", "direct", "program"]


def wf(ids: list[str], access: list) -> dict:
    return {"model_id": ids, "subtasks": [f"do part {i}" for i in range(len(ids))], "access_list": access}


def test_reads_json_inside_a_code_fence_with_prose_around_it() -> None:
    reply = ("Here's the plan {not json}:\n```json\n" + json.dumps(wf(["reason", "program"], [[], "all"]))
             + "\n```\nGood luck!")
    reading = read_workflow(reply, MEMBERS)
    assert reading.problem is None and reading.repairs == []
    assert reading.workflow == Workflow(("reason", "program"), ("do part 0", "do part 1"), ((), (0,)))


def test_reads_a_python_literal_and_an_object_nested_in_another() -> None:
    reply = "{'workflow': {'model_id': ['direct', 'reason',], 'subtasks': ['a', 'b'], 'access_list': [[], [0],],}}"
    reading = read_workflow(reply, MEMBERS)
    assert reading.workflow == Workflow(("direct", "reason"), ("a", "b"), ((), (0,)))


def test_repairs_what_needs_no_guess_and_says_so() -> None:
    reply = json.dumps(wf(["Reason", " direct", "program", "reason", "direct"],
                          [None, 0, ["0", 1], "none", ["all"]]))
    reading = read_workflow(reply, MEMBERS)
    assert reading.workflow is not None
    assert reading.workflow.model_id == ("reason", "direct", "program", "reason", "direct")
    assert reading.workflow.access == ((), (0,), (0, 1), (), (0, 1, 2, 3))
    assert reading.repairs == [
        "step 0: model 'Reason' read as 'reason'", "step 1: model ' direct' read as 'direct'",
        "step 0: access None read as []", "step 1: access 0 read as [0]", "step 2: access '0' read as 0",
        "step 3: access 'none' read as []", "step 4: access ['all'] read as \"all\""]


@pytest.mark.parametrize(("reply", "problem"), [
    ("I would ask the reason member.", "no JSON object with a model_id list"),
    (json.dumps({"model_id": ["reason"], "subtasks": "solve"}), "subtasks, access_list are not a list"),
    (json.dumps(wf(["reason", "direct"], [[]])), "the lists differ in length (model_id 2, subtasks 2, access_list 1)"),
    (json.dumps(wf([], [])), "the workflow has no steps"),
    (json.dumps(wf(["reason"] * 6, [[]] * 6)), "6 steps, more than the 5 allowed"),
    (json.dumps(wf(["reason", "gpt-9"], [[], []])), "step 1: no member 'gpt-9' (members: reason, direct, program, "
                                                     "conductor)"),
    (json.dumps(wf(["reason", "direct"], [[1], []])), "step 0 reads step 1, which does not run before it"),
    (json.dumps(wf(["reason", "direct"], [[], [1]])), "step 1 reads itself"),
    (json.dumps(wf(["reason"], [[True]])), "step 0: access_list entry [True] is not a list of step numbers"),
    (json.dumps(wf(["reason"], ["previous"])), "step 0: access_list entry 'previous' is not a list"),
    (json.dumps({"model_id": ["reason"], "subtasks": [3], "access_list": [[]]}), "step 0: the subtask is not text"),
])
def test_refuses_what_cannot_be_read_without_guessing(reply: str, problem: str) -> None:
    reading = read_workflow(reply, MEMBERS)
    assert reading.workflow is None
    assert reading.problem is not None and reading.problem.startswith(problem)


def test_the_conductor_may_name_itself_only_when_allowed() -> None:
    reply = json.dumps(wf(["reason", SELF], [[], "all"]))
    assert read_workflow(reply, MEMBERS).workflow is not None
    refused = read_workflow(reply, MEMBERS, allow_self=False)
    assert refused.workflow is None and "no member 'conductor'" in (refused.problem or "")


def test_max_steps_is_the_callers() -> None:
    reply = json.dumps(wf(["reason"] * 3, [[]] * 3))
    assert read_workflow(reply, MEMBERS, max_steps=2).problem == "3 steps, more than the 2 allowed"


def make(ids: list[str], access: list[tuple[int, ...]]) -> Workflow:
    return Workflow(tuple(ids), tuple("x" for _ in ids), tuple(access))


@pytest.mark.parametrize(("access", "ids", "expected_levels", "shape"), [
    ([()], ["reason"], [[0]], "single"),
    ([(), (0,), (1,)], ["reason", "direct", "reason"], [[0], [1], [2]], "chain"),
    ([(), (0,), (0, 1)], ["reason", "direct", "reason"], [[0], [1], [2]], "chain"),
    ([(), (), ()], ["reason", "direct", "program"], [[0, 1, 2]], "parallel"),
    ([(), (), (0, 1)], ["reason", "direct", "reason"], [[0, 1], [2]], "parallel+merge"),
    ([(), (0,), (0,), (1, 2)], ["reason", SELF, "direct", "reason"], [[0], [1, 2], [3]], "parallel+merge+recursion"),
])
def test_levels_and_topology(access: list, ids: list[str], expected_levels: list, shape: str) -> None:
    workflow = make(ids, access)
    assert levels(workflow) == expected_levels
    assert topology(workflow) == shape


def test_a_workflow_round_trips_through_its_dict() -> None:
    workflow = make(["reason", "direct"], [(), (0,)])
    assert Workflow.from_dict(json.loads(json.dumps(workflow.to_dict()))) == workflow
