"""Conductor mode on scripted pools: a workflow written by one model, its steps run in
dependency order with exactly the outputs they are granted, recursion, fallback, and the
same run whatever the parallelism; then `ask --mode conductor`, `inspect` and the config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from trinity_cli.conductor.run import run_conductor
from trinity_cli.conductor.workflow import ConductorSpec
from trinity_cli.errors import ConfigError
from trinity_cli.messages import Role
from trinity_cli.pool.pool import Pool, open_pool
from trinity_cli.pool_config import parse_pool

from .conftest import run_main, write_pool

QUESTION = "What is 12*7?"


def flow(ids: list[str], subtasks: list[str], access: list) -> str:
    return "Here is the workflow:\n```json\n" + json.dumps(
        {"model_id": ids, "subtasks": subtasks, "access_list": access}) + "\n```"


PARALLEL = flow(["m0", "m1", "m0"], ["Solve it.", "Solve it your way.", "Merge the answers."], [[], [], "all"])
STEP_RULES = [
    {"match": "step 0 of", "reply": "m-{name} first: 84\nAnswer: 84"},
    {"match": "step 1 of", "reply": "m-{name} second: 85\nAnswer: 85"},
    {"match": "step 2 of", "reply": "m-{name} merged\nAnswer: 84"},
]


def pool_config(reply: str = PARALLEL, n: int = 2, parallel: int = 1, delay_s: float = 0.0, **extra):
    rules = [{"match": "You are the conductor", "reply": reply}, *STEP_RULES]
    models = [{"name": f"m{i}", "kind": "scripted", "rules": rules, "default": "Answer: 1", "delay_s": delay_s}
              for i in range(n)]
    return parse_pool(yaml.safe_dump({"name": "conducted", "parallel": parallel, "models": models, **extra}), "test")


def test_the_workflow_runs_in_order_with_exactly_the_outputs_granted() -> None:
    pool = Pool(pool_config())
    transcript = run_conductor(QUESTION, pool)

    assert [(t.index, t.model, t.role, t.override) for t in transcript.turns] == [
        (0, "m0", Role.THINKER, "conductor"), (1, "m0", Role.WORKER, "step 0"),
        (2, "m1", Role.WORKER, "step 1"), (3, "m0", Role.WORKER, "step 2")]
    conductor_prompt = transcript.turns[0].messages[-1].content
    assert "- m0: works step by step" in conductor_prompt and "- conductor: you yourself" in conductor_prompt
    assert transcript.turns[0].max_tokens == 512
    first, second, merge = (t.messages[-1].content for t in transcript.turns[1:])
    assert "Outputs of earlier steps" not in first and "Outputs of earlier steps" not in second
    assert "[Step 0 · m0]\nm-m0 first: 84" in merge and "[Step 1 · m1]\nm-m1 second: 85" in merge
    assert "Your output is the team's final answer." in merge and "Do your part now." in first
    # m0 runs two steps: its second is a fresh attempt, seeded as an episode's would be.
    assert [t.attempt for t in transcript.turns[1:]] == [0, 0, 1]
    assert transcript.turns[3].temperature == 0.7 and transcript.turns[3].sample_seed is not None
    assert transcript.answer == "m-m0 merged\nAnswer: 84" and transcript.stop_reason == "workflow"
    record = transcript.workflow
    assert record is not None
    assert record["topology"] == "parallel+merge" and record["fallback"] is None and record["turn"] == 0
    assert [(s["model"], s["access"], s["turns"]) for s in record["steps"]] == [
        ("m0", [], [1]), ("m1", [], [2]), ("m0", [0, 1], [3])]


def test_steps_of_one_level_run_at_once_and_the_run_does_not_depend_on_it() -> None:
    import time

    serial_pool, parallel_pool = Pool(pool_config(delay_s=0.3)), Pool(pool_config(delay_s=0.3, parallel=3))
    serial = run_conductor(QUESTION, serial_pool)
    start = time.perf_counter()
    parallel = run_conductor(QUESTION, parallel_pool)
    took = time.perf_counter() - start

    assert took < 4 * 0.3  # conductor, then steps 0 and 1 together, then the merge: three rounds
    assert [t.to_dict() | {"latency_s": 0} for t in serial.turns] == [
        t.to_dict() | {"latency_s": 0} for t in parallel.turns]
    assert serial.workflow == parallel.workflow and serial.answer == parallel.answer


def test_an_unreadable_workflow_falls_back_to_the_agree_procedure() -> None:
    """The fallback is bench's `agree` row on the task: the same calls (so the same cache
    entries), members in order from the task alone until two answers agree."""
    from trinity_cli.episode.loop import run_episode
    from trinity_cli.episode.schedules import AGREE_TURNS, agree

    pool = Pool(pool_config(reply="I think m1 should do it."))
    transcript = run_conductor(QUESTION, pool)

    assert transcript.stop_reason == "fallback"
    assert transcript.workflow is not None
    assert transcript.workflow["fallback"] == "no JSON object with a model_id list in the reply"
    assert transcript.workflow["workflow"] == {"model_id": ["m0", "m1"], "subtasks": ["Solve the task."] * 2,
                                               "access_list": [[], []]}
    assert [(t.index, t.model) for t in transcript.turns] == [(0, "m0"), (1, "m0"), (2, "m1")]
    assert all(t.alone for t in transcript.turns[1:])
    assert transcript.turns[2].override == "fallback: agree"
    assert [s["turns"] for s in transcript.workflow["steps"]] == [[1], [2]]
    assert transcript.answer == "Answer: 1"
    alone = run_episode(QUESTION, pool, agree(pool.names), max_turns=AGREE_TURNS)
    assert [t.messages for t in alone.turns] == [t.messages for t in transcript.turns[1:]]
    assert alone.answer == transcript.answer


def test_the_last_step_of_a_code_task_is_asked_for_code_and_asked_again_once_without_it() -> None:
    reply = flow(["m0", "m1"], ["Write it.", "Describe the function."], [[], [0]])
    code = "```python\ndef double(x):\n    return x * 2\n```"
    rules = [{"match": "You are the conductor", "reply": reply},
             {"match": "gave no final answer", "reply": code},
             {"match": "step 0 of", "reply": code},
             {"match": "step 1 of", "reply": "The function above doubles its argument."}]
    models = [{"name": f"m{i}", "kind": "scripted", "rules": rules} for i in range(2)]
    pool = Pool(parse_pool(yaml.safe_dump({"name": "c", "models": models}), "t"))

    transcript = run_conductor("Write double(x).", pool, kind="code")
    last_prompt = transcript.turns[2].messages[-1].content
    assert "Reply with the complete code the task asks for" in last_prompt
    assert "Reply with the complete code" not in transcript.turns[1].messages[-1].content
    assert [t.override for t in transcript.turns] == ["conductor", "step 0", "step 1", "step 1, asked again"]
    again = transcript.turns[3]
    assert again.attempt == 1 and again.messages[-2].content == "The function above doubles its argument."
    assert transcript.answer == code
    assert transcript.workflow is not None
    assert [s["reasked"] for s in transcript.workflow["steps"]] == [False, True]
    assert transcript.workflow["steps"][1]["turns"] == [2, 3]

    # A last step that answers is asked once.
    fine = [{**r, "reply": code} if r["match"] == "step 1 of" else r for r in rules]
    models = [{"name": f"m{i}", "kind": "scripted", "rules": fine} for i in range(2)]
    pool = Pool(parse_pool(yaml.safe_dump({"name": "c", "models": models}), "t"))
    assert len(run_conductor("Write double(x).", pool, kind="code").turns) == 3


def test_the_workflow_schema_takes_exactly_the_workflows_that_read_as_written() -> None:
    from jsonschema import Draft202012Validator

    from trinity_cli.conductor.workflow import SUBTASK_CHARS, read_workflow, workflow_schema

    validator = Draft202012Validator(workflow_schema(["m0", "m1"], max_steps=3, allow_self=False))
    good = [{"model_id": ["m0"], "subtasks": ["Solve it."], "access_list": [[]]},
            {"model_id": ["m0", "m1", "m0"], "subtasks": ["a", "b", "c"], "access_list": [[], [0], "all"]},
            {"model_id": ["m1", "m1"], "subtasks": ["a", "b"], "access_list": [[], []]}]
    bad = [{"model_id": ["m0", "m1"], "subtasks": ["a"], "access_list": [[], [0]]},           # unequal lengths
           {"model_id": ["m9"], "subtasks": ["a"], "access_list": [[]]},                       # unknown member
           {"model_id": ["conductor"], "subtasks": ["a"], "access_list": [[]]},                # no recursion allowed
           {"model_id": ["m0", "m1"], "subtasks": ["a", "b"], "access_list": [[], [1]]},       # reads itself
           {"model_id": ["m0"], "subtasks": ["a"], "access_list": ["all"]},                    # step 0 reads nothing
           {"model_id": ["m0"] * 4, "subtasks": ["a"] * 4, "access_list": [[], [], [], []]},   # too many steps
           {"model_id": ["m0"], "subtasks": [""], "access_list": [[]]},                        # empty subtask
           {"model_id": ["m0"], "subtasks": ["x" * (SUBTASK_CHARS + 1)], "access_list": [[]]},
           {"model_id": ["m0"], "subtasks": ["a"], "access_list": [[]], "note": "extra"}]
    for workflow in good:
        assert validator.is_valid(workflow), workflow
        reading = read_workflow(json.dumps(workflow), ["m0", "m1"], max_steps=3, allow_self=False)
        assert reading.workflow is not None and reading.repairs == [], workflow
    for workflow in bad:
        assert not validator.is_valid(workflow), workflow
    assert Draft202012Validator(workflow_schema(["m0"], 2, allow_self=True)).is_valid(
        {"model_id": ["m0", "conductor"], "subtasks": ["a", "b"], "access_list": [[], [0]]})


def test_a_conductor_that_decodes_under_a_schema_is_given_the_workflow_schema(monkeypatch) -> None:
    """A backend that says it can decode under a JSON schema gets the workflow's schema (and
    a reply cap that holds the longest workflow it allows); the schema is part of the call's
    cache key; one that cannot is called as before, with no schema in its key."""
    from trinity_cli.backends.scripted import ScriptedBackend
    from trinity_cli.conductor.run import SCHEMA_REPLY_TOKENS
    from trinity_cli.pool.rollout_cache import rollout_request

    seen: list = []
    original = ScriptedBackend.chat

    def spy(self, messages, params):
        seen.append(params)
        return original(self, messages, params)

    monkeypatch.setattr(ScriptedBackend, "chat", spy)
    free = run_conductor(QUESTION, Pool(pool_config()))
    assert free.workflow is not None and free.workflow["constrained"] is False
    assert seen[0].json_schema is None and "json_schema" not in rollout_request("f", [], seen[0])["params"]

    seen.clear()
    monkeypatch.setattr(ScriptedBackend, "supports_json_schema", lambda self: True)
    bound = run_conductor(QUESTION, Pool(pool_config()))
    assert bound.workflow is not None and bound.workflow["constrained"] is True
    schema = json.loads(seen[0].json_schema)
    assert [len(s["properties"]["model_id"]["prefixItems"]) for s in schema["oneOf"]] == [1, 2, 3, 4, 5]
    # the properties in the order they are to be written (a grammar follows this order): the
    # steps' members and subtasks before the access lists that wire them
    assert all(list(s["properties"]) == ["model_id", "subtasks", "access_list"] for s in schema["oneOf"])
    assert seen[0].max_tokens == max(512, SCHEMA_REPLY_TOKENS)
    assert all(p.json_schema is None for p in seen[1:])  # only the conductor's call is constrained
    assert rollout_request("f", [], seen[0])["params"]["json_schema"] == seen[0].json_schema


def test_excluded_members_are_not_offered_and_naming_one_is_refused() -> None:
    transcript = run_conductor(QUESTION, Pool(pool_config()), exclude=["m1"])

    assert "- m1:" not in transcript.turns[0].messages[-1].content
    assert transcript.stop_reason == "fallback"
    assert transcript.workflow is not None and "no member 'm1'" in transcript.workflow["fallback"]


RECURSIVE = flow(["m0", "conductor"], ["Solve it.", "Check the draft."], [[], [0]])


def test_naming_the_conductor_runs_a_nested_workflow_to_the_depth_allowed() -> None:
    nested_reply = flow(["m1"], ["Check it."], [[]])
    rules = [{"match": "The part to work out now: Check the draft(?s:.*)You are the conductor", "reply": nested_reply},
             {"match": "You are the conductor", "reply": RECURSIVE}, *STEP_RULES]
    models = [{"name": f"m{i}", "kind": "scripted", "rules": rules} for i in range(2)]
    pool = Pool(parse_pool(yaml.safe_dump({"name": "c", "models": models}), "t"))

    transcript = run_conductor(QUESTION, pool, ConductorSpec(depth=1))
    assert [(t.index, t.model, t.override) for t in transcript.turns] == [
        (0, "m0", "conductor"), (1, "m0", "step 0"), (2, "m0", "conductor (depth 1)"), (3, "m1", "step 0 (depth 1)")]
    nested_prompt = transcript.turns[2].messages[-1].content
    assert "What the team has so far:\nm-m0 first: 84" in nested_prompt
    assert "- conductor:" not in nested_prompt  # at the depth limit it is not offered
    record = transcript.workflow
    assert record is not None and record["topology"] == "chain+recursion"
    assert record["steps"][1]["turns"] == [2, 3] and record["steps"][1]["nested"]["turn"] == 2
    assert transcript.answer == transcript.turns[3].reply

    flat = run_conductor(QUESTION, pool, ConductorSpec(depth=0))
    assert [(t.model, t.override) for t in flat.turns] == [("m0", "conductor"), ("m0", "step 0"), ("m0", "step 1")]
    assert flat.workflow is not None
    assert flat.workflow["repairs"] == ["step 1: recursion deeper than 0: the conductor does it as a step"]
    assert "- conductor:" not in flat.turns[0].messages[-1].content


def test_every_turn_is_built_with_its_final_index_nested_fallback_and_parallel_steps_included() -> None:
    """A level that runs a nested workflow (whose conductor's reply cannot be read, so it falls
    back to agree) beside a plain step, then a merge: each turn reaches `progress` already
    numbered (run_conductor checks it), the fallback's turns numbered after the nested
    conductor's, and the run is the same on one thread or three."""
    top = flow(["conductor", "m1", "m0"], ["Work it out.", "Solve it.", "Merge."], [[], [], "all"])
    rules = [{"match": "The part to work out now: Work it out(?s:.*)You are the conductor", "reply": "Ask m1."},
             {"match": "You are the conductor", "reply": top}, *STEP_RULES]
    runs = []
    for parallel in (1, 3):
        models = [{"name": f"m{i}", "kind": "scripted", "rules": rules, "default": "Answer: 1"} for i in range(2)]
        pool = Pool(parse_pool(yaml.safe_dump({"name": "c", "parallel": parallel, "models": models}), "t"))
        seen: list[int] = []
        transcript = run_conductor(QUESTION, pool, ConductorSpec(depth=1),
                                   progress=lambda event, seen=seen: seen.append(event.turn.index))
        runs.append(transcript)
        assert seen == list(range(len(transcript.turns)))
    transcript = runs[0]
    assert [(t.index, t.model, t.override) for t in transcript.turns] == [
        (0, "m0", "conductor"), (1, "m0", "conductor (depth 1)"), (2, "m0", "fallback: agree (depth 1)"),
        (3, "m1", "fallback: agree (depth 1)"), (4, "m1", "step 1"), (5, "m0", "step 2")]
    record = transcript.workflow
    assert record is not None
    nested = record["steps"][0]["nested"]
    assert nested["turn"] == 1 and nested["fallback"] and [s["turns"] for s in nested["steps"]] == [[2], [3]]
    assert [s["turns"] for s in record["steps"]] == [[1, 2, 3], [4], [5]]
    assert [t.to_dict() | {"latency_s": 0} for t in runs[0].turns] == [
        t.to_dict() | {"latency_s": 0} for t in runs[1].turns]


