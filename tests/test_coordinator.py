"""The coordinator: SVF, backbone fingerprints, hidden-state cache keys, the text it reads.

Backbone tests use `tiny_lm_dir` (conftest): a randomly initialised Llama with hidden size
32, loaded through the same `Backbone` class as a real model directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from trinity_cli.coordinator import head as head_mod
from trinity_cli.coordinator.policy import Coordinator
from trinity_cli.coordinator.text import INSTRUCTION, coordinator_text
from trinity_cli.errors import AssetError
from trinity_cli.messages import Role, Turn

torch = pytest.importorskip("torch")

# The devices a backbone can run on here: the bit-for-bit claims below are checked on each
# (a CUDA GPU runs them in float16, its own kernels).
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
TEXT = "You coordinate.\nTask: What is six times seven?\nworker (m0): 42\nNext:"


def backbone(directory: Path, device: str = "cpu", max_tokens: int = 256):
    from trinity_cli.coordinator.backbone import Backbone

    return Backbone(str(directory), device=device, max_tokens=max_tokens)


def svf_for(bb):
    from trinity_cli.coordinator.svf import DEFAULT_TARGETS, SVF

    return SVF(bb, DEFAULT_TARGETS)


# -- SVF (issue 14.6) ---------------------------------------------------------------------
def test_svf_zero_offsets_reproduce_features_exactly(tiny_lm_dir: Path) -> None:
    bb = backbone(tiny_lm_dir)
    before = bb.encode(TEXT)
    svf = svf_for(bb)
    offsets = np.random.default_rng(0).normal(0, 0.5, svf.n_params).astype(np.float32)
    svf.apply(offsets)
    assert not np.array_equal(bb.encode(TEXT), before)
    svf.apply(np.zeros(svf.n_params, dtype=np.float32))
    assert np.array_equal(bb.encode(TEXT), before)  # bit for bit, not up to float error
    # Zero offsets on one target leave that matrix as it was while the other one changes.
    down = bb.linear("layers.-1.mlp.down_proj").weight.detach().clone()
    half = offsets.copy()
    half[: svf.sizes[0]] = 0
    svf.apply(half)
    assert torch.equal(bb.linear("layers.-1.mlp.down_proj").weight, down)


def _expected(weight: np.ndarray, o: np.ndarray) -> np.ndarray:
    u, s, vh = np.linalg.svd(weight.astype(np.float64), full_matrices=False)
    scaled = s * np.exp(o)
    return (u * (scaled * s.sum() / scaled.sum())) @ vh


def test_svf_known_offsets_give_the_expected_matrices(tiny_lm_dir: Path) -> None:
    bb = backbone(tiny_lm_dir)
    svf = svf_for(bb)
    originals = [bb.linear(t).weight.detach().numpy().copy() for t in svf.targets]
    # Offsets down to -3: with the old `1 + o` scaling these flipped singular directions.
    offsets = np.concatenate([np.linspace(-3, 2, n) for n in svf.sizes]).astype(np.float32)
    svf.apply(offsets)
    start = 0
    for target, original, size in zip(svf.targets, originals, svf.sizes, strict=True):
        new = bb.linear(target).weight.detach().numpy().astype(np.float64)
        expected = _expected(original, offsets[start : start + size].astype(np.float64))
        start += size
        assert np.allclose(new, expected, atol=1e-5 * np.abs(expected).max())


def test_svf_keeps_the_sum_of_singular_values_and_their_signs(tiny_lm_dir: Path) -> None:
    bb = backbone(tiny_lm_dir)
    svf = svf_for(bb)
    target = svf.targets[0]
    w = bb.linear(target).weight.detach().numpy().astype(np.float64)
    u, s, vh = np.linalg.svd(w, full_matrices=False)
    offsets = np.zeros(svf.n_params, dtype=np.float32)
    offsets[: svf.sizes[0]] = np.where(np.arange(svf.sizes[0]) % 2 == 0, -2.5, 1.0)
    svf.apply(offsets)
    new = bb.linear(target).weight.detach().numpy().astype(np.float64)
    assert np.isclose(np.linalg.svd(new, compute_uv=False).sum(), s.sum(), rtol=1e-5)
    # In the original singular basis the new matrix is diagonal with positive entries: no
    # singular direction changed sign.
    diag = np.diag(u.T @ new @ vh.T)
    assert (diag > 0).all()
    assert np.isclose(diag.sum(), s.sum(), rtol=1e-5)


def test_svf_extreme_offsets_stay_finite(tiny_lm_dir: Path) -> None:
    bb = backbone(tiny_lm_dir)
    svf = svf_for(bb)
    svf.apply(np.full(svf.n_params, 200.0, dtype=np.float32))
    assert np.isfinite(bb.encode(TEXT)).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_svf_on_cuda_agrees_with_cpu(tiny_lm_dir: Path) -> None:
    offsets = None
    features = {}
    for device in ("cpu", "cuda"):
        bb = backbone(tiny_lm_dir, device)
        svf = svf_for(bb)
        if offsets is None:
            offsets = np.random.default_rng(1).normal(0, 0.3, svf.n_params).astype(np.float32)
        svf.apply(offsets)  # offsets arrive as numpy on the CPU, the matrices live on the GPU
        features[device] = bb.encode(TEXT)
    # float32 on CPU, float16 on CUDA
    assert np.allclose(features["cpu"], features["cuda"], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_svf_head_evolves_and_records_its_scaling(tmp_path: Path, tiny_lm_dir: Path, device: str) -> None:
    from trinity_cli.evolve.evolution import evolve
    from trinity_cli.evolve.options import EvolveOptions

    from .test_evolve import setup_files

    pool, tasks = setup_files(tmp_path)
    result = evolve(EvolveOptions(pool=str(pool), tasks=f"file:{tasks}:train", val_tasks=f"file:{tasks}:val:2",
                                  budget=8, minibatch=2, popsize=4, seed=1, max_turns=2, backbone=str(tiny_lm_dir),
                                  device=device, svf=True, out=str(tmp_path / "head")))
    head = head_mod.Head.load(result.head_dir)
    assert head.manifest["svf"]["scale"] == "exp" and head.svf_offsets.size == sum(head.manifest["svf"]["sizes"])
    assert head.manifest["backbone"]["fingerprint"].startswith("dir:")


# -- fingerprints and the hidden-state cache key (issue 14.7) -----------------------------
def test_directory_backbone_is_fingerprinted_by_its_files(tmp_path: Path, tiny_lm_dir: Path) -> None:
    import shutil

    from trinity_cli.coordinator.backbone_refs import describe

    copy = tmp_path / "model"
    shutil.copytree(tiny_lm_dir, copy)
    first, _ = describe(str(copy))
    assert first.startswith("dir:") and describe(str(copy))[0] == first
    config = json.loads((copy / "config.json").read_text())
    config["rms_norm_eps"] = 1e-5 if config.get("rms_norm_eps") != 1e-5 else 1e-6
    (copy / "config.json").write_text(json.dumps(config))
    assert describe(str(copy))[0] != first


def test_hf_backbone_is_fingerprinted_by_its_snapshot_revision(tmp_path: Path, monkeypatch) -> None:
    from huggingface_hub import constants

    from trinity_cli.coordinator.backbone_refs import describe

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    repo = tmp_path / "hub" / "models--org--tiny"

    def snapshot(commit: str) -> None:
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}")
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(commit)

    snapshot("a" * 40)
    assert describe("org/tiny")[0] == f"hf:org/tiny@{'a' * 40}"
    snapshot("b" * 40)  # the cache now resolves main to a newer snapshot
    assert describe("org/tiny")[0] == f"hf:org/tiny@{'b' * 40}"
    with pytest.raises(AssetError, match="nor in the local Hugging Face cache"):
        describe("org/absent")


def stub_backbone(**kw):
    base = dict(fingerprint="dir:abc", dtype="float32", max_tokens=1024, hidden_size=8,
                count_tokens=lambda text: len(text.split()))
    base.update(kw)
    return SimpleNamespace(**base)


def coordinator(svf_targets=None, **kw) -> Coordinator:
    head = head_mod.untrained("p", ["a", "b"], {"ref": "x", "fingerprint": "dir:abc", "hidden_size": 8}, 8)
    head.weights[:] = 0.1
    c = Coordinator(head, backbone_ref="x", svf_targets=svf_targets, use_cache=False,
                    max_tokens=kw.get("max_tokens", 1024))
    c._shared.backbone = stub_backbone(**kw)
    c._checked = True  # a stub stands in for the loaded backbone: the head is not checked against it
    return c


def test_hidden_state_cache_key_names_svf_targets_and_dtype() -> None:
    key = coordinator()._cache_key(TEXT)
    assert key == coordinator()._cache_key(TEXT)
    assert coordinator(svf_targets=["layers.-1.mlp.down_proj"])._cache_key(TEXT) != key
    assert (coordinator(svf_targets=["layers.-1.mlp.down_proj"])._cache_key(TEXT)
            != coordinator(svf_targets=["layers.-1.self_attn.o_proj"])._cache_key(TEXT))
    assert coordinator(dtype="float16")._cache_key(TEXT) != key
    assert coordinator(fingerprint="dir:other")._cache_key(TEXT) != key


# -- long transcripts (issue 14.8) -------------------------------------------------------
def turn(i: int, words: int) -> Turn:
    reply = f"reply{i} " + " ".join(f"w{i}x{k}" for k in range(words))
    return Turn(index=i, model="a", role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[], role_probs=[],
                messages=[], reply=reply, prompt_tokens=0, completion_tokens=0, latency_s=0, coordinator_s=0)


def test_short_text_fits_without_loading_the_backbone() -> None:
    c = coordinator()
    c._shared.backbone = None  # loading "x" would fail: the check must not need it
    assert c.fits("Next:" * 100)
    c._shared.backbone = stub_backbone(max_tokens=1024)
    assert not c.fits("word " * 1100) and c.fits("word " * 1000)


def test_long_transcript_drops_oldest_turns_not_instruction_or_task() -> None:
    c = coordinator(max_tokens=120)
    seen = []
    c._shared.backbone.encode = lambda text: seen.append(text) or np.ones(8, dtype=np.float32)
    task = "Compute the total cost of seven apples."
    turns = [turn(i, 40) for i in range(6)]
    c.decide(task, turns, np.random.default_rng(0))
    text = seen[0]
    assert len(text.split()) <= 120
    assert text.startswith(INSTRUCTION) and f"Task: {task}" in text and text.endswith("\nNext:")
    assert "reply5" in text and "reply0" not in text  # the newest turn stays, the oldest goes
    kept = [i for i in range(6) if f"reply{i} " in text]
    assert kept == list(range(kept[0], 6))  # a suffix of the conversation


def test_task_longer_than_the_limit_is_clipped_at_its_end() -> None:
    task = "Important first words. " + "filler " * 400
    text = coordinator_text(task, [turn(0, 10)], fits=lambda t: len(t.split()) <= 100)
    assert len(text.split()) <= 100
    assert text.startswith(INSTRUCTION) and "Task: Important first words." in text and text.endswith("Next:")
    assert "reply0" not in text


def test_tiny_backbone_reads_the_instruction_of_a_long_transcript(tiny_lm_dir: Path) -> None:
    c = coordinator(max_tokens=1024)
    c._shared.backbone = bb = backbone(tiny_lm_dir, max_tokens=1024)  # one token per character
    text = coordinator_text("Add 2 and 3.", [turn(i, 30) for i in range(5)], fits=c.fits)
    assert 900 < bb.count_tokens(text) <= bb.max_tokens
    assert text.startswith(INSTRUCTION[:40]) and "Task: Add 2 and 3." in text and "reply4" in text


# -- incremental encoding -----------------------------------------------------------------


def growing_texts(n: int = 6) -> list[str]:
    """An episode's coordinator texts: each the previous plus a turn (as coordinator_text builds them)."""
    turns = [Turn(index=i, model=f"m{i % 2}", role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[0.5, 0.5],
                  role_probs=[1 / 3] * 3, messages=[], reply=f"step {i}: the answer is {6 * i + 1} " * 3,
                  prompt_tokens=1, completion_tokens=1, latency_s=0.0, coordinator_s=0.0) for i in range(n)]
    return [coordinator_text("What is six times seven?", turns[:k]) for k in range(n + 1)]


