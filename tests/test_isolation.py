"""conftest's isolation: every test runs in its own TRINITY_HOME, whatever the test does with
its own `monkeypatch`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def test_a_tests_monkeypatch_undo_keeps_its_own_home(trinity_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """conftest patches TRINITY_HOME apart from the test's `monkeypatch`, so undoing the test's
    patches mid-test cannot send its runs to the real home (a serve test once did)."""
    monkeypatch.setenv("TRINITY_DEBUG", "1")
    monkeypatch.undo()
    assert os.environ["TRINITY_HOME"] == str(trinity_home)
