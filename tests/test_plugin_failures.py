"""A plugin that fails is the plugin's problem (registry.py): one per extension point, each a
real package installed by pip (tests/packages.py), whose entries cannot be imported or raise
where trinity calls them. Each is named in one warning line with its package and set aside;
every command that does not need it works; a command that needs it fails in one line naming
the package and the fix. Also the edges met beside them: an unreadable pool file in the
listing, a misspelled pool field, a split that selects nothing, a scorer no kind has."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trinity_cli.errors import ConfigError, TrinityError
from trinity_cli.registry import Registry

from .conftest import run_main, write_pool
from .packages import install_package, trinity

GONE = "import a_module_nobody_installed  # noqa: F401\n"  # a module whose import fails
FIX = "pip uninstall trinity-shaky"


def _duo(tmp_path: Path) -> Path:
    return write_pool(tmp_path, {"name": "duo", "models": [
        {"name": "words", "kind": "scripted", "default": "I would rather not say."},
        {"name": "numbers", "kind": "scripted", "default": "Six times seven.\nAnswer: 42"}]})


def _questions(tmp_path: Path) -> str:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"prompt": f"What is 6 times 7? ({i})", "answer": 42,
                                         "scorer": "numeric", "id": f"q{i}"}) + "\n" for i in range(3)))
    return f"file:{tasks}:all"


def _one_line(done: subprocess.CompletedProcess[str], *said: str) -> None:
    """`done` failed as a user error, in one line naming the package and the fix."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr, done.stderr
    assert "unexpected" not in done.stderr and "package trinity-shaky" in done.stderr and FIX in done.stderr
    assert all(s in done.stderr for s in said), done.stderr


def _warned(done: subprocess.CompletedProcess[str], *names: str) -> None:
    """`done` said, once each, that `names` were set aside, naming their package and the fix."""
    lines = [line for line in done.stderr.splitlines() if "set aside" in line]
    assert len(lines) == len(names), done.stderr
    for name, line in zip(names, lines, strict=True):
        assert line.startswith("warning: ") and f"{name!r} (package trinity-shaky) set aside" in line and FIX in line


KINDS = '''"""Answer kinds that fail."""

from trinity_cli.answer_kinds.base import AnswerKind


class Touchy(AnswerKind):
    name, priority = "touchy", 5  # tried before every built-in kind

    def detect(self, task):
        raise KeyError("detect blew up")


TOUCHY = Touchy()
'''


def test_an_answer_kind_that_fails_is_set_aside_and_named(tmp_path: Path) -> None:
    site = install_package(tmp_path, "trinity-shaky", {"trinity_shaky": KINDS, "trinity_shaky_gone": GONE},
                           {"trinity_cli.answer_kinds": {"touchy": "trinity_shaky:TOUCHY",
                                                         "gone": "trinity_shaky_gone:KIND"}})
    pool = _duo(tmp_path)
    # Detection goes on without them: the question is read as the built-in kinds read it.
    done = trinity(tmp_path, [site], "ask", "--pool", str(pool), "--mode", "agree", "-q", "What is 6 times 7?")
    assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr
    _warned(done, "gone", "touchy")
    assert "its detect raised KeyError: 'detect blew up'" in done.stderr
    # Once per process, however often detection runs (serve detects every request).
    code = "from trinity_cli.answer_kinds import detect\nfor _ in range(3): detect('Is 7 prime?')\n"
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(site)})
    assert again.returncode == 0 and again.stderr.count("set aside") == 2, again.stderr
    # A command that needs one fails in one line; the listing says why, beside the others.
    _one_line(trinity(tmp_path, [site], "ask", "--pool", str(pool), "--kind", "gone", "-q", "Q?"),
              "the answer kind 'gone' (package trinity-shaky) cannot be used", "cannot be imported",
              "ModuleNotFoundError")
    listed = trinity(tmp_path, [site], "pools")
    assert listed.returncode == 0 and "set aside" not in listed.stderr, listed.stderr
    assert "  gone  cannot be used: trinity_shaky_gone:KIND cannot be imported" in listed.stdout
    # A detect that raises is named there too, in a fresh process that has detected nothing yet.
    assert "  touchy  cannot be used: its detect raised KeyError: 'detect blew up'" in listed.stdout
    assert FIX in listed.stdout and "  numeric  " in listed.stdout