@pytest.mark.parametrize("device", DEVICES)
def test_incremental_features_equal_a_full_encode(tiny_lm_dir: Path, device: str) -> None:
    """Texts that grow by appending: only their new blocks are encoded, each feature equals
    a single full pass over the whole text to float rounding, and bit for bit what the same
    text gives with nothing kept (so results do not depend on which episode ran first)."""
    incremental = backbone(tiny_lm_dir, device, max_tokens=4096)
    fresh = backbone(tiny_lm_dir, device, max_tokens=4096)
    fresh.incremental = False
    texts = growing_texts()
    tolerance = {"atol": 1e-5, "rtol": 1e-4} if device == "cpu" else {"atol": 2e-2, "rtol": 2e-2}  # float16
    for text in texts:
        mine = incremental.encode(text)
        assert np.array_equal(mine, fresh.encode(text))
        np.testing.assert_allclose(mine, full_pass(fresh, text), **tolerance)
    total = sum(len(fresh.tokenizer(t)["input_ids"]) for t in texts)
    assert fresh.reused_tokens == 0 and fresh.encoded_tokens == total
    assert incremental.encoded_tokens + incremental.reused_tokens == total
    assert incremental.reused_tokens > 0.6 * total
    # Another episode in between (another task) does not break the first one's reuse.
    other = texts[1].replace("six times seven", "two plus two")
    assert np.array_equal(incremental.encode(other), fresh.encode(other))
    before = incremental.reused_tokens
    assert np.array_equal(incremental.encode(texts[-1] + " more"), fresh.encode(texts[-1] + " more"))
    assert incremental.reused_tokens - before >= len(fresh.tokenizer(texts[-1])["input_ids"]) - len("Next:")