def test_a_separate_conductor_entry_conducts_and_is_not_a_member() -> None:
    config = pool_config(conductor={"name": "boss", "kind": "scripted", "default": PARALLEL,
                                    "description": "writes plans"})
    assert config.names == ["m0", "m1"] and config.conductor_name == "boss"
    transcript = run_conductor(QUESTION, Pool(config))
    assert transcript.turns[0].model == "boss" and transcript.turns[0].model_probs == [0.0, 0.0]
    assert transcript.workflow is not None and transcript.workflow["conductor"] == "boss"
    with pytest.raises(ConfigError, match="has no model 'm7'"):
        run_conductor(QUESTION, Pool(config), ConductorSpec(conductor="m7"))


def test_a_member_named_conductor_and_an_unknown_conductor_are_refused() -> None:
    with pytest.raises(ConfigError, match="is how a Conductor names itself"):
        parse_pool(yaml.safe_dump({"name": "x", "models": [{"name": "conductor", "kind": "scripted"}]}), "p.yaml")
    with pytest.raises(ConfigError, match="conductor: the pool has no model 'm9'"):
        pool_config(conductor="m9")


def test_code_steps_are_run_against_the_tasks_examples_and_later_steps_see_it() -> None:
    from trinity_cli.turns.settle import Examples

    code = "```python\ndef double(x):\n    return x * 3\n```"
    reply = flow(["m0", "m1"], ["Write it.", "Fix it."], [[], [0]])
    rules = [{"match": "You are the conductor", "reply": reply}, {"match": "step 0 of", "reply": code},
             {"match": "step 1 of", "reply": "```python\ndef double(x):\n    return x * 2\n```"}]
    models = [{"name": f"m{i}", "kind": "scripted", "rules": rules} for i in range(2)]
    pool = Pool(parse_pool(yaml.safe_dump({"name": "c", "models": models}), "t"))
    task = "Write double(x).\nassert double(2) == 4"

    transcript = run_conductor(task, pool, kind="code", examples=Examples("assert double(2) == 4"))
    assert transcript.turns[1].examples_passed is False and transcript.turns[2].examples_passed is True
    assert "(trinity ran the task's examples on this code: failed `assert double(2) == 4`" in \
        transcript.turns[2].messages[-1].content


