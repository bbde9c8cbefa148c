from __future__ import annotations

import json
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
    assert np.array_equal(new.bias, vec[-5:])  # then the bias, one per row
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


def test_centred_input_logits_and_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    head = head_mod.untrained("p", ["a", "b"], BACKBONE, 8).with_flat(rng.normal(size=5 * 8 + 5))
    center = rng.normal(size=8).astype(np.float32)
    centred = head.with_input(center, 0.25, items=12)
    h = rng.normal(size=8)
    want = head.weights.astype(np.float64) @ ((h - center) / 0.25) + head.bias
    models, roles = centred.logits(h)
    assert np.allclose(np.r_[models, roles], want) and models.size == 2 and roles.size == 3
    assert not np.allclose(np.r_[head.logits(h)], want)  # the centre is not a no-op
    assert centred.manifest["input"] == {"center_items": 12, "dims": 0}
    moved = centred.with_flat(np.zeros(centred.n_params))  # the search leaves the centre alone
    assert np.array_equal(moved.center, center) and moved.center_scale == 0.25 and moved.is_zero
    centred.save(tmp_path / "h")
    loaded = head_mod.Head.load(tmp_path / "h")
    assert loaded.manifest["format"] == "trinity-head/3"
    assert np.allclose(np.r_[loaded.logits(h)], want, atol=1e-4)