def test_blocks_start_at_lines() -> None:
    from trinity_cli.coordinator.encoding import line_blocks

    text = "ab\ncd\nNext:"
    offsets = [(i, i + 1) for i in range(len(text))]  # one token per character
    assert line_blocks(text, offsets) == [0, 3, 6, len(text)]
    assert line_blocks("ab\nc", [(0, 1), (1, 2), (2, 3), (3, 4)]) == [0, 4]  # a last block of one token merges


def full_pass(bb, text: str) -> np.ndarray:
    """The feature from one forward pass over the whole text (no blocks)."""
    ids = bb.tokenizer(text, return_tensors="pt", truncation=True, max_length=bb.max_tokens).to(bb.device)
    with torch.inference_mode():
        hidden = bb.decoder(**ids).last_hidden_state[0]
    return hidden[-2].float().cpu().numpy()


@pytest.mark.parametrize("device", DEVICES)
def test_a_prefix_is_reused_only_under_the_same_weights(tiny_lm_dir: Path, device: str) -> None:
    bb = backbone(tiny_lm_dir, device, max_tokens=4096)
    svf = svf_for(bb)
    texts = growing_texts(3)
    bb.encode(texts[1])
    svf.apply(np.full(svf.n_params, 0.3, dtype=np.float32))  # the kept prefix's keys and values no longer hold
    before = bb.reused_tokens
    moved = bb.encode(texts[2])
    assert bb.reused_tokens == before
    bb.incremental = False
    assert np.array_equal(moved, bb.encode(texts[2]))
    svf.apply(np.zeros(svf.n_params, dtype=np.float32))
    assert bb.weights_state == ""


