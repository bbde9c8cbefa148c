"""`trinity bench` on a scripted pool whose right and wrong answers are known: exact numbers.

Items are tagged [A], [B] or [C]; every answer is 42. The pool:
    m0  Worker right on A and B, wrong (7) on C, every attempt alike
    m1  Worker right on C only, wrong (7) on A and B; priced, so it has a cost
    m2  Worker wrong on every fresh try ("5<seed>": 50, then a new number each attempt),
        right once earlier turns are shown (a reviser)
Verifiers outside code answer alone (the Worker's prompt) and ACCEPT when they agree with an
earlier answer, so m0's and m1's self-loops stop after Worker + Verifier, right or wrong.
The test split of the 40-item file (ids decide it) holds 8 items: 2 A, 3 B, 3 C.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trinity_cli.bench.options import BenchOptions, held_out_mix
from trinity_cli.bench.runner import bench
from trinity_cli.bench.stats import wilson_interval
from trinity_cli.coordinator import head as head_mod
from trinity_cli.coordinator.backbone_refs import describe
from trinity_cli.coordinator.policy import versions
from trinity_cli.episode.schedules import FixedSchedule
from trinity_cli.errors import ConfigError, ContextOverflow, NotFound
from trinity_cli.events import BenchEpisodeFinished
from trinity_cli.messages import Role
from trinity_cli.render import results
from trinity_cli.runs.store import RunStore

from .conftest import run_main, write_pool

PLAN = "Plan: compute it.\nNext: worker"
MODELS = [
    {"name": "m0", "kind": "scripted", "default": PLAN, "rules": [
        {"match": r"\[C\].*Solve the task now", "reply": "Answer: 7"},
        {"match": "Solve the task now", "reply": "Answer: 42"}]},
    {"name": "m1", "kind": "scripted", "default": PLAN, "price": {"input_per_1k": 1.0, "output_per_1k": 2.0},
     "rules": [{"match": r"\[C\].*Solve the task now", "reply": "Answer: 42"},
               {"match": "Solve the task now", "reply": "Answer: 7"}]},
    {"name": "m2", "kind": "scripted", "default": PLAN, "rules": [
        {"match": r"Turns so far.*Solve the task now", "reply": "Fixed it.\nAnswer: 42"},
        {"match": "Solve the task now", "reply": "Answer: 5{seed}"}]},
]


def setup_files(tmp_path: Path) -> tuple[Path, Path]:
    pool = write_pool(tmp_path, {"name": "trio", "models": MODELS})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(
        json.dumps({"id": f"q{i}", "prompt": f"Question q{i} [{'ABC'[i % 3]}]: what is six times seven?",
                    "answer": 42, "scorer": "numeric"}) + "\n" for i in range(40)))
    return pool, tasks


def options(pool: Path, task_file: Path, **kw) -> BenchOptions:
    base = dict(pool=str(pool), tasks=f"file:{task_file}:test", max_turns=5, random_seeds=2, seed=0)
    base.update(kw)
    return BenchOptions(**base)


def count_backend_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from trinity_cli.backends.scripted import ScriptedBackend

    calls: list[int] = []
    original = ScriptedBackend.chat
    monkeypatch.setattr(ScriptedBackend, "chat", lambda self, m, p: calls.append(1) or original(self, m, p))
    return calls


def hash_head(directory: Path, name: str = "hashy", seed: int = 1) -> Path:
    fingerprint, _ = describe("hash:16")
    info = {"ref": "hash:16", "fingerprint": fingerprint, "hidden_size": 16}
    head = head_mod.untrained("trio", ["m0", "m1", "m2"], info, 16)
    head.weights[:] = np.random.default_rng(seed).normal(scale=3.0, size=head.weights.shape)
    head.manifest.update(name=name, trained=True, **versions())  # made under this trinity's versions
    head.save(directory)
    return directory


def test_exact_accuracies_oracle_selfloop_and_files(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    result = bench(options(pool, tasks))
    data = result.data
    res = {name: r["overall"] for name, r in data["results"].items()}
    assert [s["name"] for s in data["systems"]] == [
        "single:m0", "single:m1", "single:m2", "selfloop:m0", "selfloop:m1", "selfloop:m2", "sc:best@5", "agree",
        "random", "moa", "vote", "best-per-task", "oracle"]
    # Single models: one Worker turn each.
    assert (res["single:m0"]["correct"], res["single:m0"]["n"]) == (5, 8)
    assert res["single:m1"]["accuracy"] == 3 / 8 and res["single:m2"]["accuracy"] == 0.0
    assert all(res[f"single:m{i}"]["mean_turns"] == 1.0 for i in range(3))
    # Self-loops: a model that answers alike every time agrees with itself after W+V (2 turns).
    assert res["selfloop:m0"]["accuracy"] == 5 / 8 and res["selfloop:m0"]["mean_turns"] == 2.0
    assert res["selfloop:m1"]["accuracy"] == 3 / 8 and res["selfloop:m1"]["mean_turns"] == 2.0
    # The reviser: W 50, V alone 5<s1> (REVISE), W 42 (a vote: no turn it was shown said 42),
    # V 5<s3> (REVISE), W 42 (shown the first 42: no vote). No two votes agree, so the tie of
    # four single votes goes to the latest: wrong.
    assert res["selfloop:m2"]["accuracy"] == 0.0 and res["selfloop:m2"]["mean_turns"] == 5.0
    loop = next(e for e in data["episodes"] if e["system"] == "selfloop:m2")
    assert loop["stop_reason"] == "max_turns" and loop["answer"].startswith("Answer: 5")
    # sc:best@5 is m0's (the best single) five replies from the task alone: all alike.
    assert next(s for s in data["systems"] if s["name"] == "sc:best@5")["model"] == "m0"
    assert res["sc:best@5"]["accuracy"] == 5 / 8 and res["sc:best@5"]["mean_turns"] == 5.0
    # agree: m0, m1, m2 (50) all differ; m0's second reply agrees with its first, right on A
    # and B, wrong on C.
    assert res["agree"]["accuracy"] == 5 / 8 and res["agree"]["mean_turns"] == 4.0
    assert {e["stop_reason"] for e in data["episodes"] if e["system"] == "agree"} == {"agreed"}
    # Oracle: m0 solves A and B, m1 solves C; it costs every single run.
    assert res["oracle"]["accuracy"] == 1.0 and res["oracle"]["mean_turns"] is None
    assert res["oracle"]["mean_pool_calls"] == 3.0
    single_tokens = sum(res[f"single:m{i}"]["mean_tokens"] for i in range(3))
    assert res["oracle"]["mean_tokens"] == pytest.approx(single_tokens)
    assert res["single:m1"]["mean_cost_usd"] > 0 and res["single:m0"]["mean_cost_usd"] is None
    assert res["oracle"]["mean_cost_usd"] == pytest.approx(res["single:m1"]["mean_cost_usd"])
    assert data["per_item"]["oracle"] == {f"file:{tasks}/{q}": 1.0 for q in
                                          ("q13", "q8", "q25", "q9", "q27", "q2", "q37", "q5")}
    # Vote: three different answers on every item, so the tie goes to m0 (pool order).
    assert res["vote"]["correct"] == 5 and res["vote"]["mean_pool_calls"] == 3.0
    # One task: best-per-task is the best single model.
    assert data["best_per_task"] == {f"file:{tasks}": "m0"} and res["best-per-task"]["correct"] == 5
    # Random routing: 2 seeds per item, scored per item (mean over its seeds), within the turn budget.
    assert res["random"]["n"] == 8 and 1.0 <= res["random"]["mean_turns"] <= 5.0
    random_eps = [e for e in data["episodes"] if e["system"] == "random"]
    assert len(random_eps) == 16
    assert res["random"]["accuracy"] == pytest.approx(sum(e["reward"] for e in random_eps) / 16)
    # Wilson 95% interval of 5/8, and sane bounds everywhere.
    ci = (res["single:m0"]["ci_low"], res["single:m0"]["ci_high"])
    assert ci == pytest.approx((0.3057, 0.8632), abs=1e-4)
    for m in res.values():
        assert 0.0 <= m["ci_low"] <= m["accuracy"] <= m["ci_high"] <= 1.0
    assert res["oracle"]["ci_high"] == 1.0 and res["single:m2"]["ci_low"] == 0.0
    # Gaps and selection are given for routed systems; no trained head fits this pool.
    gap = data["gaps"]["random"]["overall"]
    assert gap["best_single"] == "single:m0"
    assert gap["vs_best_single"] == pytest.approx(res["random"]["accuracy"] - 5 / 8)
    assert gap["vs_oracle"] == pytest.approx(res["random"]["accuracy"] - 1.0)
    share = data["selection"]["random"]["overall"]
    assert sum(share["models"].values()) == pytest.approx(1.0)
    assert sum(share["roles"].values()) == pytest.approx(1.0)
    assert any("no trained head" in n for n in data["notes"])
    # Files and the run record.
    run_dir = result.run_dir
    on_disk = json.loads((run_dir / "bench.json").read_text())
    assert on_disk["format"] == "trinity-bench/1" and on_disk["results"] == data["results"]
    assert len(on_disk["episodes"]) == 8 * (3 + 3 + 1 + 1 + 2 + 1)
    assert len((run_dir / "episodes.jsonl").read_text().splitlines()) == 8 * (3 + 3 + 1 + 1 + 2 + 1)
    assert (run_dir / "chart.png").stat().st_size > 1000 and (run_dir / "cost.png").stat().st_size > 1000
    report = (run_dir / "report.md").read_text()
    assert "| selfloop:m0 | 62.5% |" in report and "| agree | 62.5% |" in report and "Wilson" in report
    record = RunStore().load(result.run_id)
    assert record["kind"] == "bench" and record["summary"]["results"] == data["results"]
    assert [(r.id, r.kind) for r in RunStore().list()] == [(result.run_id, "bench")]


def _tagged_file(path: Path, tags: str) -> Path:
    path.write_text("".join(
        json.dumps({"id": f"q{i}", "prompt": f"Question q{i} [{tags[i % len(tags)]}]: six times seven?",
                    "answer": 42, "scorer": "numeric"}) + "\n" for i in range(40)))
    return path


def test_vote_and_best_per_task(tmp_path: Path) -> None:
    # m0 is right on [A], m1 on [B], m2 on [B] and [C]; wrong answers are 7 (m0, m1) or 5 (m2).
    def model(name: str, right: str, wrong: str) -> dict:
        return {"name": name, "kind": "scripted", "rules": [
            {"match": rf"\[[{right}]\].*Solve the task now", "reply": "Answer: 42"},
            {"match": "Solve the task now", "reply": f"Answer: {wrong}"}]}

    pool = write_pool(tmp_path, {"name": "voters", "models": [
        model("m0", "A", "7"), model("m1", "B", "7"), model("m2", "BC", "5")]})
    first = _tagged_file(tmp_path / "ab.jsonl", "AB")
    second = _tagged_file(tmp_path / "c.jsonl", "C")
    result = bench(BenchOptions(pool=str(pool), tasks=f"file:{first}:test,file:{second}:test", max_turns=1,
                                random_seeds=0, systems=["vote", "best-per-task"]))
    data = result.data
    # Only the asked rows are reported, though the single runs they need were played.
    assert [s["name"] for s in data["systems"]] == ["vote", "best-per-task"]
    # Vote: [A] 42/7/5 is a three-way tie, which m0 (first in pool order) wins: right.
    # [B] 7/42/42: 42 by two votes: right. [C] 7/7/42: 7 by two votes: wrong.
    for key, reward in data["per_item"]["vote"].items():
        question = int(key.rsplit("q", 1)[1])
        tag = "C" if key.startswith(f"file:{second}") else "AB"[question % 2]
        assert reward == {"A": 1.0, "B": 1.0, "C": 0.0}[tag], key
    # best-per-task: per file, the best single member there (ties: pool order).
    singles = {f"single:{m}": {} for m in ("m0", "m1", "m2")}
    for ep in data["episodes"]:
        singles[ep["system"]][ep["item"], ep["task"]] = ep["reward"]
    for task in data["tasks"]:
        accs = [(sum(r for (_, t), r in singles[f"single:{m}"].items() if t == task), -i, m)
                for i, m in enumerate(("m0", "m1", "m2"))]
        assert data["best_per_task"][task] == max(accs)[2]
    assert data["best_per_task"][f"file:{second}"] == "m2"
    report = (result.run_dir / "report.md").read_text()
    assert "random routing" not in report  # none was run
    # Where the cost goes, per task: tokens per question and turns (vote plays no turns).
    cost = [data["results"][name]["per_task"][t] for name in ("vote", "best-per-task") for t in data["tasks"]]
    assert "## Per task (tokens per question · turns)" in report
    assert f"| vote | {cost[0]['mean_tokens']:.0f} · — | {cost[1]['mean_tokens']:.0f} · — |" in report
    assert f"| best-per-task | {cost[2]['mean_tokens']:.0f} · 1.00 | {cost[3]['mean_tokens']:.0f} · 1.00 |" in report
    assert data["results"]["best-per-task"]["per_task"][f"file:{second}"]["accuracy"] == 1.0
    with pytest.raises(ConfigError, match="`systems`: unknown policy 'votes'"):
        bench(BenchOptions(pool=str(pool), tasks=f"file:{first}:test", systems=["votes"]))


def test_second_run_is_served_by_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pool, tasks = setup_files(tmp_path)
    calls = count_backend_calls(monkeypatch)
    first = bench(options(pool, tasks))
    # Each self-loop's first turn is its single run's turn: a cache hit within the first run.
    assert first.data["stats"]["cache_hits"] >= 3 * 8
    assert len(calls) == first.data["stats"]["backend_calls"] > 0
    calls.clear()
    second = bench(options(pool, tasks))
    assert calls == [] and second.data["stats"]["backend_calls"] == 0
    assert second.data["stats"]["pool_calls"] == first.data["stats"]["pool_calls"]
    assert second.data["per_item"] == first.data["per_item"]
    assert second.run_id != first.run_id


def test_interrupt_keeps_no_run_and_rerun_resumes_through_cache(tmp_path: Path, monkeypatch) -> None:
    pool, tasks = setup_files(tmp_path)
    calls = count_backend_calls(monkeypatch)
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-a"))
    clean = bench(options(pool, tasks)).data["stats"]["backend_calls"]
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-b"))
    calls.clear()
    seen = {"episodes": 0}

    def ctrl_c(event) -> None:
        if isinstance(event, BenchEpisodeFinished):
            seen["episodes"] += 1
            if seen["episodes"] == 30:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bench(options(pool, tasks), progress=ctrl_c)
    assert not list((tmp_path / "home-b" / "runs").iterdir())
    before = len(calls)
    assert 0 < before < clean
    resumed = bench(options(pool, tasks))
    assert resumed.data["stats"]["backend_calls"] == clean - before  # nothing done twice


def test_heads_gaps_and_selection(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    head = str(hash_head(tmp_path / "head"))
    result = bench(options(pool, tasks, heads=[head, head], random_seeds=1))
    data = result.data
    names = [s["name"] for s in data["systems"]]
    assert names[-6:] == ["head:hashy", "head:hashy#2", "moa", "vote", "best-per-task", "oracle"]
    # Every head sees the same episode seeds: the same head twice gives the same episodes.
    assert data["per_item"]["head:hashy"] == data["per_item"]["head:hashy#2"]
    acc = data["results"]["head:hashy"]["overall"]["accuracy"]
    gap = data["gaps"]["head:hashy"]
    assert gap["overall"]["vs_best_single"] == pytest.approx(acc - 5 / 8)
    assert gap["overall"]["vs_oracle"] == pytest.approx(acc - 1.0)
    task = f"file:{tasks}"
    sel = data["selection"]["head:hashy"]["per_task"][task]
    assert set(sel["models"]) == {"m0", "m1", "m2"} and set(sel["roles"]) == {"thinker", "worker", "verifier"}
    assert sum(sel["models"].values()) == pytest.approx(1.0)
    assert sum(sel["roles"].values()) == pytest.approx(1.0)
    turns = [t for e in data["episodes"] if e["system"] == "head:hashy" for t in e["turns"]]
    assert sel["models"]["m0"] == pytest.approx(sum(m == "m0" for m, _ in turns) / len(turns))
    assert data["systems"][-5]["head"] == {"name": "hashy", "trained": True, "ref": head}
    # How its episodes ended, per task, counted from the episodes' stop reasons.
    mine = [e for e in data["episodes"] if e["system"] == "head:hashy"]
    ends = data["selection"]["head:hashy"]["ends"]["per_task"][task]
    assert ends["episodes"] == len(mine) and ends["mean_turns"] == pytest.approx(len(turns) / len(mine))
    assert ends["reasons"] == pytest.approx({r: sum(e["stop_reason"] == r for e in mine) / len(mine)
                                             for r in {e["stop_reason"] for e in mine}})
    report = (result.run_dir / "report.md").read_text()
    assert "## How episodes ended (share of episodes; mean turns)" in report
    assert any(line.startswith("| head:hashy | all | 8 |") for line in report.splitlines())


def test_fixed_schedule_alternates_and_respects_masks() -> None:
    schedule = FixedSchedule(["a", "b"], "b", (Role.WORKER, Role.VERIFIER))
    rng = np.random.default_rng(0)
    first = schedule.decide("task", [], rng)
    assert (first.model, first.role, first.model_probs, first.role_probs) == ("b", Role.WORKER, [0.0, 1.0],
                                                                              [0.0, 1.0, 0.0])
    assert schedule.decide("task", [object()], rng).role is Role.VERIFIER  # type: ignore[list-item]
    with pytest.raises(ContextOverflow):
        schedule.decide("task", [], rng, excluded={"b"})
    with pytest.raises(ConfigError):
        FixedSchedule(["a"], "z", (Role.WORKER,))


def test_context_overflow_counts_as_wrong(tmp_path: Path) -> None:
    pool = write_pool(tmp_path, {"name": "mixed", "models": [
        MODELS[0], {"name": "tiny", "kind": "scripted", "n_ctx": 256, "default": "Answer: 42"}]})
    tasks = tmp_path / "long.jsonl"
    tasks.write_text(json.dumps({"id": "long", "prompt": "word " * 400 + "[A] what is six times seven?",
                                 "answer": 42, "scorer": "numeric"}) + "\n")
    data = bench(BenchOptions(pool=str(pool), tasks=f"file:{tasks}:all", max_turns=2, random_seeds=1)).data
    res = data["results"]
    assert res["single:m0"]["overall"]["accuracy"] == 1.0 and res["single:tiny"]["overall"]["accuracy"] == 0.0
    tiny = [e for e in data["episodes"] if e["system"] == "single:tiny"]
    assert tiny[0]["error"].startswith("context overflow") and tiny[0]["turns"] == []
    assert any("could not run" in n for n in data["notes"])


def test_random_routing_interval_is_over_items_not_episodes() -> None:
    from trinity_cli.bench.stats import summarize
    from trinity_cli.bench.systems import EpisodeResult, System
    from trinity_cli.tasks.items import TaskItem

    items = [TaskItem("t", f"q{i}", "Q", "42", "numeric") for i in range(4)]
    rewards = {"q0": [1, 1, 1], "q1": [0, 0, 0], "q2": [1, 0, 0], "q3": [1, 1, 0]}
    episodes = [EpisodeResult("random", "t", item, r, float(reward), "A", [("m0", "worker")], "max_turns",
                              10 * (r + 1), 1.0, None, False)
                for item, seeds in rewards.items() for r, reward in enumerate(seeds)]
    systems = [System("random", "random", seeds=3, max_turns=2)]
    m = summarize(systems, episodes, items, ["m0"], ["t"])["results"]["random"]["overall"]
    # Per item: 1, 0, 1/3, 2/3. Four items, not twelve independent episodes.
    assert m["n"] == 4 and m["correct"] == pytest.approx(2.0) and m["accuracy"] == pytest.approx(0.5)
    assert (m["ci_low"], m["ci_high"]) == pytest.approx(wilson_interval(2.0, 4))
    assert m["ci_high"] - m["ci_low"] > 0.5  # twelve pooled episodes would claim about 0.46
    assert m["mean_tokens"] == pytest.approx(20.0) and m["mean_turns"] == 1.0


def test_greedy_applies_to_heads_not_to_random(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    head = str(hash_head(tmp_path / "head"))
    data = bench(options(pool, tasks, heads=[head], random_seeds=3, decisions="greedy")).data
    firsts = {tuple(e["turns"][0]) for e in data["episodes"] if e["system"] == "random"}
    # The argmax of the uniform untrained head is (m0, thinker) on every turn of every seed.
    assert len(firsts) > 1, firsts
    routes = {tuple(map(tuple, e["turns"])) for e in data["episodes"] if e["system"] == "random"}
    assert len(routes) > 3
    # Heads do take their argmax: under other episode seeds, their first decisions stay the same.
    again = bench(options(pool, tasks, heads=[head], random_seeds=0, decisions="greedy", seed=1)).data

    def head_firsts(d: dict, row: str = "head:hashy") -> dict:
        return {e["item"]: tuple(e["turns"][0]) for e in d["episodes"] if e["system"] == row}

    assert head_firsts(again) and head_firsts(again) == head_firsts(data)


def test_decisions_both_plays_a_sampled_and_a_greedy_row_per_head(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    head = str(hash_head(tmp_path / "head"))
    result = bench(options(pool, tasks, heads=[head], random_seeds=0, systems=["head"], decisions="both"))
    data = result.data
    rows = [s["name"] for s in data["systems"]]
    # A trained head's default is greedy: its row keeps the plain name.
    assert rows == ["head:hashy", "head:hashy/sampled"]
    assert [s["greedy"] for s in data["systems"]] == [True, False]
    # One command, both rows; each alone gives the same episodes.
    alone = bench(options(pool, tasks, heads=[head], random_seeds=0, systems=["head"], decisions="sampled")).data

    def routes(d: dict, row: str) -> dict:
        return {e["item"]: e["turns"] for e in d["episodes"] if e["system"] == row}

    assert routes(data, "head:hashy/sampled") == routes(alone, "head:hashy/sampled")
    assert routes(data, "head:hashy") != routes(data, "head:hashy/sampled")
    default = bench(options(pool, tasks, heads=[head], random_seeds=0, systems=["head"])).data
    assert routes(default, "head:hashy") == routes(data, "head:hashy")
    report = (result.run_dir / "report.md").read_text()
    assert "heads sampled and greedy" in report
    # The two modes are compared item by item.
    test = data["paired"]["head:hashy/sampled"]["vs_default_mode"]
    assert test["other"] == "head:hashy" and test["n"] == 8
    assert f"| head:hashy/sampled | head:hashy | 8 | {test['b']} | {test['c']} |" in report


def test_report_does_not_call_the_oracle_an_upper_bound(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    result = bench(options(pool, tasks, random_seeds=1))
    report = (result.run_dir / "report.md").read_text()
    assert "upper bound" not in report and "ceiling routing" not in report
    assert "not a ceiling" in report and "multi-turn systems can solve items that no single model does" in report


def test_wilson_interval_edges() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(10, 10)
    assert high == 1.0 and low == pytest.approx(0.7225, abs=1e-4)


def test_refuses_splits_that_are_not_held_out(tmp_path: Path) -> None:
    pool, tasks = setup_files(tmp_path)
    with pytest.raises(ConfigError, match="held-out") as info:
        bench(options(pool, tasks, tasks=f"file:{tasks}:train"))
    assert info.value.hint == f"use file:{tasks}:test"
    with pytest.raises(ConfigError, match="'all' includes the train split"):
        held_out_mix("gsm8k:all:5")
    assert [str(e) for e in held_out_mix(f"file:{tasks}:all")] == [f"file:{tasks}:all"]
    with pytest.raises(ConfigError, match="random_seeds"):
        bench(options(pool, tasks, random_seeds=-1))
    with pytest.raises(NotFound, match="unknown head"):
        bench(options(pool, tasks, heads=["nosuchhead"]))
    assert not list(RunStore().root.iterdir())


def test_cli_tables_json_and_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    pool, tasks = setup_files(tmp_path)
    base = ["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test", "--random-seeds", "1",
            "--max-turns", "3"]
    code, out, err = run_main(base, monkeypatch, capsys)
    assert code == 0, err
    assert "selfloop:m2" in out and "oracle" in out and "62.5%" in out
    assert "run-1" in err and "report.md" in err
    code, out, err = run_main([*base, "--json", "-q"], monkeypatch, capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["run"] == "run-2" and data["results"]["selfloop:m2"]["overall"]["mean_turns"] == 3.0
    assert data["stats"]["backend_calls"] == 0
    results.replay_bench(RunStore().load("run-1"))
    assert "single:m1" in capsys.readouterr().out
    train = ["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:train"]
    code, out, err = run_main(train, monkeypatch, capsys)
    assert code == 2 and "held-out" in err and "Traceback" not in err


def test_pareto_front_keeps_rows_no_other_beats_on_both() -> None:
    from trinity_cli.runs.reports import pareto_front

    def row(tokens, accuracy):
        return {"overall": {"mean_tokens": tokens, "accuracy": accuracy}}

    summary = {"systems": [{"name": n} for n in "abcde"],
               "results": {"a": row(100, 0.4), "b": row(300, 0.5), "c": row(300, 0.45), "d": row(900, 0.5),
                           "e": row(800, 0.6)}}
    assert pareto_front(summary) == ["a", "b", "e"]  # c: b is better at the same cost; d: e is better and cheaper


def test_cost_chart_moves_names_of_close_points_apart() -> None:
    """Two heads at 985 and 988 tokens and 57.7% and 58.0% printed their names over each other
    (a 300-item bench's cost.png); a name that would meet an earlier one goes a line lower, and
    names far apart stay beside their points."""
    from trinity_cli.runs.charts import _label_lines

    points = [("agree", 885.0, 0.587), ("head:default", 862.0, 0.577), ("head:init-labels", 918.0, 0.580),
              ("single", 200.0, 0.38), ("sc:best@4", 1573.0, 0.563), ("oracle", 864.0, 0.68)]
    assert _label_lines(points) == [0, 1, 2, 0, 0, 0]
    assert _label_lines([("a", 100.0, 0.5), ("b", 900.0, 0.5)]) == [0, 0]
    assert _label_lines([]) == []