POLICIES = '''"""Policies that fail."""

from trinity_cli.policies.base import LoopPolicy


class Fragile(LoopPolicy):
    """Cannot be made."""

    name = "fragile"

    def __init__(self):
        raise ValueError("needs a config file")
'''


def test_a_policy_that_fails_is_set_aside_and_named(tmp_path: Path) -> None:
    site = install_package(tmp_path, "trinity-shaky", {"trinity_shaky": POLICIES, "trinity_shaky_gone": GONE},
                           {"trinity_cli.policies": {"fragile": "trinity_shaky:Fragile",
                                                     "gone": "trinity_shaky_gone:Policy"}})
    pool = _duo(tmp_path)
    # serve starts, and serves every policy but the one that cannot be imported.
    served = trinity(tmp_path, [site], "serve", "--pool", str(pool), "--port", "0", "--idle-exit", "1", timeout=120)
    assert served.returncode == 0, served.stderr
    assert "trinity/agree" in served.stderr and "trinity/gone" not in served.stderr
    assert "trinity/fragile" not in served.stderr
    _warned(served, "fragile", "gone")
    asked = trinity(tmp_path, [site], "ask", "--pool", str(pool), "--mode", "agree", "-q", "What is 6 times 7?")
    assert asked.returncode == 0 and asked.stdout.strip() == "42", asked.stderr
    benched = trinity(tmp_path, [site], "bench", "--pool", str(pool), "--tasks", _questions(tmp_path),
                      "--systems", "single", "--json", "-q")
    assert benched.returncode == 0, benched.stderr
    # Named, each in one line: the one that cannot be imported, the one whose policy cannot be built.
    _one_line(trinity(tmp_path, [site], "ask", "--pool", str(pool), "--mode", "gone", "-q", "Q?"),
              "the policy 'gone' (package trinity-shaky) cannot be used", "cannot be imported")
    for args in (("ask", "--pool", str(pool), "--mode", "fragile", "-q", "Q?"),
                 ("bench", "--pool", str(pool), "--tasks", _questions(tmp_path), "--systems", "fragile", "-q")):
        _one_line(trinity(tmp_path, [site], *args), "the policy 'fragile' (package trinity-shaky) cannot be used",
                  "raised ValueError: needs a config file")
    listed = trinity(tmp_path, [site], "pools")
    assert listed.returncode == 0 and "  gone  cannot be used: " in listed.stdout and "  agree  " in listed.stdout
    assert "  fragile  cannot be used: its make() raised ValueError: needs a config file" in listed.stdout
    assert "set aside" not in listed.stderr, listed.stderr
    # ask's help offers neither as a mode, and says why in one warning line each.
    helped = trinity(tmp_path, [site], "ask", "--help")
    assert helped.returncode == 0 and "agree" in helped.stdout and "fragile" not in helped.stdout, helped.stdout
    assert "gone" not in helped.stdout
    _warned(helped, "fragile", "gone")


BACKENDS = '''"""Backends that fail."""

from typing import Literal

from trinity_cli.backends.base import Backend, MemberBase


class FragileConfig(MemberBase):
    kind: Literal["fragile"]


class FragileBackend(Backend):
    config_model = FragileConfig

    def __init__(self, config):
        raise RuntimeError("no device")

    fingerprint = "fragile"

    def chat(self, messages, params):
        raise AssertionError("never made")
'''


def test_a_backend_that_fails_is_set_aside_and_named(tmp_path: Path) -> None:
    site = install_package(tmp_path, "trinity-shaky", {"trinity_shaky": BACKENDS, "trinity_shaky_gone": GONE},
                           {"trinity_cli.backends": {"fragile": "trinity_shaky:FragileBackend",
                                                     "gone": "trinity_shaky_gone:Backend"}})
    fragile = write_pool(tmp_path, {"name": "frag", "models": [{"name": "f", "kind": "fragile"}]}, "frag.yaml")
    gone = write_pool(tmp_path, {"name": "gone", "models": [{"name": "g", "kind": "gone"}]}, "gone.yaml")
    # A pool of other kinds never imports them.
    asked = trinity(tmp_path, [site], "ask", "--pool", str(_duo(tmp_path)), "--mode", "agree", "-q", "6 * 7?")
    assert asked.returncode == 0 and asked.stdout.strip() == "42" and "set aside" not in asked.stderr, asked.stderr
    for args in (("pools", "--check", str(gone)), ("ask", "--pool", str(gone), "-q", "Q?")):
        _one_line(trinity(tmp_path, [site], *args), f"{gone}: model 'g': the model kind 'gone' (package trinity-shaky)",
                  "cannot be imported")
    for args in (("pools", "--check", str(fragile)), ("ask", "--pool", str(fragile), "--mode", "agree", "-q", "Q?")):
        _one_line(trinity(tmp_path, [site], *args), "the model kind 'fragile' (package trinity-shaky) cannot be used",
                  "making member 'f''s backend raised RuntimeError: no device")
    listed = trinity(tmp_path, [site], "pools")
    assert listed.returncode == 0 and "  gone  cannot be used: " in listed.stdout and "  scripted  " in listed.stdout