@pytest.mark.integration
@pytest.mark.parametrize("name", ["smollm2-135m", "qwen2.5-coder-0.5b"])
def test_embedded_backbones_resolve_to_files_of_the_hidden_size_they_declare(name: str) -> None:
    # An untrained head is built from EMBEDDED_HIDDEN without loading anything; it must be
    # what the shipped file's own metadata says, or a head would not fit the model it reads.
    from gguf import GGUFReader

    from trinity_cli.coordinator import backbone_refs

    fingerprint, path = backbone_refs.describe(name)
    assert path is not None and fingerprint.startswith("gguf:")
    reader = GGUFReader(str(path))
    sizes = [int(f.parts[f.data[0]][0]) for key, f in reader.fields.items() if key.endswith(".embedding_length")]
    assert sizes == [backbone_refs.EMBEDDED_HIDDEN[name]]
    assert set(backbone_refs.EMBEDDED) == set(backbone_refs.EMBEDDED_HIDDEN)


# -- recorded features without the backbone (issue 65.2) ------------------------------------
def test_recorded_decisions_are_read_without_loading_the_backbone(tiny_lm_dir: Path, monkeypatch) -> None:
    """A decision whose feature the hidden-state cache holds needs no backbone: its key is
    known from the backbone's reference and the device, and the text it read from which
    candidate was recorded (even a long transcript's shortened one, in replay-only mode)."""
    from trinity_cli.coordinator import backbone as backbone_mod
    from trinity_cli.coordinator.backbone_refs import describe
    from trinity_cli.coordinator.policy import versions

    ref = str(tiny_lm_dir)
    head = head_mod.untrained("p", ["a", "b"], {"ref": ref, "fingerprint": describe(ref)[0], "hidden_size": 32}, 32)
    head.weights[:] = np.random.default_rng(0).normal(0, 1, head.weights.shape).astype(np.float32)
    head.manifest.update(name="h", trained=True, **versions())
    task = "Compute the total cost of seven apples."
    states = [[], [turn(0, 5)], [turn(i, 60) for i in range(6)]]  # the last must be shortened to fit

    def play() -> tuple[list[tuple[str, str]], Coordinator]:
        c = Coordinator(head, device="cpu", max_tokens=1024)
        picks = [c.decide(task, turns, np.random.default_rng(0), greedy=True) for turns in states]
        return [(d.model, d.role.value) for d in picks], c

    recorded, first = play()
    assert first._shared.backbone is not None and first.encode_calls == len(states)
    first.close()

    def no_load(*args, **kwargs):
        raise AssertionError("the backbone was loaded")

    monkeypatch.setattr(backbone_mod, "load", no_load)
    monkeypatch.setenv("TRINITY_REPLAY_ONLY", "1")
    replayed, again = play()
    assert replayed == recorded and again._shared.backbone is None and again.cache_hits == len(states)
    again.close()
    monkeypatch.delenv("TRINITY_REPLAY_ONLY")
    with pytest.raises(AssertionError, match="loaded"):  # outside replay-only the long state must count tokens
        play()
