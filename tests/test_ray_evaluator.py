"""Episodes on Ray actors give what they give in this process.

A real multi-node Ray cluster in one machine (`ray.cluster_utils.Cluster`: a head without
CPUs, holding the cache keeper, and three worker nodes of one CPU each, shared by the
module) and scripted or slow-HTTP pools: an evolve run on three nodes gives the same head,
generation files (cache flags included) and pool counters as a serial run; a worker node
removed mid-generation loses its episode, which is played again elsewhere, to the same
result; a driver killed with SIGKILL and resumed on the cluster makes no call twice; bench
on Ray gives a serial run's bench.json; an episode's error comes back as itself. Without
Ray installed (simulated), `--ray` says in one line how to install it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trinity_cli.evaluators.ray_cluster import RayOptions
from trinity_cli.events import EvolveEpisodeStarted, EvolveStarted
from trinity_cli.evolve.evolution import Evolution, evolve
from trinity_cli.evolve.options import EvolveOptions

from . import test_bench, test_evolve
from .conftest import write_pool
from .slow_openai import SlowOpenAI
from .test_parallel import _rollouts, head_files, npz_members, run_files, strip

SMALL_STORE = 80 * 2**20  # bytes of object store per node: episodes move kilobytes


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A head (no CPU: only the driver's cache keeper runs there) and three one-CPU nodes.
    Node deaths are noticed within a second or two."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as env:
        # The cluster's processes (and the actors they start) inherit this environment, and so
        # do drivers started by the tests. No token file is written to ~/.ray for a test cluster.
        env.setenv("TRINITY_HOME", str(tmp_path_factory.mktemp("ray-home")))
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        env.setenv("RAY_AUTH_MODE", "disabled")
        health = {"health_check_period_ms": 500, "health_check_timeout_ms": 500,
                  "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0}
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "object_store_memory": SMALL_STORE, "_system_config": health})
        try:
            for _ in range(3):
                cluster.add_node(num_cpus=1, object_store_memory=SMALL_STORE)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
            yield cluster
        finally:
            ray.shutdown()
            cluster.shutdown()


def slow_duo(tmp_path: Path) -> tuple[Path, Path]:
    """test_evolve's pool and tasks, every reply taking 20 ms so that episodes overlap."""
    pool, tasks = test_evolve.setup_files(tmp_path)
    models = [{"name": "m0", "kind": "scripted", "rules": test_evolve.RIGHT, "default": "Plan: think.\nNext: worker",
               "delay_s": 0.02},
              {"name": "m1", "kind": "scripted", "rules": test_evolve.WRONG, "default": "Plan: guess.\nNext: worker",
               "delay_s": 0.02}]
    return write_pool(tmp_path, {"name": "duo", "max_resident": 1, "models": models}, name="slow.yaml"), tasks


def run_record(tmp_path: Path, label: str, result: Any) -> dict[str, Any]:
    run_dir = tmp_path / f"home-{label}" / "runs" / result.run_id
    return {
        "head": head_files(tmp_path / f"head-{label}"),
        "generations": run_files(run_dir / "episodes", "gen-*.json"),  # cache flags included
        "curves": strip(result.curves),  # pool calls and cache hits per generation
        "selection": json.loads((run_dir / "run.json").read_text())["selection"],
        "best_val": result.best_val,
    }


@pytest.fixture(scope="module")
def serial_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """The slow duo pool, its task file and a serial evolve run's record (its own home)."""
    tmp_path = tmp_path_factory.mktemp("serial")
    pool, tasks = slow_duo(tmp_path)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TRINITY_HOME", str(tmp_path / "home-serial"))
        result = evolve(test_evolve.options(pool, tasks, out=str(tmp_path / "head-serial")))
    return pool, tasks, run_record(tmp_path, "serial", result)