def test_a_replayed_run_makes_no_model_call() -> None:
    config = pool_config()
    with open_pool(config) as pool:
        first = run_conductor(QUESTION, pool)
    with open_pool(config) as pool:
        again = run_conductor(QUESTION, pool)
        assert pool.stats.calls == 4 and pool.stats.cache_hits == 4
    assert not any(t.cached for t in first.turns) and all(t.cached for t in again.turns)
    assert again.answer == first.answer


# -- the command line ------------------------------------------------------------------


def conducted_pool_file(tmp_path: Path) -> Path:
    rules = [{"match": "You are the conductor", "reply": PARALLEL}, *STEP_RULES]
    models = [{"name": f"m{i}", "kind": "scripted", "rules": rules, "default": "Answer: 1"} for i in range(2)]
    return write_pool(tmp_path, {"name": "conducted", "models": models})


def test_ask_in_conductor_mode_prints_the_answer_and_inspect_draws_the_workflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    pool = str(conducted_pool_file(tmp_path))
    code, out, err = run_main(["ask", QUESTION, "--pool", pool, "--mode", "conductor"], monkeypatch, capsys)
    assert code == 0, err
    assert out.strip() == "84"
    assert "conductor mode: m0 writes the workflow" in err and "workflow run" in err

    code, out, err = run_main(["inspect", "run-1"], monkeypatch, capsys)
    assert code == 0, err
    assert "conductor m0" in out and "workflow by m0" in out and "parallel+merge, 3 steps" in out
    assert "reads steps 0, 1" in out and "Merge the answers." in out

    code, out, _ = run_main(["inspect", "run-1", "--json"], monkeypatch, capsys)
    record = json.loads(out)
    assert record["mode"] == "conductor" and record["head"] is None and record["conductor"] == "m0"
    assert record["transcript"]["workflow"]["topology"] == "parallel+merge"


