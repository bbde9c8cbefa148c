from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trinity_cli.coordinator import head as head_mod
from trinity_cli.errors import ConfigError, HeadMismatch

BACKBONE = {"ref": "smollm2-135m", "fingerprint": "gguf:abc", "hidden_size": 8}


def test_flat_layout_svf_then_rows() -> None:
    head = head_mod.untrained("p", ["a", "b"], BACKBONE, 8)
    head.manifest["svf"] = {"targets": ["t"], "sizes": [3]}
    head.svf_offsets = np.zeros(3, dtype=np.float32)
    vec = np.arange(head.n_params, dtype=np.float64)
    new = head.with_flat(vec)
    assert np.array_equal(new.svf_offsets, [0, 1, 2])
    assert np.array_equal(new.weights[0], np.arange(3, 11))  # row 0 = model slot 0
    assert new.weights.shape == (5, 8)
    assert np.array_equal(new.flat(), vec)
    with pytest.raises(ConfigError):
        head.with_flat(np.zeros(4))


def test_save_load_and_mismatch(tmp_path: Path) -> None:
    head = head_mod.untrained("p", ["a", "b"], BACKBONE, 8)
    head.weights[:] = 1.5
    head.save(tmp_path / "h")
    loaded = head_mod.Head.load(tmp_path / "h")
    assert np.array_equal(loaded.weights, head.weights) and loaded.models == ["a", "b"]
    with pytest.raises(HeadMismatch, match="made for models"):
        loaded.check("other", ["b", "a"])
    with pytest.raises(HeadMismatch, match="backbone"):
        loaded.check("p", ["a", "b"], "gguf:zzz")
    loaded.check("p", ["a", "b"], "gguf:abc")


def test_corrupt_head_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "manifest.json").write_text("{not json")
    with pytest.raises(ConfigError, match="unreadable"):
        head_mod.Head.load(tmp_path / "h")
