"""What a user adds, as docs/extending.md tells a newcomer to write it: each of the guide's
packages (its code and its pyproject.toml, read from the guide) is installed by pip as `pip
install .` installs it, into a folder of its own put on the path, and used from the command
line with no edit to trinity: a backend in a pool file, a policy with `--mode` and `--systems`,
a task family with `--tasks`, an answer kind detected, and scoring task files and families (the
answer kinds are the scorers). What happens when such a package fails: test_plugin_failures.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trinity_cli.errors import ConfigError
from trinity_cli.pool_config import load_pool, parse_pool

from .conftest import write_pool
from .packages import install_package, pip_install, trinity

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
BACKEND, POLICY, FAMILY, KIND = 0, 1, 2, 3  # the guide's packages, in its order


def _block(language: str, n: int = 0) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), re.S)
    return blocks[n]


def install_example(tmp_path: Path, n: int) -> Path:
    """The guide's package `n` (its python block, as the module its docstring names, and its
    pyproject.toml) installed by pip into a folder of its own; returns that folder."""
    code = _block("python", n)
    module = re.match(r'"""(\w+):', code).group(1)  # type: ignore[union-attr]
    source = tmp_path / f"src-{module}"
    source.mkdir()
    (source / f"{module}.py").write_text(code)
    (source / "pyproject.toml").write_text(_block("toml", n))
    return pip_install(source, tmp_path / f"site-{module}")


def test_an_installed_backend_plugin_answers_through_trinity_ask(tmp_path: Path) -> None:
    site = install_example(tmp_path, BACKEND)
    pool = tmp_path / "calc.yaml"
    pool.write_text(_block("yaml"))
    done = trinity(tmp_path, [site], "ask", "--pool", str(pool), "--head", "untrained", "-q", "What is 12*7?")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].endswith("84")
    # Not a sum: trinity's own instructions (their "Answer: 42") are not taken for one.
    other = trinity(tmp_path, [site], "ask", "--pool", str(pool), "--head", "untrained", "-q",
                    "What is the capital of France?")
    assert other.returncode == 0, other.stderr
    assert "42" not in other.stdout and "arithmetic" in other.stdout
    # The pool file checks, and the kind is listed as the package's.
    checked = trinity(tmp_path, [site], "pools", "--check", str(pool))
    assert checked.returncode == 0 and "calculator (calculator, direct, conductor)" in checked.stdout, checked.stderr
    listed = trinity(tmp_path, [site], "pools")
    assert re.search(r"calculator .*trinity_calculator:CalculatorBackend", listed.stdout), listed.stdout
    # The member's own field is checked by the plugin's config model: file, member, field, plain words.
    pool.write_text(_block("yaml").replace("digits: 3", "digits: many"))
    for args in (("ask", "--pool", str(pool), "--head", "untrained", "-q", "What is 12*7?"),
                 ("pools", "--check", str(pool))):
        bad = trinity(tmp_path, [site], *args)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
        assert f"{pool}: model 'calculator': field 'digits' must be a whole number (got 'many')" in bad.stderr
        assert "Input should" not in bad.stderr and bad.stderr.strip().count("\n") == 0


def test_a_kind_no_package_registers_is_refused_with_the_kinds_that_exist() -> None:
    with pytest.raises(ConfigError) as info:
        parse_pool(_block("yaml"), "calc.yaml")
    message = info.value.message
    assert "calc.yaml: model 'calculator': unknown model kind 'calculator'" in message
    assert "gguf, openai, scripted" in message


def test_the_example_ollama_pool_is_an_openai_compatible_pool() -> None:
    config = load_pool("example-ollama")
    assert {m.kind for m in config.models} == {"openai"} and config.router == "agree"
    assert all(m.base_url.startswith("http://127.0.0.1:") for m in config.models)  # type: ignore[attr-defined]


def _duo(tmp_path: Path) -> Path:
    return write_pool(tmp_path, {"name": "duo", "models": [
        {"name": "words", "kind": "scripted", "default": "I would rather not say."},
        {"name": "numbers", "kind": "scripted", "default": "Six times seven.\nAnswer: 42"}]})