FAMILIES = '''"""Task families that fail."""

from trinity_cli.tasks.items import TaskFamily


def load():
    raise OSError("data file gone")


FRAGILE = TaskFamily("fragile", "A family whose data is gone", answer_kind="numeric", loader=load)
'''


def test_a_task_family_that_fails_is_set_aside_and_named(tmp_path: Path) -> None:
    site = install_package(tmp_path, "trinity-shaky", {"trinity_shaky": FAMILIES, "trinity_shaky_gone": GONE},
                           {"trinity_cli.tasks": {"fragile": "trinity_shaky:FRAGILE",
                                                  "gone": "trinity_shaky_gone:FAMILY"}})
    pool = _duo(tmp_path)
    benched = trinity(tmp_path, [site], "bench", "--pool", str(pool), "--tasks", _questions(tmp_path),
                      "--systems", "single", "--json", "-q")
    assert benched.returncode == 0 and "set aside" not in benched.stderr, benched.stderr
    _one_line(trinity(tmp_path, [site], "bench", "--pool", str(pool), "--tasks", "gone:test", "-q"),
              "the task 'gone' (package trinity-shaky) cannot be used", "cannot be imported")
    _one_line(trinity(tmp_path, [site], "bench", "--pool", str(pool), "--tasks", "fragile:test", "-q"),
              "the task 'fragile' (package trinity-shaky) cannot be used", "its loader raised OSError: data file gone")
    listed = trinity(tmp_path, [site], "pools")
    assert listed.returncode == 0 and "  gone  cannot be used: " in listed.stdout and "  gsm8k  " in listed.stdout


# --------------------------------------------------------------------------- the registry itself


class _Thing:
    pass


def _registry() -> Registry[_Thing]:
    found: Registry[_Thing] = Registry("trinity_cli.tests_only", "thing",
                                       check=lambda x: isinstance(x, _Thing), expected="a _Thing")
    found.register("own", _Thing())
    found.register("broken", "tests.no_such_module:THING")
    return found


def test_a_registry_sets_aside_what_fails_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    registry = _registry()
    with caplog.at_level(logging.WARNING, logger="trinity_cli.registry"):
        assert list(registry.usable()) == ["own"] and list(registry.usable()) == ["own"]
    assert len(caplog.records) == 1 and "the thing 'broken' (package trinity-cli) set aside" in caplog.text
    with pytest.raises(ConfigError) as info:
        registry.get("broken")
    assert "cannot be imported" in info.value.message and "reinstall" in (info.value.hint or "")
    assert "broken" in registry and registry.why("broken")  # still a name: a command naming it is told why
    with pytest.raises(ConfigError, match="did you mean 'own'"):
        registry.get("ow")


def test_a_built_in_s_own_failure_is_not_hidden() -> None:
    """Only installed entries are guarded: a built-in's exception is trinity's bug and surfaces."""
    registry = _registry()
    with pytest.raises(KeyError):
        with registry.guard("own", "its build"):
            raise KeyError("bug")
    with pytest.raises(KeyError):
        registry.tolerate("own", "its detect", KeyError("bug"))
    with pytest.raises(TrinityError, match="what to fix"):  # a user error passes unchanged
        with registry.guard("own", "its build"):
            raise TrinityError("what to fix")
    assert registry.why("own") is None and isinstance(registry.get("own"), _Thing)


_EXTRA = _Thing()  # what the fake entry point below names


