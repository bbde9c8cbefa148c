"""assets._assemble writes the joined model file through paths.atomic_output: a digest
mismatch leaves neither the target nor a temporary file behind."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from trinity_cli import assets, paths
from trinity_cli.errors import AssetError
from trinity_cli.member_config import PackageFile, SplitFile


def _split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, digest: str) -> SplitFile:
    files = {"a": b"GGUF-first-", "b": b"second-part"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    monkeypatch.setattr(assets, "_dist_file", lambda package, rel: tmp_path / rel)
    return SplitFile(parts=[PackageFile(package="p", path="a"), PackageFile(package="p", path="b")],
                     filename="m.gguf", size=sum(len(d) for d in files.values()), sha256=digest)


def test_assemble_joins_parts_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    digest = hashlib.sha256(b"GGUF-first-second-part").hexdigest()
    target = assets._assemble(_split(tmp_path, monkeypatch, digest))
    assert target.read_bytes() == b"GGUF-first-second-part"
    assert sorted(p.name for p in target.parent.iterdir()) == sorted([target.name, "fingerprints.json"])


def test_assemble_with_bad_digest_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssetError, match="fails its sha256 check"):
        assets._assemble(_split(tmp_path, monkeypatch, "0" * 64))
    assert list(paths.cache_dir("models").iterdir()) == []