@pytest.mark.slow
def test_evolve_on_three_nodes_gives_the_serial_head(cluster, serial_reference, tmp_path: Path,
                                                     monkeypatch) -> None:
    pool, tasks, reference = serial_reference
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-ray"))
    events: list = []
    evolution = Evolution(test_evolve.options(pool, tasks, out=str(tmp_path / "head-ray")),
                          ray=RayOptions(address=cluster.address), progress=events.append)
    result = evolution.run()
    assert run_record(tmp_path, "ray", result) == reference
    evaluator: Any = evolution.evaluator
    # One actor per node (the head has no CPU), every one of them used.
    assert evaluator.workers == 3 and len(set(evaluator.started_on)) == 3 and evaluator.lost_attempts == 0
    start = next(e for e in events if isinstance(e, EvolveStarted))
    assert start.parallel == 3 and start.ray is True
    assert max(e.in_flight for e in events if isinstance(e, EvolveEpisodeStarted)) == 3
    assert sum(c["cache_hits_gen"] for c in result.curves) > 0  # candidates share first turns


@pytest.mark.slow
def test_a_node_removed_mid_generation_changes_nothing(cluster, serial_reference, tmp_path: Path,
                                                       monkeypatch) -> None:
    if not Path("/proc/self/stat").exists():
        pytest.skip("finds the node's worker processes in /proc")
    pool, tasks, reference = serial_reference
    extra = cluster.add_node(num_cpus=1, object_store_memory=SMALL_STORE)
    cluster.wait_for_nodes()
    seen = {"train": 0}

    def remove_extra_node(event) -> None:
        if isinstance(event, EvolveEpisodeStarted) and event.kind == "train":
            seen["train"] += 1
            # Generation 1 (of 3) starts by handing its first four episodes to the four idle
            # actors in a row: after the fourth, every actor is running one, `extra`'s too.
            if seen["train"] == 16 + 4:
                crash(cluster, extra)

    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-ray"))
    evolution = Evolution(test_evolve.options(pool, tasks, out=str(tmp_path / "head-ray")),
                          ray=RayOptions(address=cluster.address), progress=remove_extra_node)
    result = evolution.run()
    evaluator: Any = evolution.evaluator
    assert evaluator.workers == 4 and len(set(evaluator.started_on)) == 4 and extra.node_id in evaluator.started_on
    assert evaluator.lost_attempts >= 1  # the episode on the removed node was played again
    # Same head, episodes, cache flags and pool counters as the serial run: the calls the lost
    # attempt had made are served to its replay by the cache and still count as computed.
    assert run_record(tmp_path, "ray", result) == reference


def crash(cluster: Any, node: Any) -> None:
    """Take `node` down as a crash would: its worker processes (the raylet's children; the
    actor among them, mid-episode) are killed at once, then the node's own processes."""
    raylet = node.all_processes["raylet"][0].process.pid
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if parent == raylet:
            os.kill(int(stat.parent.name), signal.SIGKILL)
    cluster.remove_node(node, allow_graceful=False)


