"""`trinity bench`'s moa row, the paired test of heads and the selection by task, on
scripted pools whose answers are known.

The moa pool (items tagged [A], [B], [C]; every answer is 42; the test split holds 2 A, 3 B, 3 C):
    m0  reason: right on A and B, wrong (7) on C; as aggregator, right when the program
        member's executed answer (third) is 42, else it answers as it would alone
    m1  reason: right on C only
    m2  program: prints 42 on C, 5 elsewhere (run in the sandbox)
So the singles score 5/8, 3/8, 3/8; m0 aggregates, and moa scores 8/8.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trinity_cli.answer_kinds import answer_kind
from trinity_cli.bench import moa as moa_mod
from trinity_cli.bench.options import BenchOptions
from trinity_cli.bench.runner import bench
from trinity_cli.bench.stats import mcnemar_exact, paired_test
from trinity_cli.bench.systems import EpisodeResult
from trinity_cli.events import BenchEpisodeFinished, BenchStarted
from trinity_cli.messages import Role, Transcript
from trinity_cli.render import console, results, terminal
from trinity_cli.runs.store import RunStore
from trinity_cli.turns import prompts

from .conftest import write_pool
from .test_bench import count_backend_calls, hash_head, options, setup_files

# m0 as aggregator, once it reads the program member's executed answer 42 (third).
AGGREGATE_SEEN_PROGRAM = r"from 3 assistants.*\[Answer 3\].*Program output.*Answer: 42.*Solve the task"
MOA_MODELS = [
    {"name": "m0", "kind": "scripted", "rules": [
        {"match": AGGREGATE_SEEN_PROGRAM, "reply": "Two of the three answers agree.\nAnswer: 42"},
        {"match": r"\[C\].*Solve the task now", "reply": "Answer: 7"},
        {"match": "Solve the task now", "reply": "Answer: 42"}]},
    {"name": "m1", "kind": "scripted", "rules": [
        {"match": r"\[C\].*Solve the task now", "reply": "Answer: 42"},
        {"match": "Solve the task now", "reply": "Answer: 7"}]},
    {"name": "m2", "kind": "scripted", "style": "program", "rules": [
        {"match": r"\[C\].*Write the program now", "reply": "```python\nprint(6 * 7)\n```"},
        {"match": "Write the program now", "reply": "```python\nprint(5)\n```"}]},
]


def moa_files(tmp_path: Path, models: list[dict] = MOA_MODELS) -> tuple[Path, Path]:
    pool = write_pool(tmp_path, {"name": "moa", "models": models})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(
        json.dumps({"id": f"q{i}", "prompt": f"Question q{i} [{'ABC'[i % 3]}]: what is six times seven?",
                    "answer": 42, "scorer": "numeric"}) + "\n" for i in range(40)))
    return pool, tasks


def episodes_jsonl(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]


def test_moa_reuses_the_single_calls_and_aggregates_with_the_strongest_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    pool, tasks = moa_files(tmp_path)
    calls = count_backend_calls(monkeypatch)
    result = bench(BenchOptions(pool=str(pool), tasks=f"file:{tasks}:test", systems=["single", "moa"]))
    data = result.data
    assert [s["name"] for s in data["systems"]] == ["single:m0", "single:m1", "single:m2", "moa"]
    res = {name: r["overall"] for name, r in data["results"].items()}
    assert [res[f"single:m{i}"]["correct"] for i in range(3)] == [5, 3, 3]
    # The aggregator is the best single member; moa reads every member and beats each.
    assert data["systems"][-1]["model"] == "m0" and data["systems"][-1]["max_turns"] == 4
    assert res["moa"]["correct"] == 8 and res["moa"]["mean_turns"] == 4.0 and res["moa"]["mean_pool_calls"] == 4.0
    # Members are not asked again: 8 items x (3 single calls + 1 aggregator call).
    assert len(calls) == 8 * 4 == data["stats"]["backend_calls"]

    lines = episodes_jsonl(result.run_dir)
    singles = {(ln["system"], ln["item"]): Transcript.from_dict(ln["transcript"]) for ln in lines
               if ln["system"].startswith("single:")}
    moas = [ln for ln in lines if ln["system"] == "moa"]
    assert len(moas) == 8 and all(ln["reward"] == 1.0 for ln in moas)
    item_prompts = {json.loads(x)["id"]: json.loads(x)["prompt"] for x in tasks.read_text().splitlines()}
    for line in moas:
        moa = Transcript.from_dict(line["transcript"])
        members = [singles[(f"single:m{i}", line["item"])] for i in range(3)]
        # The member turns are the single runs' own turns: same messages, params, replies.
        for i, (turn, single) in enumerate(zip(moa.turns[:3], members, strict=True)):
            assert turn.index == i and turn.model == f"m{i}" and turn.role is Role.WORKER
            assert turn.messages == single.turns[0].messages and turn.reply == single.turns[0].reply
        assert moa.turns[2].execution is not None  # the program member's answer was run
        agg = moa.turns[3]
        assert (agg.index, agg.model, agg.role, agg.override) == (3, "m0", Role.WORKER, moa_mod.OVERRIDE)
        task = prompts.aggregate_task(item_prompts[line["item"]], [m.answer for m in members])
        numeric = answer_kind("numeric")
        assert agg.messages == prompts.build_messages(Role.WORKER, task, [], style="reason", kind=numeric)
        assert "m0" not in task and "[Answer 3]" in task  # answers are anonymous, in pool order
        assert moa.answer == agg.reply and moa.task == item_prompts[line["item"]]
        tokens = sum(m.prompt_tokens + m.completion_tokens for m in members) + agg.prompt_tokens \
            + agg.completion_tokens
        episode = next(e for e in data["episodes"] if e["system"] == "moa" and e["item"] == line["item"])
        assert episode["tokens"] == tokens and episode["turns"][-1] == ["m0", "worker"]
    # Readable by the transcript replay (inspect), aggregator marked.
    terminal.replay_transcript("moa", ["m0", "m1", "m2"], moas[0]["transcript"])
    shown = capsys.readouterr().out
    assert "turn 4 · m0 · worker" in shown and "Answers to this task from 3 assistants" in shown
    # Tokens and seconds per question are in the report for moa like every row.
    report = (result.run_dir / "report.md").read_text()
    assert "| moa | 100.0% |" in report and "Mixture-of-Agents" in report
    # A second run makes no model call at all.
    calls.clear()
    again = bench(BenchOptions(pool=str(pool), tasks=f"file:{tasks}:test", systems=["single", "moa"]))
    assert calls == [] and again.data["per_item"] == data["per_item"]


def test_a_program_aggregator_writes_a_program_that_is_run(tmp_path: Path) -> None:
    models = [
        {"name": "p0", "kind": "scripted", "style": "program", "rules": [
            {"match": r"Answers to this task from.*Write the program now",
             "reply": "```python\nanswers = [7, 42]\nprint(max(answers))\n```"},
            {"match": r"\[C\].*Write the program now", "reply": "```python\nprint(7)\n```"},
            {"match": "Write the program now", "reply": "```python\nprint(42)\n```"}]},
        {"name": "r1", "kind": "scripted", "rules": [
            {"match": r"\[C\].*Solve the task now", "reply": "Answer: 42"},
            {"match": "Solve the task now", "reply": "Answer: 7"}]},
    ]
    pool, tasks = moa_files(tmp_path, models)
    result = bench(BenchOptions(pool=str(pool), tasks=f"file:{tasks}:test", systems=["moa"]))
    data = result.data
    assert [s["name"] for s in data["systems"]] == ["moa"]  # the single runs played, not reported
    assert data["systems"][0]["model"] == "p0" and data["results"]["moa"]["overall"]["correct"] == 8
    for line in (ln for ln in episodes_jsonl(result.run_dir) if ln["system"] == "moa"):
        agg = Transcript.from_dict(line["transcript"]).turns[-1]
        instruction = prompts.INSTRUCTIONS["program"][Role.WORKER]
        assert agg.messages[1].content.endswith(instruction + "\nWrite the program now.")
        assert agg.execution is not None and agg.execution["answer"] == "42" and agg.reply.endswith("Answer: 42")


def test_moa_leaves_out_members_that_could_not_answer(tmp_path: Path) -> None:
    tiny = {"name": "tiny", "kind": "scripted", "n_ctx": 256, "default": "Answer: 42"}
    pool = write_pool(tmp_path, {"name": "mixed", "models": [MOA_MODELS[0], tiny]})
    tasks = tmp_path / "long.jsonl"
    tasks.write_text(json.dumps({"id": "long", "prompt": "word " * 400 + "[A] what is six times seven?",
                                 "answer": 42, "scorer": "numeric"}) + "\n")
    result = bench(BenchOptions(pool=str(pool), tasks=f"file:{tasks}:all", systems=["moa"]))
    moa = next(ln for ln in episodes_jsonl(result.run_dir) if ln["system"] == "moa")
    turns = moa["transcript"]["turns"]
    assert [(t["model"], t["override"]) for t in turns] == [("m0", None), ("m0", moa_mod.OVERRIDE)]
    assert "Answers to this task from one assistant" in turns[1]["messages"][1]["content"]
    assert moa["reward"] == 1.0

    # No member fits: nothing to aggregate, scored wrong, and every announced episode is reported.
    only = write_pool(tmp_path, {"name": "small", "models": [tiny]}, name="small.yaml")
    events: list = []
    data = bench(BenchOptions(pool=str(only), tasks=f"file:{tasks}:all", systems=["moa"]),
                 progress=events.append).data
    episode = next(e for e in data["episodes"] if e["system"] == "moa")
    assert episode["error"] == "no member answered" and episode["reward"] == 0.0 and episode["turns"] == []
    start = next(e for e in events if isinstance(e, BenchStarted))
    assert start.episodes == sum(isinstance(e, BenchEpisodeFinished) for e in events) == 2


def test_pick_aggregator_and_aggregate_task() -> None:
    def ep(system: str, reward: float) -> EpisodeResult:
        return EpisodeResult(system, "t", "q", 0, reward, "A", [], "max_turns", 0, 0.0, None, False)

    singles = {"a": [ep("single:a", 0.0), ep("single:a", 1.0)], "b": [ep("single:b", 1.0)],
               "c": [ep("single:c", 1.0)]}
    assert moa_mod.pick_aggregator(singles, ["a", "b", "c"]) == "b"  # b and c tie: pool order
    assert moa_mod.pick_aggregator({}, ["a", "b"]) == "a"
    long = "Step one. " * 400 + "Answer: 42"
    text = prompts.aggregate_task("Q?", ["Answer: 7", long], limit=300)
    assert text.startswith("Q?\n\nAnswers to this task from 2 assistants follow.")
    assert "[Answer 1]\nAnswer: 7\n\n[Answer 2]\nStep one." in text
    assert text.count("Step one.") < 40 and "[…]" in text and "Answer: 42\n\nSynthesize" in text  # the end is kept
    assert moa_mod.member_answers([None, Transcript("t", answer="  "), Transcript("t", answer="x")]) == ["x"]
    fits_short = moa_mod.aggregation_task
    from trinity_cli.tasks.items import TaskItem

    item = TaskItem("t", "q", "Q?", "42", "numeric")
    assert fits_short(item, [], lambda text: True) is None
    # Clipped harder until it fits.
    room = len(prompts.aggregate_task("Q?", [long], 400))  # the 400-character clip fits, 800 does not
    assert fits_short(item, [long], lambda text: len(text) <= room) == prompts.aggregate_task("Q?", [long], 400)


@pytest.mark.parametrize("b,c,p", [
    (0, 0, 1.0), (5, 0, 0.0625), (0, 5, 0.0625), (10, 2, 158 / 4096), (3, 3, 1.0), (1, 0, 1.0),
    (20, 5, 2 * sum(__import__("math").comb(25, k) for k in range(6)) / 2**25),
])
def test_mcnemar_exact(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)
    assert 0.0 < mcnemar_exact(b, c) <= 1.0


def test_mcnemar_exact_is_binomial_and_refuses_negatives() -> None:
    # 12 discordant items, 2 one way: scipy.stats.binomtest(2, 12).pvalue == 0.0385742...
    assert mcnemar_exact(2, 10) == pytest.approx(0.03857421875)
    assert mcnemar_exact(300, 0) < 1e-80  # big n stays exact, no overflow
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)
    test = paired_test({"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0, "x": 1.0}, {"a": 0.0, "b": 1.0, "c": 1.0, "d": 0.0},
                       "single:m")
    assert test == {"other": "single:m", "n": 4, "b": 1, "c": 1, "p_value": 1.0}


def test_heads_get_a_paired_test_and_a_selection_by_task(tmp_path: Path, monkeypatch, capsys) -> None:
    pool, tasks = setup_files(tmp_path)
    head = str(hash_head(tmp_path / "head"))
    result = bench(options(pool, tasks, heads=[head], random_seeds=1))
    data = result.data
    per_item = data["per_item"]
    paired = data["paired"]["head:hashy"]
    # Best single m0 (5/8); best self-loop m0 (5/8, first of the ties); agree and sc:best@5 (m0's).
    assert paired["vs_best_single"]["other"] == "single:m0"
    assert paired["vs_best_selfloop"]["other"] == "selfloop:m0"
    assert paired["vs_agree"]["other"] == "agree" and paired["vs_best_sc"]["other"] == "sc:best@5"
    for test in paired.values():
        other = per_item[test["other"]]
        mine = per_item["head:hashy"]
        assert test["n"] == 8
        assert test["b"] == sum(mine[k] == 1.0 and other[k] == 0.0 for k in mine)
        assert test["c"] == sum(mine[k] == 0.0 and other[k] == 1.0 for k in mine)
        assert test["p_value"] == mcnemar_exact(test["b"], test["c"])
    assert "random" not in data["paired"] and "moa" not in data["paired"]
    # Selection: shares of each (member, role) pair, per task, adding up to the marginals.
    sel = data["selection"]["head:hashy"]["overall"]
    turns = [tuple(t) for e in data["episodes"] if e["system"] == "head:hashy" for t in e["turns"]]
    for m in ("m0", "m1", "m2"):
        for r in ("thinker", "worker", "verifier"):
            assert sel["pairs"][m][r] == pytest.approx(turns.count((m, r)) / len(turns))
        assert sum(sel["pairs"][m].values()) == pytest.approx(sel["models"][m])
    # Report, chart and terminal (inspect) show both.
    report = (result.run_dir / "report.md").read_text()
    assert "## Paired test of each head and conductor (exact McNemar, two-sided, same items)" in report
    assert f"| head:hashy | single:m0 | 8 | {paired['vs_best_single']['b']} |" in report
    assert "### head:hashy: member as role" in report and "Selection by task" in report
    assert (result.run_dir / "selection.png").stat().st_size > 1000
    assert "selection.png" in RunStore().load(result.run_id)["files"]
    # Redirected (capsys is no terminal), inspect prints report.md itself.
    results.replay_bench(RunStore().load(result.run_id))
    assert capsys.readouterr().out == report
    # On a terminal, the same tables drawn by Rich, random's selection left out (uniform by design).
    on_terminal(monkeypatch)
    results.replay_bench(RunStore().load(result.run_id))
    shown = capsys.readouterr().out
    assert "Paired test" in shown and "selfloop:m0" in shown and "head:hashy: member as role" in shown
    assert "random: member as role" not in shown


def test_a_bench_without_heads_has_no_paired_test_or_selection_chart(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    result = bench(options(pool, tasks, random_seeds=1, systems=["single", "random"]))
    assert result.data["paired"] == {}
    assert not (result.run_dir / "selection.png").exists()
    assert "## Paired test" not in (result.run_dir / "report.md").read_text()


def on_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """render's stdout console as on a terminal (Rich tables), without colour codes."""
    from rich.console import Console

    monkeypatch.setattr(console, "out", Console(highlight=False, soft_wrap=True, force_terminal=True,
                                               color_system=None, width=120))


