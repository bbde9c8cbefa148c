"""A TRINITY_HOME with one run of each kind the viewer draws, made by the real commands on a
scripted pool (no model): a bench (8 items; single, agree, random, vote, oracle), an evolve run
(two generations, hash backbone), an ask run, a second bench whose member m1 answers otherwise,
a damaged run, and a second evolve run with another seed and step size. Member m2's reply holds
HTML that would run if a page parsed it, and a secret that must never reach a page."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from typer.testing import CliRunner

SECRET = "sk-viewer-test-0123456789"
SECRET_ENV = "VIEWER_TEST_API_KEY"
# What a page must show as text, and never run.
HOSTILE = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">'
# bench items: the file's whole test split (8 of 40, two of them even), because which few of
# them a draw takes depends on the task's name, and a file: task's name holds its (temporary) path
ITEMS = 8
SYSTEMS = ["single:m0", "single:m1", "single:m2", "agree", "random", "vote", "best-per-task", "oracle"]


def _pool(path: Path, m1_answer: str) -> Path:
    def member(name: str, reply: str) -> dict:
        return {"name": name, "kind": "scripted", "rules": [{"match": ".", "reply": reply}], "default": reply}

    data = {"name": "scripted", "models": [
        member("m0", "12 times 7 is 84.\nAnswer: 84"),
        member("m1", f"I think so.\nAnswer: {m1_answer}"),
        member("m2", f"{HOSTILE} my key is {SECRET}\nAnswer: 84"),
    ]}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _tasks(path: Path) -> Path:
    """40 items: even ones ask 12*7 (84), odd ones 17*5 (85)."""
    lines = []
    for i in range(40):
        a, b = (12, 7) if i % 2 == 0 else (17, 5)
        lines.append(json.dumps({"id": f"q{i}", "prompt": f"Q{i}: what is {a}*{b}?", "answer": a * b,
                                 "scorer": "numeric"}))
    path.write_text("\n".join(lines) + "\n")
    return path


def run(home: Path, *args: str) -> str:
    """`trinity ARGS` in this process with TRINITY_HOME=home (and the secret in the
    environment); its stdout. Fails loudly if the command does."""
    from trinity_cli import cli

    env = {"TRINITY_HOME": str(home), SECRET_ENV: SECRET, "TRINITY_PROGRESS_EVERY": "0"}
    result = CliRunner().invoke(cli.app, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def build(home: Path, work: Path) -> dict[str, str]:
    """Make the runs (module docstring) under `home`; run ids by what they are."""
    work.mkdir(parents=True, exist_ok=True)
    tasks = _tasks(work / "tasks.jsonl")
    pool = _pool(work / "pool.yaml", "85")
    bench = ["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test:{ITEMS}", "--systems",
             "single,agree,random,vote,best-per-task,oracle", "--random-seeds", "1", "--max-turns", "2", "-q"]
    run(home, *bench)  # run-1
    evolve = ["evolve", "--search-only", "--pool", str(pool), "--tasks", f"file:{tasks}:train", "--val-tasks",
              f"file:{tasks}:val:2", "--budget", "8", "--minibatch", "2", "--popsize", "2", "--max-turns", "2",
              "--backbone", "hash:16", "-q"]
    run(home, *evolve)  # run-2
    run(home, "ask", "What is 12*7?", "--pool", str(pool), "--mode", "agree", "-q", "--no-warm")  # run-3
    other = _pool(work / "pool-other.yaml", "84")
    run(home, *[str(other) if a == str(pool) else a for a in bench])  # run-4: m1 answers 84 everywhere
    damaged = home / "runs" / "run-5"
    damaged.mkdir(parents=True)
    (damaged / "run.json").write_text("{ not json")
    run(home, *evolve, "--seed", "1", "--sigma0", "0.3")  # run-6: the same search, another seed and step
    return {"bench": "run-1", "evolve": "run-2", "ask": "run-3", "bench_other": "run-4", "damaged": "run-5",
            "evolve_other": "run-6"}


def environ_with_secret() -> dict[str, str]:
    return {**os.environ, SECRET_ENV: SECRET}