def test_a_registry_lists_its_entry_points_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing entry points reads every installed distribution (docs/kind_detection.md: most of
    detection's cost), so a registry lists its group once per process; `refresh()` lists again,
    and a name registered in code after the listing still wins over an entry point."""
    from importlib.metadata import EntryPoint

    import trinity_cli.registry as registry_module

    calls: list[str] = []

    def counted(*, group: str) -> list[EntryPoint]:
        calls.append(group)
        return [EntryPoint("extra", f"{__name__}:_EXTRA", group)]

    monkeypatch.setattr(registry_module, "entry_points", counted)
    registry = _registry()
    registry.register("broken", _Thing())  # nothing to set aside: the test is about listing
    assert list(registry.usable()) == ["own", "broken", "extra"]
    assert list(registry.usable()) == ["own", "broken", "extra"] and "extra" in registry
    assert registry.usable()["extra"] is _EXTRA and registry.installed() == {"extra": f"{__name__}:_EXTRA"}
    assert calls == ["trinity_cli.tests_only"]  # listed once, however often asked
    shadow = _Thing()
    registry.register("extra", shadow)  # registered in code after the listing: the built-in wins
    assert registry.get("extra") is shadow and registry.installed() == {} and len(calls) == 1
    registry.refresh()
    registry.usable()
    assert calls == ["trinity_cli.tests_only"] * 2


# --------------------------------------------------------------------------- edges beside them


def test_an_unreadable_pool_file_is_listed_as_such(tmp_path: Path, trinity_home: Path, monkeypatch, capsys) -> None:
    pools = trinity_home / "pools"
    pools.mkdir(parents=True)
    (pools / "broken.yaml").write_text("name: [broken\n")
    (pools / "mine.yaml").write_text("name: mine\nmodels:\n  - {name: echo, kind: scripted}\n")
    code, out, err = run_main(["pools"], monkeypatch, capsys)
    assert code == 0, err
    assert f"broken  {pools / 'broken.yaml'}\n  unreadable: not valid YAML at line 2" in out
    assert "mine" in out and "echo (scripted, reason, conductor)" in out and "local" in out


def test_a_misspelled_pool_field_gets_the_close_names() -> None:
    from trinity_cli.pool_config import parse_pool

    for text, said in (
        ("name: x\nmax_residnt: 2\nmodels:\n  - {name: a, kind: scripted}\n",
         "x.yaml: unknown field 'max_residnt' (did you mean 'max_resident'?)"),
        ("name: x\nmodels:\n  - {name: a, kind: scripted, defualt: hi}\n",
         "x.yaml: model 'a': unknown field 'defualt' (did you mean 'default'?)"),
        ("name: x\nmodels:\n  - {name: a, kind: gguf, weights: {pth: a.gguf}}\n",
         "x.yaml: model 'a': unknown field 'weights.pth' (did you mean 'path'?)"),
        ("name: x\nmodels:\n  - {name: a, kind: scripted, zzzz: 1}\n", "x.yaml: model 'a': unknown field 'zzzz'"),
    ):
        with pytest.raises(ConfigError) as info:
            parse_pool(text, "x.yaml")
        assert info.value.message == said


def test_a_split_that_selects_nothing_says_what_each_split_holds(tmp_path: Path) -> None:
    from trinity_cli.tasks.mix import sample_items
    from trinity_cli.tasks.registry import split_of, split_position

    ids = [i for i in (f"q{n}" for n in range(50)) if split_of(split_position("file", i)) == "train"][:2]
    path = tmp_path / "two.jsonl"
    path.write_text("".join(json.dumps({"prompt": "q", "answer": 1, "scorer": "numeric", "id": i}) + "\n"
                            for i in ids))
    with pytest.raises(ConfigError) as info:
        sample_items(f"file:{path}:test", seed=0)
    assert info.value.message == (f"mix entry file:{path}:test selects no items: "
                                  "its 2 items are split train 2, val 0, test 0")
    assert f"file:{path}:all" in (info.value.hint or "")
    assert len(sample_items(f"file:{path}:all", seed=0)) == 2


def test_a_scorer_no_kind_has_is_refused_with_the_close_names(tmp_path: Path) -> None:
    from trinity_cli.answer_kinds import check_scoring
    from trinity_cli.tasks.userfile import load_jsonl

    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"prompt": "q", "answer": 1, "scorer": "numerical", "id": "q1"}) + "\n")
    items = load_jsonl(path)  # the form is the file's to check; which kinds exist, the run's
    with pytest.raises(ConfigError) as info:
        check_scoring(items)
    assert info.value.message.startswith(f"task file:{path}, item 'q1': unknown scorer 'numerical'")
    assert "did you mean 'numeric'?" in (info.value.hint or "")