@pytest.mark.parametrize(("args", "message"), [
    (["--mode", "conductor", "--conductor", "m7"], "--conductor: the pool 'conducted' has no model 'm7'"),
    (["--mode", "chorus"], "--mode: unknown policy 'chorus' — choose from: agree, conductor, coordinator"),
])
def test_bad_conductor_options_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys,
                                            args: list[str], message: str) -> None:
    pool = str(conducted_pool_file(tmp_path))
    code, out, err = run_main(["ask", QUESTION, "--pool", pool, *args], monkeypatch, capsys)
    assert code != 0 and out == ""
    assert message in err and "Traceback" not in err


# -- bench and serve -------------------------------------------------------------------


def bench_files(tmp_path: Path) -> tuple[Path, Path]:
    """Items tagged [A] get a readable parallel workflow, [B] an unreadable one (its fallback,
    the agree procedure, asks the members from the task alone: they answer 7, as the singles
    do); step 0 answers 84 on [A], the merge 42."""
    rules = [{"match": r"\[B\](?s:.*)You are the conductor", "reply": "Let m1 do it."},
             {"match": "You are the conductor", "reply": PARALLEL},
             {"match": "step 2 of", "reply": "Answer: 42"},
             {"match": "step 0 of", "reply": "Answer: 84"},
             {"match": "step 1 of", "reply": "Answer: 42"},
             {"match": "Solve the task now", "reply": "Answer: 7"}]
    models = [{"name": f"m{i}", "kind": "scripted", "rules": rules} for i in range(2)]
    pool = write_pool(tmp_path, {"name": "conducted", "models": models})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Question q{i} [{'AB'[i % 2]}]: six times seven?",
                                         "answer": 42, "scorer": "numeric"}) + "\n" for i in range(40)))
    return pool, tasks


