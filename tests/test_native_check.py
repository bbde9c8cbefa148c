"""The check that the llama.cpp build decodes here (backends/native_check.py), with stand-in
children instead of a model: one that dies of a signal, one that succeeds, one that raises.
No model is loaded."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from trinity_cli.backends import native_check
from trinity_cli.backends.native_check import NativeCrash
from trinity_cli.errors import BackendError

ROOT = Path(__file__).resolve().parents[1]
NO_CORE = "import resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); "


@pytest.fixture(autouse=True)
def fake_build(monkeypatch: pytest.MonkeyPatch) -> dict:
    """A stand-in llama.cpp build, nothing remembered from other tests, the check not skipped."""
    found = {"llama-cpp-python": "0.3.36", "folder": "/x/llama_cpp", "libraries": [], "key": "0123456789abcdef"}
    monkeypatch.setattr(native_check, "build", lambda: dict(found))
    monkeypatch.setattr(native_check, "_passed", set())
    monkeypatch.setattr(native_check, "_crashed", {})
    monkeypatch.delenv(native_check.SKIP_ENV, raising=False)
    return found


def child(tmp_path: Path, code: str) -> list[str]:
    """A child that notes each run (and the skip variable it got) in tmp_path/runs, then runs `code`."""
    runs = tmp_path / "runs"
    note = (f"import os; open({str(runs)!r}, 'a').write(os.environ.get({native_check.SKIP_ENV!r}, '-') + '\\n'); ")
    return [sys.executable, "-c", note + code]


def runs(tmp_path: Path) -> list[str]:
    path = tmp_path / "runs"
    return path.read_text().split() if path.exists() else []


def test_a_child_killed_by_sigill_names_the_signal_and_the_rebuild(tmp_path: Path) -> None:
    command = child(tmp_path, NO_CORE + "import os, signal; os.kill(os.getpid(), signal.SIGILL)")
    with pytest.raises(NativeCrash) as info:
        native_check.ensure_decodes(command=command)
    error = info.value
    assert "SIGILL (Illegal instruction)" in error.message
    assert "CPU instructions this CPU or VM does not allow" in error.message
    assert "\n" not in str(error)
    hint = error.hint or ""
    assert f'CMAKE_ARGS="{native_check.PORTABLE_CMAKE_ARGS}"' in hint
    assert "pip install --force-reinstall --no-cache-dir" in hint and "llama-cpp-python==0.3.36" in hint
    assert native_check.SKIP_ENV in hint
    assert not isinstance(error, BackendError)  # the command's error: the pool passes it through
    assert not native_check.marker("0123456789abcdef").exists()
    # Known in this process from then on: raised again without another child.
    with pytest.raises(NativeCrash):
        native_check.ensure_decodes(command=command)
    assert runs(tmp_path) == ["1"]


def test_an_exit_code_of_128_plus_a_crash_signal_counts_as_that_signal(tmp_path: Path) -> None:
    with pytest.raises(NativeCrash, match="SIGSEGV"):
        native_check.ensure_decodes(command=child(tmp_path, "import sys; sys.exit(128 + 11)"))


def test_death_signal_reads_subprocess_shell_and_windows_codes() -> None:
    assert native_check.death_signal(-4) == "SIGILL"
    assert native_check.death_signal(132) == "SIGILL"
    assert native_check.death_signal(-9) == "SIGKILL"
    assert native_check.death_signal(0xC000001D) == "SIGILL"
    assert [native_check.death_signal(code) for code in (0, 1, 2, 130)] == [None] * 4


def test_a_child_that_decodes_leaves_a_marker_and_no_later_call_spawns(tmp_path: Path) -> None:
    command = child(tmp_path, "pass")
    native_check.ensure_decodes(command=command)
    assert runs(tmp_path) == ["1"]  # the child itself skips the check it is part of
    marker = native_check.marker("0123456789abcdef")
    written = json.loads(marker.read_text())
    assert written["format"] == native_check.FORMAT and written["llama-cpp-python"] == "0.3.36"
    native_check.ensure_decodes(command=command)
    native_check._passed.clear()  # a later process: only the marker is left
    native_check.ensure_decodes(command=command)
    assert runs(tmp_path) == ["1"]


def test_a_child_that_fails_with_a_python_error_is_logged_and_tried_again_later(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    command = child(tmp_path, "raise ValueError('no model here')")
    with caplog.at_level("WARNING", logger="trinity_cli"):
        native_check.ensure_decodes(command=command)
    assert "exit 1: ValueError: no model here" in caplog.text
    assert not native_check.marker("0123456789abcdef").exists()
    native_check.ensure_decodes(command=command)
    assert runs(tmp_path) == ["1", "1"]


def test_a_child_killed_from_outside_or_too_slow_is_not_a_crash(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="trinity_cli"):
        native_check.ensure_decodes(command=child(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
        native_check.ensure_decodes(command=child(tmp_path, "import time; time.sleep(30)"), timeout=0.5)
    assert "killed by SIGKILL" in caplog.text and "took over" in caplog.text
    assert not native_check.marker("0123456789abcdef").exists()


def test_skipped_by_its_variable_or_when_llama_cpp_is_not_installed(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    command = child(tmp_path, "pass")
    monkeypatch.setenv(native_check.SKIP_ENV, "1")
    native_check.ensure_decodes(command=command)
    monkeypatch.delenv(native_check.SKIP_ENV)
    monkeypatch.setattr(native_check, "build", lambda: None)
    native_check.ensure_decodes(command=command)
    assert runs(tmp_path) == []


def test_a_rebuild_changes_the_build_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # the real `build`, on a stand-in package folder
    folder = tmp_path / "llama_cpp"
    (folder / "lib").mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    library = folder / "lib" / "libggml-cpu.so.0.25.3"
    library.write_bytes(b"old")
    spec = SimpleNamespace(submodule_search_locations=[str(folder)])
    monkeypatch.setattr(native_check.util, "find_spec", lambda name: spec if name == "llama_cpp" else None)
    first = native_check.build()
    assert first is not None and first["libraries"][0][0] == "lib/libggml-cpu.so.0.25.3"
    library.write_bytes(b"rebuilt")
    second = native_check.build()
    assert second is not None and second["key"] != first["key"]
    monkeypatch.setattr(native_check.util, "find_spec", lambda name: None)
    assert native_check.build() is None


def test_loading_a_gguf_member_runs_the_check_first_and_the_pool_passes_its_error_through(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trinity_cli.backends import llamacpp
    from trinity_cli.messages import ChatMessage
    from trinity_cli.pool.pool import open_pool
    from trinity_cli.pool_config import parse_pool

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    seen: list[object] = []

    def crashed(child: str = "", fallback: Path | None = None, **_: object) -> None:
        seen.extend([child, fallback])
        raise NativeCrash("llama.cpp died of SIGILL", "rebuild it")

    def not_reached() -> type:
        raise AssertionError("llama_cpp was imported before the check")

    monkeypatch.setattr(native_check, "ensure_decodes", crashed)
    monkeypatch.setattr(llamacpp, "_chunked_llama", not_reached)
    config = parse_pool(f"name: p\nmodels:\n  - {{name: a, kind: gguf, weights: {{path: {model}}}}}\n", "p.yaml")
    with open_pool(config, use_cache=False) as pool, pytest.raises(NativeCrash):
        pool.chat("a", [ChatMessage(role="user", content="hi")])
    # The child is the backend's own module (its decode_probe): native_check never imports it.
    assert seen == ["trinity_cli.backends.llamacpp", model]  # the member's own file, should the packaged one be missing
    assert native_check.child_command("trinity_cli.backends.llamacpp", model)[1:] == [
        "-m", "trinity_cli.backends.llamacpp", str(model)] and callable(llamacpp.decode_probe)


def test_the_probe_model_the_rebuild_flags_and_the_readme_agree_with_the_project() -> None:
    pool = yaml.safe_load((ROOT / "pools" / "smollm2.yaml").read_text(encoding="utf-8"))
    assert native_check.PROBE_WEIGHTS.model_dump(exclude_none=True) == pool["models"][0]["weights"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    (flags,) = [line.split("?=", 1)[1].strip() for line in makefile.splitlines() if line.startswith("CMAKE_ARGS ?=")]
    assert flags == native_check.PORTABLE_CMAKE_ARGS
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "Illegal instruction" in readme and native_check.PORTABLE_CMAKE_ARGS in readme