@pytest.mark.slow
def test_driver_sigkilled_then_resumed_on_the_cluster_redoes_no_call(cluster, tmp_path: Path, monkeypatch) -> None:
    ray = pytest.importorskip("ray")
    tasks = test_evolve.setup_files(tmp_path)[1]
    with SlowOpenAI(delay_s=0.02) as server:
        pool = write_pool(tmp_path, {"name": "api", "models": server.models(2)})
        args = ["--pool", str(pool), "--tasks", f"file:{tasks}:train", "--val-tasks", f"file:{tasks}:val:6",
                "--budget", "48", "--minibatch", "4", "--popsize", "4", "--seed", "3", "--max-turns", "2",
                "--val-every", "1", "--backbone", "hash:16", "--sigma0", "1.0"]
        opts = dict(pool=str(pool), tasks=f"file:{tasks}:train", val_tasks=f"file:{tasks}:val:6", budget=48,
                    minibatch=4, popsize=4, seed=3, max_turns=2, val_every=1, backbone="hash:16", sigma0=1.0)

        monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home-a"))
        evolve(EvolveOptions(**opts, out=str(tmp_path / "a")))
        reference = server.requests

        home_b = tmp_path / "home-b"
        env = {**os.environ, "TRINITY_HOME": str(home_b), "PYTHONUNBUFFERED": "1"}
        log = tmp_path / "killed.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "trinity_cli", "evolve", "--search-only", *args, "--out",
                                     str(tmp_path / "b"), "--ray", cluster.address], env=env,
                                    stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + 120
            while not list(home_b.glob("runs/run-*/episodes/gen-0000.json")):
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "generation 0 never finished"
                time.sleep(0.01)
            time.sleep(0.15)  # into generation 1 of 3, episodes in flight on the actors
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        # Ray ends the killed driver's job: wait until its actors have given their CPUs back
        # and the server has answered whatever they had asked.
        deadline = time.monotonic() + 60
        while ray.available_resources().get("CPU", 0) < ray.cluster_resources().get("CPU", 0) or server.now:
            assert time.monotonic() < deadline, "the killed driver's actors never went away"
            time.sleep(0.1)
        time.sleep(0.5)
        run_dir = next(home_b.glob("runs/run-*"))
        assert not (run_dir / "run.json").exists() and (run_dir / "checkpoint.pkl").exists()
        at_kill = _rollouts(home_b)  # every reply an actor had received was written at once
        server.reset()

        monkeypatch.setenv("TRINITY_HOME", str(home_b))
        result = evolve(EvolveOptions(**opts, out=str(tmp_path / "b")),
                        ray=RayOptions(address=cluster.address))
        resumed = server.requests
    assert result.run_id == run_dir.name and at_kill > 0 and resumed > 0
    # No call made before the kill was made again, none of the resumed run was made twice
    # (single flight across actors), and the head is the uninterrupted run's.
    assert at_kill + resumed == reference
    assert npz_members(tmp_path / "a" / "weights.npz") == npz_members(tmp_path / "b" / "weights.npz")


@pytest.mark.slow
def test_bench_on_ray_from_the_cli_gives_the_serial_bench_json(cluster, tmp_path: Path, monkeypatch,
                                                                 capsys) -> None:
    pool, tasks = test_bench.setup_files(tmp_path)
    head = test_bench.hash_head(tmp_path / "hashy")
    args = ["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test", "--head", str(head),
            "--random-seeds", "1", "--json", "-q"]
    seen = {}
    for label, extra in (("serial", []), ("ray", ["--ray", "--ray-workers", "2"])):
        # --ray alone (a local instance) is followed by another option; this process is already
        # connected to the test cluster, so that connection is used.
        monkeypatch.setenv("TRINITY_HOME", str(tmp_path / f"home-{label}"))
        code, out, err = test_evolve.run_cli(monkeypatch, capsys, [*args, *extra])
        assert code == 0, err
        data = json.loads(out)
        assert data["stats"]["parallel"] == (2 if label == "ray" else 1)
        run_dir = tmp_path / f"home-{label}" / "runs" / data["run"]
        seen[label] = {"bench": strip(data), "episodes": run_files(run_dir, "episodes.jsonl")}
    assert seen["ray"] == seen["serial"]
    assert seen["ray"]["bench"]["stats"]["cache_hits"] > 0


