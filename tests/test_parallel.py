"""Episodes played at once give what they give one after another.

evolve and bench on scripted pools (replies slowed by a random few milliseconds, so
episodes overlap and finish out of order) at --parallel 1, 4 and 16, each in its own
TRINITY_HOME: the same head (weights and manifest), the same generation files and the
same bench.json and episodes.jsonl, timing fields aside; the same model calls and cache
hits; and a parallel run killed mid-generation (in the middle of the run) resumes without
redoing a finished call, to the same candidates and head.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trinity_cli.backends.scripted import ScriptedBackend
from trinity_cli.bench.runner import bench
from trinity_cli.coordinator.head import Head
from trinity_cli.evaluators.ray_cluster import RayOptions
from trinity_cli.events import EpisodeFinished, EvolveEpisodeFinished, EvolveEpisodeStarted, EvolveStarted
from trinity_cli.evolve.evolution import evolve

from . import test_bench, test_evolve
from .conftest import write_pool

TIMING = {"wall_s", "backend_s", "mean_wall_s", "latency_s", "coordinator_s", "seconds", "parallel"}


def strip(data: Any) -> Any:
    """`data` without timing fields (and the recorded --parallel), at any depth."""
    if isinstance(data, dict):
        return {k: strip(v) for k, v in data.items() if k not in TIMING}
    if isinstance(data, list):
        return [strip(v) for v in data]
    return data


class Overlap:
    """Model calls made, and the most that were running at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = self.calls = 0


@pytest.fixture
def slow_scripted(monkeypatch: pytest.MonkeyPatch) -> Overlap:
    overlap = Overlap()
    original = ScriptedBackend.chat
    jitter = random.Random(7)

    def chat(self, messages, params):  # noqa: ANN001, ANN202
        with overlap.lock:
            overlap.now += 1
            overlap.calls += 1
            overlap.most = max(overlap.most, overlap.now)
            delay = jitter.uniform(0.001, 0.01)
        try:
            time.sleep(delay)
            return original(self, messages, params)
        finally:
            with overlap.lock:
                overlap.now -= 1

    monkeypatch.setattr(ScriptedBackend, "chat", chat)
    return overlap


def npz_members(path: Path) -> dict[str, bytes]:
    """The arrays of a .npz as stored bytes (the zip's own timestamps left out)."""
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in sorted(archive.namelist())}


def head_files(directory: Path) -> tuple[dict[str, bytes], Any]:
    return npz_members(directory / "weights.npz"), strip(json.loads((directory / "manifest.json").read_text()))


def run_files(run_dir: Path, pattern: str) -> list[Any]:
    out = []
    for file in sorted(run_dir.glob(pattern)):
        text = file.read_text()
        if file.suffix == ".jsonl":
            out.append([strip(json.loads(line)) for line in text.splitlines()])
        else:
            out.append(strip(json.loads(text)))
    return out


def test_evolve_gives_the_same_head_at_any_parallelism(tmp_path: Path, monkeypatch, slow_scripted) -> None:
    pool, tasks = test_evolve.setup_files(tmp_path)
    seen: dict[int, Any] = {}
    for n in (1, 4, 16):
        monkeypatch.setenv("TRINITY_HOME", str(tmp_path / f"home-{n}"))
        calls0, slow_scripted.most = slow_scripted.calls, 0
        events: list = []
        result = evolve(test_evolve.options(pool, tasks, out=str(tmp_path / f"head-{n}")), parallel=n,
                        progress=events.append)
        run_dir = tmp_path / f"home-{n}" / "runs" / result.run_id
        record = json.loads((run_dir / "run.json").read_text())
        seen[n] = {
            "head": head_files(tmp_path / f"head-{n}"),
            "generations": run_files(run_dir / "episodes", "gen-*.json"),
            "curves": strip(result.curves),
            "selection": record["selection"],
            "best_val": result.best_val,
            "model_calls": slow_scripted.calls - calls0,
        }
        in_flight = max(e.in_flight for e in events if isinstance(e, (EvolveEpisodeFinished, EvolveEpisodeStarted)))
        if n == 1:
            assert slow_scripted.most == 1 and in_flight == 1
        else:
            # Episodes really overlapped (the candidates of a generation run together).
            assert 1 < slow_scripted.most <= n and 1 < in_flight <= n
        assert any(isinstance(e, EvolveStarted) for e in events)
        assert sum(isinstance(e, EvolveEpisodeFinished) for e in events) == 48 + 3 * 6
    assert seen[4] == seen[1] and seen[16] == seen[1]
    # Candidates share first turns: a serial run answers those from the cache, and so
    # does a parallel one (single flight), so hits are counted alike.
    assert sum(c["cache_hits_gen"] for c in seen[1]["curves"]) > 0