def test_a_policy_from_the_guide_is_asked_and_benched_by_name(tmp_path: Path) -> None:
    """`--mode until-number` and `--systems until-number` find the installed policy; its
    transcript holds every call it made, and it keeps to the turn budget and the exclusions."""
    site = install_example(tmp_path, POLICY)
    pool = _duo(tmp_path)
    done = trinity(tmp_path, [site], "ask", "--pool", str(pool), "--mode", "until-number", "--json", "-q",
                   "What is 6 times 7?")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["answer"] == "42" and record["mode"] == "until-number" and record["max_turns"] == 3
    turns = record["transcript"]["turns"]
    assert [t["model"] for t in turns] == ["words", "numbers"] and record["pool_calls"] == 2
    assert record["transcript"]["stop_reason"] == "number"
    assert record["transcript"]["completion_tokens"] == sum(t["completion_tokens"] for t in turns) > 0
    one = json.loads(trinity(tmp_path, [site], "ask", "--pool", str(pool), "--mode", "until-number", "--json",
                             "-q", "--max-turns", "1", "What is 6 times 7?").stdout)
    assert [t["model"] for t in one["transcript"]["turns"]] == ["words"]
    left = json.loads(trinity(tmp_path, [site], "ask", "--pool", str(pool), "--mode", "until-number", "--json",
                              "-q", "--exclude", "words", "What is 6 times 7?").stdout)
    assert [t["model"] for t in left["transcript"]["turns"]] == ["numbers"]

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"prompt": f"What is 6 times 7? ({i})", "answer": 42,
                                         "scorer": "numeric", "id": f"q{i}"}) + "\n" for i in range(4)))
    bench = trinity(tmp_path, [site], "bench", "--pool", str(pool), "--tasks", f"file:{tasks}:all", "--systems",
                    "until-number,single", "--json", "-q")
    assert bench.returncode == 0, bench.stderr
    data = json.loads(bench.stdout)
    assert data["results"]["until-number"]["overall"]["accuracy"] == 1.0
    mine = [e for e in data["episodes"] if e["system"] == "until-number"]
    assert mine and all(len(e["turns"]) == 2 for e in mine)  # both calls counted, not only the last
    helped = trinity(tmp_path, [site], "ask", "--help")
    assert "until-number" in helped.stdout and "agree" in helped.stdout
    listed = trinity(tmp_path, [site], "pools")
    assert re.search(r"until-number .*trinity_numeric:UntilNumber", listed.stdout), listed.stdout


def test_an_unknown_mode_answers_with_the_close_names(tmp_path: Path, monkeypatch, capsys) -> None:
    from .conftest import run_main

    pool = _duo(tmp_path)
    code, _, err = run_main(["ask", "--pool", str(pool), "--mode", "agre", "Q"], monkeypatch, capsys)
    assert code == 2 and "unknown policy 'agre'" in err and "did you mean 'agree'" in err
    code, _, err = run_main(["ask", "--pool", str(pool), "--mode", "single", "Q"], monkeypatch, capsys)
    assert code == 2 and "a row of bench's report" in err and "agree" in err


def test_a_task_family_from_the_guide_is_benched_with_its_own_scorer(tmp_path: Path) -> None:
    site = install_example(tmp_path, FAMILY)
    namespace: dict = {}
    exec(compile(_block("python", FAMILY), "trinity_capitals.py", "exec"), namespace)  # noqa: S102 - the guide's code
    rules = [{"match": country, "reply": f"The capital is {city}, of course."}
             for country, city in namespace["CAPITALS"].items()]
    pool = write_pool(tmp_path, {"name": "geo", "models": [
        {"name": "knows", "kind": "scripted", "rules": rules},
        {"name": "bluffs", "kind": "scripted", "default": "Answer: London"}]})
    bench = trinity(tmp_path, [site], "bench", "--pool", str(pool), "--tasks", "capitals:test", "--systems",
                    "single", "--json", "-q")
    assert bench.returncode == 0, bench.stderr
    results = json.loads(bench.stdout)["results"]
    # "The capital is Paris, of course." is no exact answer, yet names the city: the family's scorer decides.
    assert results["single:knows"]["overall"]["accuracy"] == 1.0
    assert results["single:bluffs"]["overall"]["accuracy"] == 0.0
    listed = trinity(tmp_path, [site], "pools")
    assert re.search(r"capitals .*trinity_capitals:FAMILY", listed.stdout), listed.stdout


QUESTIONS = '''"""trinity_questions: yes-or-no questions, read and scored by an installed kind."""

from trinity_cli.tasks.items import TaskFamily, TaskItem

PRIMES = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29}


def load(name="questions", kind="yesno"):
    return [TaskItem(task=name, id=str(n), prompt=f"Is {n} prime?", reference="yes" if n in PRIMES else "no",
                     scorer=kind) for n in range(2, 30)]


QUESTIONS = TaskFamily("questions", "Prime or not", answer_kind="yesno", loader=load)
VAGUE = TaskFamily("vague", "Read kind-free", answer_kind="short", loader=lambda: load("vague", "short"))
'''