@pytest.mark.slow
def test_an_episode_error_comes_back_as_itself_and_the_next_batch_runs(cluster, tmp_path: Path) -> None:
    from trinity_cli.episode.schedules import FixedSchedule
    from trinity_cli.errors import ConfigError
    from trinity_cli.evaluators.local import EpisodeSpec, Runtime, SerialEvaluator
    from trinity_cli.evaluators.ray_actors import RayEvaluator
    from trinity_cli.messages import Role
    from trinity_cli.policies.fixed import FixedPolicy
    from trinity_cli.pool.pool import Pool
    from trinity_cli.pool.rollout_cache import RolloutCache
    from trinity_cli.pool_config import load_pool
    from trinity_cli.tasks.items import TaskItem

    one = [{"name": "a", "kind": "scripted", "default": "Answer: 1"}]
    pool_file = write_pool(tmp_path, {"name": "p", "models": one})
    runtime = Runtime(Pool(load_pool(str(pool_file)), cache=RolloutCache(tmp_path / "rollouts")))
    items = [TaskItem("t", f"q{i}", f"question {i}?", "1", "numeric") for i in range(6)]
    good = FixedSchedule(["a"], "a", (Role.WORKER,))
    wrong = FixedSchedule(["a", "b"], "a", (Role.WORKER,))  # routes a model the pool does not have
    specs = [EpisodeSpec(item=item, seed=i, policy=FixedPolicy(good), max_turns=1) for i, item in enumerate(items)]
    evaluator = RayEvaluator(runtime, RayOptions(address=cluster.address, workers=2))
    try:
        with pytest.raises(ConfigError, match="the coordinator routes"):
            evaluator.evaluate([*specs[:3], EpisodeSpec(item=items[3], seed=3, policy=FixedPolicy(wrong), max_turns=1)])
        calls = runtime.pool.stats.calls
        outcomes = evaluator.evaluate(specs)  # on fresh actors: the batch above killed its own
    finally:
        evaluator.close()
    assert runtime.pool.stats.calls - calls == 6
    local = Runtime(Pool(load_pool(str(pool_file)), cache=RolloutCache(tmp_path / "local")))
    expected = SerialEvaluator(local).evaluate(specs)
    # (Cache flags aside: the aborted batch may have cached some of the first three.)
    assert [_without_cached(o.transcript.to_dict()) for o in outcomes] == \
        [_without_cached(o.transcript.to_dict()) for o in expected]


def _without_cached(transcript: dict[str, Any]) -> dict[str, Any]:
    return {**transcript, "turns": [{k: v for k, v in t.items() if k not in ("cached", "latency_s")}
                                    for t in transcript["turns"]]}


class Unstartable:
    """An actor that cannot start on a node, as when trinity is not installed there."""

    def __init__(self) -> None:
        raise ModuleNotFoundError("No module named 'trinity_cli'")

    def start(self, setup: Any, keeper: Any) -> str:  # what the evaluator calls first
        return "never reached"