@pytest.mark.slow
def test_bench_json_is_the_same_at_any_parallelism(tmp_path: Path, monkeypatch, slow_scripted) -> None:
    pool, tasks = test_bench.setup_files(tmp_path)
    head = test_bench.hash_head(tmp_path / "hashy")
    seen: dict[int, Any] = {}
    for n in (1, 4, 16):
        monkeypatch.setenv("TRINITY_HOME", str(tmp_path / f"home-{n}"))
        calls0, slow_scripted.most = slow_scripted.calls, 0
        result = bench(test_bench.options(pool, tasks, heads=[str(head)], random_seeds=3), parallel=n)
        data = json.loads((result.run_dir / "bench.json").read_text())
        assert data["stats"]["parallel"] == n
        seen[n] = {"bench": strip(data), "episodes": run_files(result.run_dir, "episodes.jsonl"),
                   "model_calls": slow_scripted.calls - calls0}
        assert (slow_scripted.most == 1) if n == 1 else (1 < slow_scripted.most <= n)
    assert seen[4] == seen[1] and seen[16] == seen[1]
    stats = seen[1]["bench"]["stats"]
    assert stats["cache_hits"] > 0 and stats["backend_calls"] == seen[1]["model_calls"]
    # Per-episode cache flags are a serial run's: single:m's turn is computed, and the
    # self-loop that repeats it as its first turn is served from the cache.
    eps = seen[16]["bench"]["episodes"]
    assert not any(e["cached"] for e in eps if e["system"].startswith("single:"))


class Kill(Exception):
    pass


@pytest.mark.parametrize(("kill_n", "resume_n"), [(1, 1), (4, 16)])
def test_parallel_run_killed_mid_generation_redoes_no_call(tmp_path: Path, monkeypatch, slow_scripted,
                                                           kill_n: int, resume_n: int) -> None:
    pool, tasks = test_evolve.setup_files(tmp_path)
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-a"))
    evolve(test_evolve.options(pool, tasks, out=str(tmp_path / "a")))
    reference_calls = slow_scripted.calls

    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-b"))
    seen = {"n": 0}

    def killer(event) -> None:
        if isinstance(event, EvolveEpisodeFinished) and event.kind == "train":
            seen["n"] += 1
            # In the middle generation (episodes 17-32) of three, with episodes in flight: the
            # resume restores generation 0's checkpoint (pycma's own RNG inside it) and must ask
            # generations 1 and 2 the same candidates as the uninterrupted run.
            if seen["n"] == 21:
                raise Kill()

    with pytest.raises(Kill):
        evolve(test_evolve.options(pool, tasks, out=str(tmp_path / "b")), progress=killer, parallel=kill_n)
    before_kill = slow_scripted.calls - reference_calls
    assert len(list((tmp_path / "home-b").glob("runs/run-*/episodes/gen-*.json"))) == 1  # killed in gen 1
    # A different N on resume is fine: it is not part of the run's configuration.
    evolve(test_evolve.options(pool, tasks, out=str(tmp_path / "b")), parallel=resume_n)
    after = slow_scripted.calls - reference_calls - before_kill
    assert before_kill > 0 and after > 0
    assert before_kill + after == reference_calls  # no call was made twice
    # Same episodes, fitness and weights (a resumed run's curves count the calls of its own
    # process only, and the redone generation's cache flags differ, so they are left out).
    generations = {}
    for home in ("home-a", "home-b"):
        files = sorted((tmp_path / home).glob("runs/run-*/episodes/gen-*.json"))
        generations[home] = [_without_cache_flags(strip(json.loads(f.read_text()))) for f in files]
    assert len(generations["home-a"]) == 3 and generations["home-a"] == generations["home-b"]
    assert npz_members(tmp_path / "a" / "weights.npz") == npz_members(tmp_path / "b" / "weights.npz")


