"""A backend from another package, as docs/extending.md tells a newcomer to write one: its code
and pool file are read from the guide, installed the way pip installs a package (a
`.dist-info` with its entry point on the path), and `trinity ask` answers through it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from trinity_cli.pool_config import load_pool, parse_pool

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def _block(language: str, n: int = 0) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), re.S)
    return blocks[n]


def install_example(site: Path) -> None:
    """The guide's package, installed into `site` as pip would (code, metadata, entry points)."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "trinity_calculator.py").write_text(_block("python"))
    info = site / "trinity_calculator-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trinity-calculator\nVersion: 0.1\n")
    toml = _block("toml")
    group, entry = re.search(r'\[project\.entry-points\."([^"]+)"\]\n(.+)', toml).groups()  # type: ignore[union-attr]
    line = entry.replace('"', "")
    (info / "entry_points.txt").write_text(f"[{group}]\n{line}\n")


def _env(tmp_path: Path, site: Path) -> dict[str, str]:
    return {**os.environ, "TRINITY_HOME": str(tmp_path / "home"), "PYTHONPATH": str(site)}


def test_an_installed_backend_plugin_answers_through_trinity_ask(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_example(site)
    pool = tmp_path / "calc.yaml"
    pool.write_text(_block("yaml"))
    done = subprocess.run([sys.executable, "-m", "trinity_cli", "ask", "--pool", str(pool), "--head", "untrained",
                           "-q", "What is 12*7?"], env=_env(tmp_path, site), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].endswith("84")
    # The member's own field is checked by the plugin's config model, with its name.
    pool.write_text(_block("yaml").replace("digits: 3", "digits: many"))
    bad = subprocess.run([sys.executable, "-m", "trinity_cli", "ask", "--pool", str(pool), "--head", "untrained",
                          "-q", "What is 12*7?"], env=_env(tmp_path, site), capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "digits" in bad.stderr and "Traceback" not in bad.stderr
    assert bad.stderr.strip().count("\n") == 0


def test_a_kind_no_package_registers_is_refused_with_the_kinds_that_exist(tmp_path: Path) -> None:
    try:
        parse_pool(_block("yaml"), "calc.yaml")
    except Exception as exc:  # noqa: BLE001 - the message is what is checked
        assert "unknown kind 'calculator'" in str(exc) and "gguf, openai, scripted" in str(exc)
    else:
        raise AssertionError("a kind nobody registers was accepted")


def test_the_example_ollama_pool_is_an_openai_compatible_pool() -> None:
    config = load_pool("example-ollama")
    assert {m.kind for m in config.models} == {"openai"} and config.router == "agree"
    assert all(m.base_url.startswith("http://127.0.0.1:") for m in config.models)  # type: ignore[union-attr]


def test_a_policy_from_the_guide_is_played_by_the_evaluator(tmp_path: Path) -> None:
    """docs/extending.md's policy, played through the evaluator bench and evolve use."""
    from trinity_cli import tasks
    from trinity_cli.evaluators.local import EpisodeSpec, Runtime
    from trinity_cli.pool.pool import open_pool

    from .conftest import write_pool

    namespace: dict = {}
    exec(compile(_block("python", 1), "trinity_numeric.py", "exec"), namespace)  # noqa: S102 - the guide's code
    pool_file = write_pool(tmp_path, {"name": "duo", "models": [
        {"name": "words", "kind": "scripted", "default": "I would rather not say."},
        {"name": "numbers", "kind": "scripted", "default": "Six times seven.\nAnswer: 42"}]})
    item = tasks.TaskItem(task="file:x", id="q1", prompt="What is six times seven?", reference="42", scorer="numeric")
    with open_pool(load_pool(str(pool_file))) as pool:
        runtime = Runtime(pool)
        outcome = runtime.play(EpisodeSpec(item=item, seed=0, router=namespace["UntilNumber"](), max_turns=3))
    assert outcome.reward == 1.0 and [t.model for t in outcome.transcript.turns] == ["numbers"]