def test_bench_conductor_row_reports_workflows_and_replays_from_the_cache(tmp_path: Path) -> None:
    from trinity_cli.bench.options import BenchOptions
    from trinity_cli.bench.runner import bench

    assert "conductor" not in BenchOptions().kinds()  # opt-in: named in --systems
    pool, tasks = bench_files(tmp_path)
    options = BenchOptions(pool=str(pool), tasks=f"file:{tasks}:test", systems=["single", "conductor"])
    first = bench(options).data
    again = bench(options).data

    row = first["results"]["conductor"]["overall"]
    share_b = first_b_share(tasks, first)
    assert 0 < share_b < 1 and row["n"] == 8 and row["accuracy"] == pytest.approx(1 - share_b)
    assert first["results"]["single:m0"]["overall"]["accuracy"] == 0.0
    flows = first["workflows"]["conductor"]["overall"]
    assert flows["episodes"] == 8
    assert flows["fallback"] == pytest.approx(share_b) and flows["errors"] == 0.0 and flows["reasked"] == 0.0
    assert flows["well_formed"] == pytest.approx(1 - flows["fallback"])
    assert set(flows["topologies"]) == {"parallel+merge", "agree"}
    assert first["paired"]["conductor"]["vs_best_single"]["b"] == round(8 * (1 - share_b))
    assert [s["model"] for s in first["systems"] if s["name"] == "conductor"] == ["m0"]
    report = (Path(first_run_dir()) / "report.md").read_text()
    assert "## Workflows the conductor wrote (share of questions)" in report
    assert "How episodes ended" not in report  # a conductor's runs end when the workflow does
    assert again["stats"]["backend_calls"] == 0 and again["results"] == first["results"]