def test_cli_resume_may_change_parallel(tmp_path: Path, monkeypatch, capsys) -> None:
    """--parallel is not an option of the run: typed on a resume it is not a conflicting flag."""
    pool, tasks = test_evolve.setup_files(tmp_path)
    test_evolve.scripted_default_pool(tmp_path / "home")
    with pytest.raises(test_evolve.Kill):
        evolve(test_evolve.options(pool, tasks, out=str(tmp_path / "b")), progress=test_evolve.kill_at(21))
    code, _, err = test_evolve.run_cli(monkeypatch, capsys, ["evolve", "--resume", "run-1", "--parallel", "4"])
    assert code == 0, err
    assert "run-1: " in err and "4 at once" in err and "gen   0" not in err  # generation 0 not redone
    assert Head.load(tmp_path / "b").manifest["training"]["spent"] == 48


def _without_cache_flags(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _without_cache_flags(v) for k, v in data.items() if k != "cached"}
    if isinstance(data, list):
        return [_without_cache_flags(v) for v in data]
    return data


@pytest.mark.slow
def test_sigkilled_parallel_run_resumes_from_the_cache(tmp_path: Path, monkeypatch) -> None:
    """The scripted-pool twin of test_evolve_integration's SIGKILL test: a real process,
    killed with SIGKILL mid-run, resumed; no finished call is made again."""
    _, tasks = test_evolve.setup_files(tmp_path)
    slow = [dict(m, delay_s=0.03) for m in _duo_models()]
    pool = write_pool(tmp_path, {"name": "duo", "max_resident": 1, "models": slow}, name="slow.yaml")
    args = ["evolve", "--search-only",
            "--pool", str(pool), "--tasks", f"file:{tasks}:train", "--val-tasks", f"file:{tasks}:val:6",
            "--budget", "48", "--minibatch", "4", "--popsize", "4", "--seed", "3", "--max-turns", "2",
            "--val-every", "1", "--backbone", "hash:16", "--sigma0", "1.0"]
    home_b = tmp_path / "home-b"
    env = {**os.environ, "TRINITY_HOME": str(home_b), "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "killed.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "trinity_cli", *args, "--parallel", "4", "--out",
                                 str(tmp_path / "b")], env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while not list(home_b.glob("runs/run-*/episodes/gen-0000.json")):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "generation 0 never finished"
            time.sleep(0.01)
        time.sleep(0.1)  # into generation 1 of 3: the resume starts from generation 0's checkpoint
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    run_dir = next(home_b.glob("runs/run-*"))
    assert not (run_dir / "run.json").exists()
    at_kill = _rollouts(home_b)

    from trinity_cli.evolve.options import EvolveOptions

    opts = EvolveOptions(pool=str(pool), tasks=f"file:{tasks}:train", val_tasks=f"file:{tasks}:val:6", budget=48,
                         minibatch=4, popsize=4, seed=3, max_turns=2, val_every=1, backbone="hash:16", sigma0=1.0)
    calls: list[int] = []
    original = ScriptedBackend.chat
    monkeypatch.setattr(ScriptedBackend, "chat", lambda self, m, p: calls.append(1) or original(self, m, p))
    monkeypatch.setenv("TRINITY_HOME", str(home_b))
    evolve(EvolveOptions(**{**opts.__dict__, "out": str(tmp_path / "b")}), parallel=4)
    resumed = len(calls)
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-a"))
    evolve(EvolveOptions(**{**opts.__dict__, "out": str(tmp_path / "a")}))
    reference = len(calls) - resumed
    assert at_kill > 0 and resumed > 0
    assert at_kill + resumed == reference  # every call made before the kill was reused
    assert npz_members(tmp_path / "a" / "weights.npz") == npz_members(tmp_path / "b" / "weights.npz")


def _duo_models() -> list[dict]:
    return [
        {"name": "m0", "kind": "scripted", "rules": test_evolve.RIGHT, "default": "Plan: think.\nNext: worker"},
        {"name": "m1", "kind": "scripted", "rules": test_evolve.WRONG, "default": "Plan: guess.\nNext: worker"},
    ]


def _rollouts(home: Path) -> int:
    import diskcache

    with diskcache.Cache(str(home / "cache" / "rollouts")) as cache:
        return len(cache)