def test_an_installed_answer_kind_scores_task_files_and_families(tmp_path: Path) -> None:
    """The answer kinds are the scorers: a package's kind scores a `file:` task naming it and a
    family of its kind with no scorer of its own; a name no kind has, or a kind that cannot
    score, is refused before a run starts, with the close names."""
    sites = [install_example(tmp_path, KIND),
             install_package(tmp_path, "trinity-questions", {"trinity_questions": QUESTIONS},
                             {"trinity_cli.tasks": {"questions": "trinity_questions:QUESTIONS",
                                                    "vague": "trinity_questions:VAGUE"}})]
    pool = write_pool(tmp_path, {"name": "naysayer", "models": [
        {"name": "nay", "kind": "scripted", "default": "It is not.\nAnswer: No"}]})
    own = tmp_path / "own.jsonl"
    own.write_text("".join(json.dumps({"prompt": f"Is {n} prime?", "answer": "yes" if n in (7, 13) else "no",
                                       "scorer": "yesno", "id": str(n)}) + "\n" for n in (7, 9, 13, 15)))
    for tasks in (f"file:{own}:all", "questions:test"):
        bench = trinity(tmp_path, sites, "bench", "--pool", str(pool), "--tasks", tasks, "--systems", "single",
                        "--json", "-q")
        assert bench.returncode == 0, bench.stderr
        episodes = json.loads(bench.stdout)["episodes"]
        # "Answer: No" is right exactly where the number is not prime: the kind read and scored it.
        assert episodes and {e["reward"] for e in episodes} == {0.0, 1.0}
        assert all(e["reward"] == (0.0 if int(e["item"]) in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29) else 1.0)
                   for e in episodes)

    runs = sorted((tmp_path / "home" / "runs").iterdir())
    own.write_text(json.dumps({"prompt": "Name a capital.", "answer": "Paris", "scorer": "contains"}) + "\n")
    mistyped = tmp_path / "mistyped.jsonl"
    mistyped.write_text(json.dumps({"prompt": "Is 7 prime?", "answer": "yes", "scorer": "yesnoo"}) + "\n")
    for tasks, said in ((f"file:{own}:all", "unknown scorer 'contains': a scorer is an answer kind"),
                        (f"file:{mistyped}:all", "did you mean 'yesno'?"),
                        ("vague:test", "the answer kind 'short' cannot score")):
        refused = trinity(tmp_path, sites, "bench", "--pool", str(pool), "--tasks", tasks, "--systems", "single", "-q")
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
        assert refused.stderr.strip().count("\n") == 0 and "Traceback" not in refused.stderr
    assert sorted((tmp_path / "home" / "runs").iterdir()) == runs  # refused before a run directory was made


def test_task_file_answers_keep_their_form() -> None:
    from trinity_cli.tasks.userfile import _reference

    # A scorer with no reference check of its own takes the answer as written, never as code tests.
    assert _reference(["no commas"], "freeform", "x:1") == ["no commas"]
    assert _reference("assert f() == 1", "code", "x:1")["tests"] == "assert f() == 1"
    assert _reference("Yes", "yesno", "x:1") == "Yes"


def test_an_answer_kind_from_the_guide_is_detected_read_and_agreed_on(tmp_path: Path) -> None:
    site = install_example(tmp_path, KIND)
    pool = write_pool(tmp_path, {"name": "sure", "router": "agree", "models": [
        {"name": "first", "kind": "scripted", "default": "221 = 13 x 17, so it is not prime.\nAnswer: No"},
        {"name": "second", "kind": "scripted", "default": "no, 13 divides it"}]})
    done = trinity(tmp_path, [site], "ask", "--pool", str(pool), "--json", "-q", "Is 221 prime?")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    # detected from the wording, read as a word by both members, agreed on at the second answer
    assert record["answer_kind"] == "yesno" and record["answer"] == "No"
    assert len(record["transcript"]["turns"]) == 2 and record["transcript"]["stop_reason"] == "agreed"
    named = trinity(tmp_path, [site], "ask", "--pool", str(pool), "-q", "--kind", "yesno", "221 = 13 x 17. Prime?")
    assert named.returncode == 0 and named.stdout.strip() == "No", named.stderr
    listed = trinity(tmp_path, [site], "pools")
    assert re.search(r"yesno .*trinity_yesno:YESNO", listed.stdout), listed.stdout