def test_projected_input_logits_round_trip_and_refusals(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    feats = rng.normal(size=(40, 8))
    feats /= np.linalg.norm(feats, axis=1, keepdims=True)
    center, scale = head_mod.fit_center(feats)
    basis = head_mod.fit_basis(feats, center, scale, 3)
    assert basis.shape == (3, 8)
    head = head_mod.untrained("p", ["a", "b"], BACKBONE, 8, dims=3)
    assert head.n_params == 5 * 3 + 5 and head.hidden_size == 8 and head.is_zero
    projected = head.with_flat(rng.normal(size=head.n_params)).with_input(center, scale, items=40, basis=basis)
    assert projected.manifest["input"] == {"center_items": 40, "dims": 3}
    h = feats[0]
    want = projected.weights.astype(np.float64) @ (basis.astype(np.float64) @ ((h - center) / scale)) + projected.bias
    assert np.allclose(np.r_[projected.logits(h)], want)
    moved = projected.with_flat(projected.flat())  # the search leaves the projection alone
    assert np.array_equal(moved.basis, basis)
    projected.save(tmp_path / "h")
    loaded = head_mod.Head.load(tmp_path / "h")
    assert np.array_equal(loaded.basis, basis) and np.allclose(np.r_[loaded.logits(h)], want, atol=1e-4)
    # A projection that does not match the weights is refused on load, in one line.
    np.savez(tmp_path / "h" / "weights.npz", head=projected.weights, svf=np.zeros(0, dtype=np.float32),
             bias=projected.bias, center=center, center_scale=np.float32(scale), basis=basis[:2])
    with pytest.raises(ConfigError, match="do not match"):
        head_mod.Head.load(tmp_path / "h")
    # More directions than the features span: one clear line.
    with pytest.raises(ConfigError, match="span 2 directions, fewer than `input_dims` 3"):
        head_mod.fit_basis(feats[:3], *head_mod.fit_center(feats[:3]), 3)


def test_format_2_head_loads_without_projection(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    head = head_mod.untrained("p", ["a", "b"], BACKBONE, 8).with_flat(rng.normal(size=5 * 8 + 5))
    (tmp_path / "h").mkdir()
    np.savez(tmp_path / "h" / "weights.npz", head=head.weights, svf=np.zeros(0, dtype=np.float32), bias=head.bias,
             center=np.full(8, 0.1, dtype=np.float32), center_scale=np.float32(0.5))
    (tmp_path / "h" / "manifest.json").write_text(json.dumps({**head.manifest, "format": "trinity-head/2"}))
    loaded = head_mod.Head.load(tmp_path / "h")
    h = np.arange(8.0) / 10
    assert loaded.basis.size == 0
    assert np.allclose(np.r_[loaded.logits(h)], head.weights.astype(np.float64) @ ((h - 0.1) / 0.5) + head.bias,
                       atol=1e-5)


def test_format_1_head_loads_uncentred_without_bias(tmp_path: Path) -> None:
    """A head written before centring: no bias, centre or scale in weights.npz."""
    weights = np.random.default_rng(1).normal(size=(5, 8)).astype(np.float32)
    (tmp_path / "h").mkdir()
    np.savez(tmp_path / "h" / "weights.npz", head=weights, svf=np.zeros(0, dtype=np.float32))
    manifest = {**head_mod.untrained("p", ["a", "b"], BACKBONE, 8).manifest, "format": "trinity-head/1"}
    (tmp_path / "h" / "manifest.json").write_text(json.dumps(manifest))
    loaded = head_mod.Head.load(tmp_path / "h")
    h = np.arange(8.0)
    assert not loaded.bias.any() and not loaded.center.any() and loaded.center_scale == 1.0
    assert np.allclose(np.r_[loaded.logits(h)], weights.astype(np.float64) @ h)
    np.savez(tmp_path / "h" / "weights.npz", head=weights, svf=np.zeros(0, dtype=np.float32),
             bias=np.zeros(4, dtype=np.float32))  # one short
    with pytest.raises(ConfigError, match="do not match"):
        head_mod.Head.load(tmp_path / "h")


def test_corrupt_head_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "manifest.json").write_text("{not json")
    with pytest.raises(ConfigError, match="unreadable"):
        head_mod.Head.load(tmp_path / "h")


def trained_head(prompt_version: str = "p0", coordinator_version: str = "c1") -> head_mod.Head:
    head = head_mod.untrained("p", ["a", "b"], {"ref": "hash:8", "fingerprint": "hash:8:v1", "hidden_size": 8}, 8)
    head.weights[:] = 0.5
    head.manifest.update(name="old", trained=True, prompt_version=prompt_version,
                         coordinator_version=coordinator_version)
    return head


def test_check_refuses_a_head_of_other_prompt_or_coordinator_versions() -> None:
    """Issue 14.9."""
    current = {"prompt_version": "p1", "coordinator_version": "c1"}
    with pytest.raises(HeadMismatch, match="evolved under prompt version 'p0', this trinity runs 'p1'"):
        trained_head("p0").check("p", ["a", "b"], versions=current)
    with pytest.raises(HeadMismatch, match="coordinator version 'c0'"):
        trained_head("p1", "c0").check("p", ["a", "b"], versions=current)
    trained_head("p1", "c1").check("p", ["a", "b"], versions=current)
    # An untrained head reads no text: any version will do.
    head_mod.untrained("p", ["a", "b"], BACKBONE, 8).check("p", ["a", "b"], versions=current)


def test_resolve_head_refuses_a_named_head_of_other_versions(tmp_path: Path) -> None:
    """Issue 14.9: `--head DIR` evolved under other prompts is refused with the reason."""
    from trinity_cli.coordinator.policy import resolve_head, versions

    trained_head("p-old").save(tmp_path / "old")
    with pytest.raises(HeadMismatch, match="prompt version 'p-old'"):
        resolve_head(str(tmp_path / "old"), "p", ["a", "b"])
    current = versions()
    trained_head(current["prompt_version"], current["coordinator_version"]).save(tmp_path / "now")
    assert resolve_head(str(tmp_path / "now"), "p", ["a", "b"]).learned


def test_default_head_of_other_versions_is_skipped_with_a_warning(trinity_home: Path, caplog) -> None:
    """Issue 14.9: the implicit default head falls back to untrained and says why."""
    from trinity_cli import paths
    from trinity_cli.coordinator.policy import resolve_head

    head = trained_head("p-old")
    head.manifest["name"] = "default"
    head.save(paths.user_heads_dir() / "default")
    with caplog.at_level("WARNING"):
        chosen = resolve_head(None, "p", ["a", "b"], "hash:8")
    assert not chosen.learned and chosen.is_zero
    assert "prompt version 'p-old'" in caplog.text and "untrained" in caplog.text


def test_svf_head_of_the_old_scaling_is_refused(tmp_path: Path) -> None:
    """Issue 14.6: offsets saved for `1 + o` mean something else under exp(o)."""
    head = head_mod.untrained("p", ["a", "b"], BACKBONE, 8)
    head.manifest["svf"] = {"targets": ["t"], "sizes": [3]}
    head.svf_offsets = np.zeros(3, dtype=np.float32)
    head.save(tmp_path / "h")
    with pytest.raises(ConfigError, match="1 \\+ o"):
        head_mod.Head.load(tmp_path / "h")
    head.manifest["svf"]["scale"] = "exp"
    head.save(tmp_path / "h")
    assert head_mod.Head.load(tmp_path / "h").svf_sizes == [3]


def test_a_head_that_cannot_read_the_backbone_is_refused_before_anything_runs(tmp_path: Path, monkeypatch,
                                                                                 caplog) -> None:
    """resolve_head compares the head's backbone fingerprint with the backbone it would read
    (the --backbone given, else its own), so ask, bench and serve refuse it before a run
    directory exists or a model loads; the shipped default, picked implicitly, falls back to
    the untrained head with a warning instead."""
    from trinity_cli.coordinator.policy import DEFAULT_HEAD, versions

    head = head_mod.untrained("p", ["a", "b"], {"ref": "hash:16", "fingerprint": "hash:16:v1", "hidden_size": 16},
                              16).with_flat(np.ones(5 * 16 + 5))
    head.manifest = {**head.manifest, "name": "h", "trained": True, **versions()}
    head.save(tmp_path / "h")
    from trinity_cli.coordinator.policy import resolve_head

    assert resolve_head(str(tmp_path / "h"), "p", ["a", "b"]).learned  # its own backbone
    assert resolve_head(str(tmp_path / "h"), "p", ["a", "b"], "hash:16").learned
    with pytest.raises(HeadMismatch, match="backbone 'hash:16'"):
        resolve_head(str(tmp_path / "h"), "p", ["a", "b"], "hash:32")
    # The same head shipped as the default: a --backbone it cannot read leaves it out, saying why.
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home"))
    head.save(tmp_path / "home" / "heads" / DEFAULT_HEAD)
    with caplog.at_level("WARNING"):
        fallback = resolve_head(None, "p", ["a", "b"], "hash:32")
    assert not fallback.learned and "not using head 'default'" in caplog.text and "backbone" in caplog.text
    assert resolve_head(None, "p", ["a", "b"]).learned