def first_b_share(tasks: Path, data: dict) -> float:
    prompts = {json.loads(line)["id"]: json.loads(line)["prompt"] for line in tasks.read_text().splitlines()}
    ids = [item["id"] for item in data["items"]]
    return sum("[B]" in prompts[i] for i in ids) / len(ids)


def first_run_dir() -> Path:
    from trinity_cli.runs.store import RunStore

    return RunStore().path("run-1")


def test_serve_answers_trinity_conductor_in_conductor_mode(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from trinity_cli.serve import create_app
    from trinity_cli.serve.service import ServeOptions

    pool = conducted_pool_file(tmp_path)
    with TestClient(create_app(ServeOptions(pool=str(pool)))) as client:
        listing = [m["id"] for m in client.get("/v1/models").json()["data"]]
        reply = client.post("/v1/chat/completions", json={"model": "trinity/conductor",
                                                          "messages": [{"role": "user", "content": QUESTION}]})
        streamed = client.post("/v1/chat/completions", json={
            "model": "trinity/conductor", "stream": True, "messages": [{"role": "user", "content": QUESTION}]})
    assert "trinity/conductor" in listing
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["choices"][0]["message"]["content"] == "84"
    assert body["trinity"]["head"] is None and body["trinity"]["stop_reason"] == "workflow"
    assert body["trinity"]["workflow"]["topology"] == "parallel+merge"
    assert body["trinity"]["workflow"]["model_id"] == ["m0", "m1", "m0"]
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines()
              if line.startswith("data: {")]
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks if c["choices"])
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert content == "84"
    assert "m0 thinker (conductor)" in reasoning and "m1 worker (step 1)" in reasoning


def test_pools_lists_who_conducts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    home = tmp_path / "home" / "pools"
    home.mkdir(parents=True)
    write_pool(home, {"name": "mine", "conductor": {"name": "boss", "kind": "scripted"},
                      "models": [{"name": "m0", "kind": "scripted"}]}, name="mine.yaml")
    code, out, err = run_main(["pools"], monkeypatch, capsys)
    assert code == 0, err
    assert "m0 (scripted, reason), boss (scripted, reason, conductor, not a member)" in out
    assert "qwen1.5b-reason (gguf, reason, conductor)" in out