def test_old_bench_runs_still_replay(tmp_path: Path, capsys, monkeypatch) -> None:
    """Runs written before the paired test and pair shares: inspect shows them as before."""
    pool, tasks = setup_files(tmp_path)
    head = str(hash_head(tmp_path / "head"))
    result = bench(options(pool, tasks, heads=[head], random_seeds=0, systems=["single", "head"]))
    record = RunStore().load(result.run_id)
    del record["summary"]["paired"]
    for sel in record["summary"]["selection"].values():
        for share in [sel["overall"], *sel["per_task"].values()]:
            del share["pairs"]
    on_terminal(monkeypatch)
    results.replay_bench(record)
    shown = capsys.readouterr().out
    assert "head:hashy" in shown and "member as role" not in shown and "Paired test" not in shown


def test_a_conductor_row_is_paired_with_each_head_row(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    head = str(hash_head(tmp_path / "head"))
    data = bench(options(pool, tasks, heads=[head], random_seeds=0,
                         systems=["single", "agree", "head", "conductor"])).data
    per_item = data["per_item"]
    conductor = data["paired"]["conductor"]
    assert set(conductor) == {"vs_best_single", "vs_best_selfloop", "vs_agree", "vs_best_sc", "vs_head:hashy"}
    test = conductor["vs_head:hashy"]
    mine, other = per_item["conductor"], per_item["head:hashy"]
    assert test["other"] == "head:hashy" and test["n"] == 8
    assert (test["b"], test["c"]) == (sum(mine[k] > other[k] for k in mine), sum(mine[k] < other[k] for k in mine))
    assert "vs_conductor" not in data["paired"]["head:hashy"]  # the head rows keep their own tests