def test_an_actor_that_cannot_start_is_an_error_not_a_retry(cluster, tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    from trinity_cli.episode.schedules import FixedSchedule
    from trinity_cli.errors import ConfigError
    from trinity_cli.evaluators.local import EpisodeSpec, Runtime
    from trinity_cli.evaluators.ray_actors import RayEvaluator
    from trinity_cli.messages import Role
    from trinity_cli.policies.fixed import FixedPolicy
    from trinity_cli.pool.pool import Pool
    from trinity_cli.pool_config import load_pool
    from trinity_cli.tasks.items import TaskItem

    pool_file = write_pool(tmp_path, {"name": "p", "models": [{"name": "a", "kind": "scripted"}]})
    evaluator = RayEvaluator(Runtime(Pool(load_pool(str(pool_file)))), RayOptions(address=cluster.address, workers=2))
    try:
        evaluator._kill_all()  # replaced by actors that fail in their creation
        evaluator._worker_cls = ray.remote(num_cpus=1, max_restarts=0)(Unstartable)
        spec = EpisodeSpec(item=TaskItem("t", "q", "question?", "1", "numeric"), seed=0,
                           policy=FixedPolicy(FixedSchedule(["a"], "a", (Role.WORKER,))), max_turns=1)
        # (Where the nodes cannot import this test module, its creation fails alike.)
        with pytest.raises(ConfigError, match="a Ray actor could not start: .*No module named") as info:
            evaluator.evaluate([spec])
        assert "every node needs trinity-cli" in (info.value.hint or "")
        assert evaluator.started_on == []
    finally:
        evaluator.close()


def test_more_workers_than_cpus_is_refused(cluster, tmp_path: Path) -> None:
    from trinity_cli.errors import ConfigError
    from trinity_cli.evaluators.local import Runtime
    from trinity_cli.evaluators.ray_actors import RayEvaluator
    from trinity_cli.pool.pool import Pool
    from trinity_cli.pool_config import load_pool

    pool_file = write_pool(tmp_path, {"name": "p", "models": [{"name": "a", "kind": "scripted"}]})
    with pytest.raises(ConfigError, match="`ray_workers` 9: the Ray cluster has 3 CPUs") as info:
        RayEvaluator(Runtime(Pool(load_pool(str(pool_file)))), RayOptions(address=cluster.address, workers=9))
    assert "`ray_workers` 3 or fewer" in (info.value.hint or "")


# -- without a cluster ------------------------------------------------------------------------
def test_ray_takes_an_optional_address() -> None:
    from trinity_cli.entry import fill_optional_values

    assert fill_optional_values(["evolve", "--ray"]) == ["evolve", "--ray", "local"]
    assert fill_optional_values(["bench", "--ray", "-q"]) == ["bench", "--ray", "local", "-q"]
    assert fill_optional_values(["bench", "--ray", "10.0.0.5:6379", "-q"]) == ["bench", "--ray", "10.0.0.5:6379", "-q"]
    assert fill_optional_values(["bench", "--ray=auto"]) == ["bench", "--ray=auto"]
    assert fill_optional_values(["ask", "--", "--ray"]) == ["ask", "--", "--ray"]


@pytest.mark.parametrize("command", ["evolve", "bench"])
def test_ray_without_ray_installed_says_how_to_install_it(tmp_path: Path, monkeypatch, capsys, command: str) -> None:
    pool, tasks = test_evolve.setup_files(tmp_path)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    args = [command, "--pool", str(pool), "--ray"]
    args += (["--tasks", f"file:{tasks}:train", "--budget", "8", "--popsize", "2", "--minibatch", "4",
              "--backbone", "hash:16"] if command == "evolve" else ["--tasks", f"file:{tasks}:test"])
    code, _, err = test_evolve.run_cli(monkeypatch, capsys, args)
    assert code == 2
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert "--ray needs Ray" in err and "pip install 'trinity-cli[ray]'" in err and "pipx install '.[ray]'" in err
    assert not (tmp_path / "home" / "runs").exists() or not list((tmp_path / "home" / "runs").iterdir())


@pytest.mark.parametrize(("flags", "message"), [
    (["--ray-workers", "2"], "--ray-workers needs --ray"),
    (["--ray", "--parallel", "4"], "--parallel runs episodes on threads of this machine, --ray on Ray actors"),
])
def test_ray_flags_that_do_not_go_together(tmp_path: Path, monkeypatch, capsys, flags: list[str],
                                          message: str) -> None:
    pool, tasks = test_evolve.setup_files(tmp_path)
    code, _, err = test_evolve.run_cli(monkeypatch, capsys, [
        "evolve", "--search-only",
        "--pool", str(pool), "--tasks", f"file:{tasks}:train", "--backbone", "hash:16", *flags])
    assert code == 2 and message in err and err.strip().count("\n") == 0


def test_an_actor_computes_with_the_cpus_ray_gave_it(tmp_path) -> None:
    """Actors sharing a machine must not each take all its cores: llama.cpp members without
    n_threads get the actor's CPUs; members that set n_threads keep them."""
    from trinity_cli.evaluators.ray_cluster import actor_cpus
    from trinity_cli.pool_config import load_pool

    assert actor_cpus({"CPU": 1.0}) == 1 and actor_cpus({"CPU": 4.0}) == 4 and actor_cpus({}) == 1
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    pool = tmp_path / "p.yaml"
    pool.write_text(f"name: p\nmodels:\n  - {{name: a, kind: gguf, weights: {{path: {gguf}}}}}\n"
                    f"  - {{name: b, kind: gguf, n_threads: 3, weights: {{path: {gguf}}}}}\n"
                    "  - {name: c, kind: scripted, default: x}\n")
    sized = load_pool(str(pool)).sized_to(1)
    assert [getattr(m, "n_threads", None) for m in sized.models] == [1, 3, None]