def test_heads_keep_their_own_svf_offsets_when_features_run_at_once(monkeypatch) -> None:
    """Views of one coordinator compute features concurrently, each with its own head's
    SVF offsets applied to the shared backbone (the backbone here reads them back)."""
    from trinity_cli.coordinator import head as head_mod
    from trinity_cli.coordinator.policy import Coordinator

    class Backbone:
        fingerprint, hidden_size, max_tokens = "fake", 4, 0

        def __init__(self) -> None:
            self.offsets = np.zeros(2, dtype=np.float32)

        def encode(self, text: str) -> np.ndarray:
            seen = self.offsets.copy()
            time.sleep(0.002)  # another thread applying its offsets now would change them
            return np.array([seen[0], seen[1], self.offsets[0], len(text)], dtype=np.float32)

    class SVF:
        def __init__(self, backbone: Backbone) -> None:
            self.backbone = backbone

        def apply(self, offsets: np.ndarray) -> None:
            self.backbone.offsets = np.asarray(offsets, dtype=np.float32).copy()

    backbone = Backbone()
    info = {"ref": "fake", "fingerprint": "fake", "hidden_size": 4}
    base = head_mod.untrained("p", ["a", "b"], info, 4)
    base.manifest["svf"] = {"targets": ["t"], "sizes": [2]}
    base.svf_offsets = np.zeros(2, dtype=np.float32)
    root = Coordinator(base, backbone_ref="fake", svf_targets=["t"], use_cache=False)
    root._shared.backbone, root._shared.svf = backbone, SVF(backbone)
    views = [root.view(base.with_flat(np.r_[[float(i), -float(i)], np.ones(base.n_params - 2)])) for i in range(16)]
    results: dict[int, list[np.ndarray]] = {}

    def work(i: int) -> None:
        results[i] = [views[i].features(f"text {i} {k}") for k in range(10)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, vectors in results.items():
        for vector in vectors:
            assert vector[0] == i and vector[1] == -i and vector[2] == i
    assert root.encode_calls == 160


def test_views_share_the_backbone_and_hidden_cache(tmp_path: Path) -> None:
    from trinity_cli.coordinator import head as head_mod
    from trinity_cli.coordinator.backbone_refs import describe
    from trinity_cli.coordinator.policy import Coordinator

    info = {"ref": "hash:16", "fingerprint": describe("hash:16")[0], "hidden_size": 16}
    base = head_mod.untrained("p", ["a", "b"], info, 16)
    root = Coordinator(base)
    a = root.view(base.with_flat(np.ones(base.n_params)))
    b = root.view(base.with_flat(-np.ones(base.n_params)))
    assert a.features("same text").tolist() == b.features("same text").tolist()
    assert a.backbone is b.backbone is root.backbone
    assert root.encode_calls == 1 and root.cache_hits == 1
    a.close()  # a view leaves the shared cache open
    assert b.features("same text") is not None and root.cache_hits == 2
    root.close()


def _outcome(calls: list[tuple[str, str, bool]]) -> Any:
    """An EpisodeOutcome whose turns made `calls` (model, prompt, cached)."""
    from trinity_cli.evaluators.local import EpisodeOutcome
    from trinity_cli.messages import ChatMessage, Role, Transcript, Turn

    turns = [Turn(index=i, model=m, role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[], role_probs=[],
                  messages=[ChatMessage("user", text)], reply="r", prompt_tokens=1, completion_tokens=1,
                  latency_s=0.0, coordinator_s=0.0, cached=cached) for i, (m, text, cached) in enumerate(calls)]
    return EpisodeOutcome(Transcript(task="t", turns=turns), 1.0)


def test_cache_flags_are_those_of_a_serial_run(tmp_path: Path) -> None:
    from trinity_cli.evaluators.local import settle_cache_flags
    from trinity_cli.pool.pool import Pool
    from trinity_cli.pool.rollout_cache import RolloutCache
    from trinity_cli.pool_config import parse_pool

    config = parse_pool(json.dumps({"name": "p", "models": [
        {"name": "a", "kind": "scripted"}, {"name": "b", "kind": "scripted", "temperature": 0.7, "seed": None}]}),
        "p.yaml")
    pool = Pool(config, cache=RolloutCache(tmp_path / "rollouts"))
    # Finished out of order: episode 1 computed "x" and episode 0 was served it by the cache;
    # "old" was in the cache before the batch; b's sampled calls are never cached.
    outcomes = [_outcome([("a", "x", True), ("a", "y", False), ("b", "s", False)]),
                _outcome([("a", "x", False), ("a", "old", True), ("a", "y", True), ("b", "s", False)])]
    settle_cache_flags(pool, outcomes)
    flags = [[t.cached for t in o.transcript.turns] for o in outcomes]
    assert flags == [[False, False, False], [True, True, True, False]]
    settle_cache_flags(pool, outcomes)  # idempotent
    assert [[t.cached for t in o.transcript.turns] for o in outcomes] == flags


def test_thread_evaluator_returns_spec_order_and_raises_the_failure(tmp_path: Path, monkeypatch) -> None:
    from trinity_cli.episode.schedules import FixedSchedule
    from trinity_cli.errors import BackendError, DiskFull
    from trinity_cli.evaluators.local import EpisodeSpec, Runtime, ThreadEvaluator
    from trinity_cli.messages import Role
    from trinity_cli.policies.fixed import FixedPolicy
    from trinity_cli.pool.pool import Pool
    from trinity_cli.pool_config import load_pool
    from trinity_cli.tasks.items import TaskItem

    pool_file = write_pool(tmp_path, {"name": "p", "models": [
        {"name": "a", "kind": "scripted", "default": "Answer: 1"}]})
    runtime = Runtime(Pool(load_pool(str(pool_file))))
    items = [TaskItem("t", f"q{i}", f"question {i}?", "1", "numeric") for i in range(12)]
    # Later items answer first: completion order is the reverse of spec order.
    original = ScriptedBackend.chat

    def chat(self, messages, params):  # noqa: ANN001, ANN202
        number = int(messages[-1].content.split("question ")[1].split("?")[0])
        if number == 5 and fail["on"] is not None:
            raise fail["on"]
        time.sleep(0.002 * (12 - number))
        return original(self, messages, params)

    fail: dict[str, Exception | None] = {"on": None}
    monkeypatch.setattr(ScriptedBackend, "chat", chat)
    schedule = FixedSchedule(["a"], "a", (Role.WORKER,))
    specs = [EpisodeSpec(item=item, seed=i, policy=FixedPolicy(schedule), max_turns=1) for i, item in enumerate(items)]
    order: list[int] = []
    outcomes = ThreadEvaluator(runtime, 12).evaluate(
        specs, lambda event: order.append(event.index) if isinstance(event, EpisodeFinished) else None)
    assert [o.transcript.task for o in outcomes] == [item.prompt for item in items]
    assert order != sorted(order) and sorted(order) == list(range(12))
    fail["on"] = BackendError("model down")  # a member's failure: a failed turn, and the batch goes on
    outcomes = ThreadEvaluator(runtime, 4).evaluate(specs)
    assert outcomes[5].transcript.turns[0].error == "model down" and outcomes[5].reward == 0.0
    fail["on"] = DiskFull("disk full")  # the command's own error: the batch stops, raising it
    with pytest.raises(DiskFull, match="disk full"):
        ThreadEvaluator(runtime, 4).evaluate(specs)


def test_serial_evaluator_plays_an_items_episodes_together_and_records_spec_order(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    from trinity_cli.episode.schedules import FixedSchedule
    from trinity_cli.evaluators.local import EpisodeSpec, Runtime, SerialEvaluator, play_order
    from trinity_cli.messages import Role
    from trinity_cli.policies.fixed import FixedPolicy
    from trinity_cli.pool.pool import open_pool
    from trinity_cli.pool_config import load_pool
    from trinity_cli.tasks.items import TaskItem

    pool_file = write_pool(tmp_path, {"name": "p", "models": [
        {"name": "a", "kind": "scripted", "default": "Answer: 1"}]})
    items = [TaskItem("t", f"q{i}", f"question {i}?", "1", "numeric") for i in range(3)]
    # Two systems (as evolve's candidates or bench's systems) over the same three items,
    # listed system by system as evolve and bench list them.
    schedule = FixedSchedule(["a"], "a", (Role.WORKER,))
    specs = [EpisodeSpec(item=item, seed=i, policy=FixedPolicy(schedule), max_turns=turns)
             for turns in (1, 2) for i, item in enumerate(items)]
    assert play_order(specs) == [0, 3, 1, 4, 2, 5]

    asked: list[str] = []
    original = ScriptedBackend.chat

    def chat(self, messages, params):  # noqa: ANN001, ANN202
        asked.append(messages[-1].content.split("question ")[1][0])
        return original(self, messages, params)

    monkeypatch.setattr(ScriptedBackend, "chat", chat)
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home"))
    started: list[int] = []
    with open_pool(load_pool(str(pool_file))) as pool:
        outcomes = SerialEvaluator(Runtime(pool)).evaluate(
            specs, lambda event: started.append(event.index) if not isinstance(event, EpisodeFinished) else None)
    assert started == [0, 3, 1, 4, 2, 5]
    assert asked == sorted(asked)  # the model answered each item's calls one after another
    assert [o.transcript.task for o in outcomes] == [item.prompt for item in items] * 2
    # Cache flags are a spec-order run's: the first system's turn computed each item, the
    # second's first turn was served it (its second turn, a fresh attempt, was computed).
    assert [[t.cached for t in o.transcript.turns] for o in outcomes] == [[False]] * 3 + [[True, False]] * 3


def test_cli_parallel_option_and_pool_default(tmp_path: Path, monkeypatch, capsys) -> None:
    import yaml

    pool, tasks = test_bench.setup_files(tmp_path)
    base = ["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test", "--random-seeds", "1", "--json", "-q"]
    code, out, err = test_bench.run_main([*base, "--parallel", "4"], monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["stats"]["parallel"] == 4
    data = yaml.safe_load(pool.read_text())
    pool.write_text(yaml.safe_dump({**data, "parallel": 3}))
    code, out, err = test_bench.run_main(base, monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["stats"]["parallel"] == 3  # the pool file's default
    code, out, err = test_bench.run_main([*base, "--parallel", "0"], monkeypatch, capsys)
    assert code != 0 and "greater than or equal to 1" in err and "Traceback" not in err
    pool.write_text(yaml.safe_dump({**data, "parallel": 0}))
    code, out, err = test_bench.run_main(base, monkeypatch, capsys)
    assert code == 2 and "parallel" in err and "Traceback" not in err
    evolve_pool, evolve_tasks = test_evolve.setup_files(tmp_path)
    code, out, err = test_bench.run_main(
        ["evolve", "--search-only", "--pool", str(evolve_pool), "--tasks", f"file:{evolve_tasks}:train", "--val-tasks",
         f"file:{evolve_tasks}:val:4", "--budget", "16", "--minibatch", "4", "--popsize", "4",
         "--backbone", "hash:16", "--parallel", "4"], monkeypatch, capsys)
    assert code == 0, err
    assert "4 at once" in err


def test_a_local_ray_instance_gives_gguf_actors_two_cores_or_plays_here(tmp_path: Path, monkeypatch,
                                                                         caplog) -> None:
    """On one machine, GGUF members decode at the memory's pace: two one-core actors were
    slower than one process (0.67x on 2 cores), so a local Ray instance gives each actor at
    least two cores, and when that leaves one actor, this process plays (same results)."""
    from trinity_cli.evaluators import choose
    from trinity_cli.evaluators.local import Runtime, SerialEvaluator
    from trinity_cli.pool.pool import open_pool
    from trinity_cli.pool_config import load_pool

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    local = tmp_path / "local.yaml"
    local.write_text(f"name: p\nmodels:\n  - {{name: a, kind: gguf, weights: {{path: {gguf}}}}}\n"
                     "  - {name: c, kind: scripted, default: x}\n")
    api = tmp_path / "api.yaml"
    api.write_text("name: q\nmodels:\n  - {name: c, kind: scripted, default: x}\n")
    gguf_pool, plain_pool = load_pool(str(local)), load_pool(str(api))
    assert [choose.local_workers(gguf_pool, n, 2) for n in (None, 1, 2, 8)] == [1, 1, 1, 1]
    assert [choose.local_workers(gguf_pool, n, 16) for n in (None, 2, 8, 16)] == [1, 2, 8, 8]
    assert [choose.local_workers(plain_pool, n, 2) for n in (None, 2, 8)] == [1, 2, 8]
    monkeypatch.setenv("TRINITY_RAY_MIN_CORES", "1")
    assert choose.local_workers(gguf_pool, 2, 2) == 2
    monkeypatch.delenv("TRINITY_RAY_MIN_CORES")

    monkeypatch.setattr(choose.os, "cpu_count", lambda: 2)
    with open_pool(gguf_pool, use_cache=False) as pool, caplog.at_level("WARNING"):
        evaluator, at_once = choose.open_evaluator(Runtime(pool, device="cpu"), 1, RayOptions(workers=2))
    assert isinstance(evaluator, SerialEvaluator) and at_once == 1  # no Ray started
    assert "playing here instead, with the same results" in caplog.text
