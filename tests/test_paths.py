"""paths.atomic_output: the one atomic-write helper every run file, cache file and
converted backbone goes through."""

from __future__ import annotations

from pathlib import Path

import pytest

from trinity_cli import paths


def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "data.json"
    paths.atomic_write_json(target, {"a": 1})
    paths.atomic_write_json(target, {"a": 2})
    assert target.read_text() == '{\n  "a": 2\n}\n'
    assert [p.name for p in target.parent.iterdir()] == ["data.json"]


def test_atomic_output_keeps_old_file_when_writer_fails(tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    target.write_text("old")
    with pytest.raises(RuntimeError), paths.atomic_output(target) as tmp:
        tmp.write_text("half of the new")
        raise RuntimeError("writer died")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_atomic_output_temp_keeps_suffix_for_format_sniffing(tmp_path: Path) -> None:
    with paths.atomic_output(tmp_path / "chart.png") as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path and tmp.name.startswith(".chart.png.")
        tmp.write_bytes(b"png")
    assert (tmp_path / "chart.png").read_bytes() == b"png"


def test_atomic_output_directory_replaces_existing_directory(tmp_path: Path) -> None:
    target = tmp_path / "backbone"
    target.mkdir()
    (target / "stale.bin").write_text("stale")
    with paths.atomic_output(target, directory=True) as tmp:
        assert tmp.is_dir() and tmp != target
        (tmp / "config.json").write_text("{}")
    assert sorted(p.name for p in target.iterdir()) == ["config.json"]
    with pytest.raises(KeyboardInterrupt), paths.atomic_output(target, directory=True) as tmp:
        (tmp / "config.json").write_text("partial")
        raise KeyboardInterrupt
    assert (target / "config.json").read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["backbone"]
