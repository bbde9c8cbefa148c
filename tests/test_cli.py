from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from trinity_cli import cli, entry
from trinity_cli.runs.store import RunStore

from .conftest import run_main, scripted_pool, write_pool

runner = CliRunner()


def invoke(*args: str, input: str | None = None):
    """Run the real entry point (error handling included) and capture exit code and output."""
    return runner.invoke(cli.app, list(args), input=input, standalone_mode=False, catch_exceptions=True)


def test_ask_prints_answer_alone_and_saves_run(tmp_path, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    code, out, err = run_main(["ask", "What is 12*7?", "--pool", str(pool), "--seed", "3"], monkeypatch, capsys)
    assert code == 0, err
    assert out == "84\n"
    assert "run-1" in err and "untrained head" in err
    record = RunStore().load("run-1")
    assert record["kind"] == "ask" and record["answer"] == "84"
    assert record["transcript"]["answer"] == "12 times 7 is 84.\nAnswer: 84"


def test_ask_mode_agree_asks_members_in_order_until_two_agree(tmp_path, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    code, out, err = run_main(["ask", "What is 12*7?", "--pool", str(pool), "--mode", "agree"], monkeypatch, capsys)
    assert code == 0, err
    assert out == "84\n"
    kind, first = err.strip().splitlines()[0].split(" · ", 1)  # the kind read, then who answers
    assert kind.startswith("answer kind: short, read from the question (--kind freeform")
    assert "agree" in first and "default" not in first
    record = RunStore().load("run-1")
    assert record["mode"] == "agree" and record["head"] is None and record["max_turns"] == 4
    assert [t["model"] for t in record["transcript"]["turns"]] == ["m0", "m1"]
    assert all(t["alone"] for t in record["transcript"]["turns"])
    assert record["transcript"]["stop_reason"] == "agreed"
    code, out, err = run_main(["inspect", "run-1"], monkeypatch, capsys)
    assert code == 0 and "agree procedure" in out
    code, out, err = run_main(["ask", "Q", "--pool", str(pool), "--mode", "agree", "--head", "untrained"],
                              monkeypatch, capsys)
    assert code == 2 and "--head" in err and len(err.strip().splitlines()) <= 2


def test_a_pool_whose_router_is_agree_answers_with_it_and_says_why_first(tmp_path, monkeypatch, capsys) -> None:
    """`router: agree` in the pool file: ask's default is the agree procedure and its first
    line says that it is the pool's default; naming a head still asks the head."""
    pool = scripted_pool(tmp_path, router="agree")
    code, out, err = run_main(["ask", "What is 12*7?", "--pool", str(pool)], monkeypatch, capsys)
    assert code == 0 and out == "84\n", err
    first = err.strip().splitlines()[0].split(" · ", 1)[1]  # after the kind read (test_ask_says_first...)
    assert "agree" in first and "default" in first and "no trained head" in first
    assert RunStore().load("run-1")["mode"] == "agree"
    code, out, err = run_main(["ask", "What is 12*7?", "--pool", str(pool), "--head", "untrained"], monkeypatch, capsys)
    assert code == 0 and "untrained head" in err
    assert RunStore().load("run-2")["mode"] == "coordinator"


def test_ask_says_first_which_kind_it_read_and_prints_yes_or_no(tmp_path, monkeypatch, capsys) -> None:
    """The first stderr line names the answer kind and how to override it; a request no rule
    reads as a short question is free-form; a program's False to a yes-or-no question prints `no`."""
    rules = [{"match": "221", "reply": "```python\nprint(all(221 % d for d in range(2, 15)))\n```"}]
    pool = write_pool(tmp_path, {"name": "solo", "router": "agree", "models": [
        {"name": "p", "kind": "scripted", "style": "program", "rules": rules, "default": "A plan in nine steps."}]})
    code, out, err = run_main(["ask", "Is 221 prime? Answer yes or no.", "--pool", str(pool)], monkeypatch, capsys)
    assert code == 0 and out == "no\n", err
    assert err.strip().splitlines()[0].startswith("answer kind: short, read from the question (--kind freeform")
    code, out, err = run_main(["ask", "Give me a step-by-step plan to learn basic Spanish in one month.", "--pool",
                               str(pool)], monkeypatch, capsys)
    assert code == 0 and out == "A plan in nine steps.\n", err
    assert err.strip().splitlines()[0].startswith("answer kind: freeform, read from the question (--kind short")
    code, out, err = run_main(["ask", "Give me a plan.", "--pool", str(pool), "--kind", "short"], monkeypatch, capsys)
    assert err.strip().splitlines()[0].startswith("answer kind: short (as --kind says) · pool ")


def test_ask_show_work_prints_the_whole_reply(tmp_path, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    code, out, err = run_main(["ask", "What is 12*7?", "--pool", str(pool), "--show-work", "-q"], monkeypatch, capsys)
    assert code == 0, err
    assert out == "12 times 7 is 84.\nAnswer: 84\n" and err == ""


def test_ask_draws_decisions_per_question(tmp_path, monkeypatch, capsys) -> None:
    """The same --seed gives each question its own draws (recorded), and replays a question."""
    pool = scripted_pool(tmp_path)

    def route(question: str) -> tuple[list, int]:
        code, out, err = run_main(["ask", question, "--pool", str(pool), "--seed", "0", "--max-turns", "4", "--json",
                                  "-q"], monkeypatch, capsys)
        assert code == 0, err
        record = json.loads(out)
        return [(t["model"], t["role"]) for t in record["transcript"]["turns"]], record["episode_seed"]

    runs = [route(f"What is 12*7? (version {i})") for i in range(6)]
    assert len({seed for _, seed in runs}) == 6
    assert len({tuple(r) for r, _ in runs}) > 1, runs
    assert route("What is 12*7? (version 0)") == runs[0]
    # The seed is a function of --seed and the question alone.
    from trinity_cli.ask import question_seed

    assert runs[0][1] == question_seed(0, "What is 12*7? (version 0)") != question_seed(1, "What is 12*7? (version 0)")


def test_ask_reads_stdin_and_json(tmp_path, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    code, out, err = run_main(["ask", "--pool", str(pool), "--json", "-q"], monkeypatch, capsys,
                              stdin="What is 12*7?\n")
    assert code == 0, err
    data = json.loads(out)
    assert data["question"] == "What is 12*7?" and data["transcript"]["turns"]


def test_inspect_lists_and_replays(tmp_path, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    run_main(["ask", "What is 12*7?", "--pool", str(pool)], monkeypatch, capsys)
    code, out, _ = run_main(["inspect"], monkeypatch, capsys)
    assert code == 0 and "run-1" in out and "ask" in out
    code, out, _ = run_main(["inspect", "run-1"], monkeypatch, capsys)
    assert code == 0
    assert "turn 1" in out and "prompt sent" in out and "models" in out and "Answer" in out
    code, out, _ = run_main(["inspect", "1", "--json"], monkeypatch, capsys)
    assert json.loads(out)["id"] == "run-1"


@pytest.mark.parametrize(
    "args,needle",
    [
        (["ask", "Q", "--exclude", "m9"], "--exclude: the pool"),
        (["ask", "Q", "--mode", "chorus"], "--mode: unknown policy 'chorus'"),
        (["ask", "Q", "--exclude", "m0", "--exclude", "m1", "--exclude", "m2"], "every model"),
        (["inspect", "run-99"], "no run 'run-99'"),
        (["ask", "Q", "--head", "nosuchhead"], "unknown head"),
        (["ask", "   "], "question is empty"),
    ],
)
def test_bad_input_is_one_line_no_traceback(tmp_path, monkeypatch, capsys, args, needle) -> None:
    pool = scripted_pool(tmp_path)
    if args[0] == "ask":
        args = [*args, "--pool", str(pool)]
    code, out, err = run_main(args, monkeypatch, capsys)
    assert code == 2
    assert needle in err and "Traceback" not in err
    assert err.strip().count("\n") == 0 or len(err.strip().splitlines()) <= 2
    assert not list(RunStore().root.glob("run-*"))  # nothing half-written


def test_bad_pool_file(tmp_path, monkeypatch, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodels:\n  - {name: a, kind: gguf, weights: {path: /nope/model.gguf}}\n")
    code, _, err = run_main(["ask", "Q", "--pool", str(bad)], monkeypatch, capsys)
    assert code == 2 and "does not exist" in err and "Traceback" not in err
    code, _, err = run_main(["ask", "Q", "--pool", str(tmp_path / "missing.yaml")], monkeypatch, capsys)
    assert code == 2 and "does not exist" in err




def test_debug_env_shows_traceback(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TRINITY_DEBUG", "1")
    monkeypatch.setattr(sys, "argv", ["trinity", "inspect", "run-5"])
    from trinity_cli.errors import NotFound

    with pytest.raises(NotFound):
        entry.main()


def test_help_is_fast_and_imports_nothing_heavy() -> None:
    code = ("import sys, trinity_cli.entry as c; "
            "sys.argv=['trinity','--help']\n"
            "try:\n    c.main()\nexcept SystemExit:\n    pass\n"
            "heavy=[m for m in ('torch','transformers','llama_cpp','cma','numpy','diskcache') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
    assert "ask" in out.stdout and "inspect" in out.stdout


def test_sigterm_mid_answer_exits_cleanly_and_keeps_no_run(tmp_path, trinity_home) -> None:
    import os
    import signal
    import socket
    import time

    from .conftest import write_pool

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)  # accepts the connection, never answers: the ask hangs mid-call
    port = server.getsockname()[1]
    pool = write_pool(tmp_path, {"name": "hang", "models": [
        {"name": "slow", "kind": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "model": "m",
         "timeout_s": 60, "max_retries": 0}]})
    env = {**os.environ, "TRINITY_HOME": str(trinity_home)}
    proc = subprocess.Popen([sys.executable, "-m", "trinity_cli", "ask", "Q?", "--pool", str(pool)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        conn, _ = server.accept()  # the call is in flight
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        server.close()
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    assert out == ""
    assert not list((trinity_home / "runs").glob("run-*"))


MARKUP = "Use [bold]x[/bold], [/] and [red]y[/red]: \\[z] [link=http://e.x]e[/link]\nAnswer: 84"


def test_model_text_prints_literally(tmp_path, monkeypatch, capsys) -> None:
    rules = [{"match": ".", "reply": MARKUP}]
    pool = scripted_pool(tmp_path, rules=rules)
    question = "What is [italic]12*7[/italic]? [/]"
    code, out, err = run_main(["ask", question, "--pool", str(pool), "--max-turns", "2", "--show-work"],
                              monkeypatch, capsys)
    assert code == 0, err
    assert out.strip() == MARKUP  # the answering reply, on stdout
    assert "[bold]x[/bold], [/] and [red]y[/red]" in err  # the live view of the reply
    code, out, err = run_main(["inspect", "run-1"], monkeypatch, capsys)
    assert code == 0, err
    assert out.count("[bold]x[/bold], [/] and [red]y[/red]: \\[z] [link=http://e.x]e[/link]") >= 2  # each reply
    assert question in out  # the task, in the header and in the prompt sent
    code, out, err = run_main(["inspect"], monkeypatch, capsys)
    assert code == 0 and question in out
    code, out, _ = run_main(["inspect", "run-1", "--json"], monkeypatch, capsys)
    assert json.loads(out)["transcript"]["answer"] == MARKUP


def test_model_text_prints_literally_in_bench_and_evolve(tmp_path, monkeypatch, capsys) -> None:
    rules = [{"match": ".", "reply": MARKUP}]
    pool = scripted_pool(tmp_path, rules=rules)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"[bold]Q{i}[/]: 12*7?", "answer": 84,
                                         "scorer": "numeric"}) + "\n" for i in range(20)))
    code, out, err = run_main(["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test", "--max-turns", "2",
                               "--random-seeds", "1", "--json"], monkeypatch, capsys)
    assert code == 0, err
    assert {e["answer"] for e in json.loads(out)["episodes"]} == {MARKUP}
    code, out, err = run_main(["evolve", "--search-only", "--pool", str(pool), "--tasks", f"file:{tasks}:train",
                               "--val-tasks", f"file:{tasks}:val:2", "--budget", "4", "--minibatch", "2",
                               "--popsize", "2", "--max-turns", "2", "--backbone", "hash:16"], monkeypatch, capsys)
    assert code == 0, err
    code, out, err = run_main(["inspect", "run-2", "--episode", "0/0"], monkeypatch, capsys)
    assert code == 0, err
    assert "[bold]x[/bold], [/] and [red]y[/red]" in out and "[bold]Q" in out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["ask", "Q", "--max-turns", "0"], "'--max-turns'"),
        (["evolve", "--budget", "-5"], "'--budget'"),
        (["bench", "--max-turns", "x"], "'--max-turns'"),
        (["bench", "--bogus"], "--bogus"),
        (["evolve", "-x"], "-x"),
        (["ask", "Q", "--seed"], "'--seed'"),
        (["nosuch"], "'nosuch'"),
    ],
)
def test_usage_errors_are_one_line_naming_the_option(monkeypatch, capsys, args, needle) -> None:
    code, out, err = run_main(args, monkeypatch, capsys)
    assert code == 2, err
    assert err.startswith("error: ") and needle in err and "--help" in err
    assert len(err.strip().splitlines()) == 1 and "unexpected" not in err and "Traceback" not in err
    assert out == ""


def test_evolve_budget_zero_needs_a_start_and_says_so_in_one_line(tmp_path, monkeypatch, capsys) -> None:
    """`--budget 0` reaches the library (the validated --init-labels start is then the head);
    without --init-labels it is refused there, in one line naming both flags."""
    pool = scripted_pool(tmp_path)
    code, out, err = run_main(["evolve", "--search-only",
                               "--pool", str(pool), "--budget", "0", "-q"], monkeypatch, capsys)
    assert code == 2 and out == ""
    assert "--budget" in err and "--init-labels" in err and "may be 0" in err
    assert len(err.strip().splitlines()) <= 2 and "Traceback" not in err


def test_bare_command_shows_help(monkeypatch, capsys) -> None:
    code, out, err = run_main([], monkeypatch, capsys)
    assert code == 2 and "Usage" in out and "ask" in out and err == ""


def test_progress_flags_are_the_same_on_every_command() -> None:
    import typer

    commands = typer.main.get_command(cli.app).commands  # type: ignore[attr-defined]
    flags = {}
    for name in ("ask", "evolve", "bench"):
        params = {p.name: p for p in commands[name].params}
        flags[name] = (params["quiet"].opts, params["quiet"].help, params["as_json"].opts)
    assert flags["ask"] == flags["evolve"] == flags["bench"]
    assert flags["ask"][0] == ["--quiet", "-q"] and flags["ask"][2] == ["--json"]


def test_quiet_leaves_stderr_to_errors_and_json_replaces_the_result(tmp_path, monkeypatch, capsys) -> None:
    pool = scripted_pool(tmp_path)
    code, out, err = run_main(["ask", "What is 12*7?", "--pool", str(pool), "-q"], monkeypatch, capsys)
    assert code == 0 and err == "" and "84" in out
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Q{i}: 12*7?", "answer": 84,
                                         "scorer": "numeric"}) + "\n" for i in range(20)))
    evolve = ["evolve", "--search-only", "--pool", str(pool), "--tasks", f"file:{tasks}:train",
              "--val-tasks", f"file:{tasks}:val:2",
              "--budget", "4", "--minibatch", "2", "--popsize", "2", "--max-turns", "2", "--backbone", "hash:16"]
    code, out, err = run_main([*evolve, "-q"], monkeypatch, capsys)
    assert code == 0 and err == "" and out.strip().endswith("evolved-run-2")
    code, out, err = run_main([*evolve, "--seed", "1", "--json", "-q"], monkeypatch, capsys)
    assert code == 0 and err == ""
    record = json.loads(out)
    assert record["kind"] == "evolve" and record["id"] == "run-3"
    code, out, err = run_main(["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test", "--random-seeds", "0",
                               "--max-turns", "2", "-q"], monkeypatch, capsys)
    assert code == 0 and err == "" and "single:m0" in out


def test_ctrl_c_offers_resume_only_where_there_is_one(tmp_path, monkeypatch, capsys) -> None:
    from trinity_cli.ask import answer as ask_mod
    from trinity_cli.bench import runner as bench_mod

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ask_mod, "build", interrupt)
    monkeypatch.setattr(bench_mod, "bench", interrupt)
    code, _, err = run_main(["ask", "Q", "--pool", str(scripted_pool(tmp_path))], monkeypatch, capsys)
    assert code == 130 and "interrupted" in err and "resume" not in err
    code, _, err = run_main(["bench", "--pool", str(scripted_pool(tmp_path))], monkeypatch, capsys)
    assert code == 130 and "interrupted" in err and "run the command again to resume" in err


def test_ask_library_reads_the_question_and_closes_what_it_built(tmp_path, monkeypatch) -> None:
    """`ask.ask` reads stdin itself (refusing a terminal) and closes the pool and
    coordinator it built, even when the episode fails: the command only renders."""
    from trinity_cli.ask import answer as ask_mod
    from trinity_cli.errors import ConfigError

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert ask_mod.read_question("-", io.StringIO("  Q?\n")) == "Q?"
    with pytest.raises(ConfigError, match="no question given"):
        ask_mod.read_question(None, Tty("ignored"))
    closed: list[str] = []
    real_build = ask_mod.build

    def build(options):
        pool, coordinator = real_build(options)
        pool.close = lambda: closed.append("pool")
        coordinator.close = lambda: closed.append("coordinator")
        return pool, coordinator

    def broken_episode(*args, **kwargs):
        raise RuntimeError("episode failed")

    monkeypatch.setattr(ask_mod, "build", build)
    monkeypatch.setattr(sys, "stdin", io.StringIO("What is 12*7?"))
    from trinity_cli.events import AskStarted, DecisionMade, RunAllocated, TextWritten, TurnPlayed

    events: list = []
    options = ask_mod.AskOptions(pool=str(scripted_pool(tmp_path)))
    result = ask_mod.ask(None, options, events.append)
    assert result.transcript.answer and sorted(closed) == ["coordinator", "pool"]
    # Typed progress: who answers, the run, then each decision before its turn.
    assert isinstance(events[0], AskStarted) and events[0].pool == "scripted"
    assert events[1] == RunAllocated(result.run_id)
    kinds = [type(e) for e in events[2:]]
    assert kinds == [DecisionMade, TextWritten, TurnPlayed] * len(result.transcript.turns)
    assert [e.turn for e in events if isinstance(e, TurnPlayed)] == result.transcript.turns
    from trinity_cli.policies import base as policy_base

    monkeypatch.setattr(policy_base, "run_episode", broken_episode)
    with pytest.raises(RuntimeError):
        ask_mod.ask("Q", options)
    assert sorted(closed) == ["coordinator", "coordinator", "pool", "pool"]


def test_without_a_terminal_progress_is_plain_lines_and_reports_are_markdown(tmp_path, monkeypatch, capsys) -> None:
    """Under nohup or a redirect (capsys: neither stream is a terminal), bench and evolve
    write plain progress lines to stderr, and bench's report (and inspect's replays) come
    out as Markdown tables at full width, not Rich tables squeezed to 80 columns."""
    monkeypatch.setenv("TRINITY_PROGRESS_EVERY", "0")
    pool = scripted_pool(tmp_path)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Q{i}: 12*7?", "answer": 84,
                                         "scorer": "numeric"}) + "\n" for i in range(20)))
    code, out, err = run_main(["bench", "--pool", str(pool), "--tasks", f"file:{tasks}:test:4", "--random-seeds",
                               "1", "--max-turns", "2", "--systems", "single,random"], monkeypatch, capsys)
    assert code == 0, err
    progress = [line for line in err.splitlines() if line.startswith("run-1 bench: ")]
    # 4 items x (3 singles + random): a line per episode at TRINITY_PROGRESS_EVERY=0.
    assert progress[-1].startswith("run-1 bench: 16/16 episodes") and len(progress) == 16
    assert "calls" in progress[0] and "elapsed" in progress[0] and "left" in progress[0]
    assert "| system | accuracy | 95% CI |" in out and "| single:m0 |" in out and "…" not in out
    assert out == (RunStore().path("run-1") / "report.md").read_text()
    code, again, _ = run_main(["inspect", "run-1"], monkeypatch, capsys)
    assert code == 0 and again == out

    code, out, err = run_main(["evolve", "--search-only", "--pool", str(pool), "--tasks", f"file:{tasks}:train",
                               "--val-tasks",
                               f"file:{tasks}:val:2", "--budget", "4", "--minibatch", "2", "--popsize", "2",
                               "--max-turns", "2", "--backbone", "hash:16"], monkeypatch, capsys)
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("run-2 evolve: ")]
    assert lines and lines[-1].startswith("run-2 evolve: 4/4 episodes"), err
    code, out, _ = run_main(["inspect", "run-2"], monkeypatch, capsys)
    assert code == 0 and "| gen | episodes | best fit | mean fit | val |" in out


@pytest.mark.parametrize(("spec", "message"), [
    ("m0@x", "--sc 'm0@x': expected MEMBER@K"),
    ("m0@0", "--sc 'm0@0': expected MEMBER@K"),
    ("nobody@3", "--sc: the pool has no model 'nobody'"),
])
def test_bad_sc_rows_are_one_clear_line(tmp_path, monkeypatch, capsys, spec: str, message: str) -> None:
    pool = scripted_pool(tmp_path)
    code, out, err = run_main(["bench", "--pool", str(pool), "--tasks", "gsm8k:test:2", "--systems", "sc",
                               "--sc", spec], monkeypatch, capsys)
    assert code != 0 and message in err and "Traceback" not in err


def test_library_errors_name_parameters_and_the_command_line_names_flags(tmp_path, monkeypatch, capsys) -> None:
    from trinity_cli.errors import ConfigError, option

    exc = ConfigError(f"{option('input_dims')} 3 needs more", f"lower {option('input_dims')}")
    assert str(exc) == "`input_dims` 3 needs more (lower `input_dims`)"
    assert exc.worded(cli.option_flags()) == ("--input-dims 3 needs more", "lower --input-dims")
    # The same library error through the entry point: the flags a user typed.
    code, _, err = run_main(["evolve", "--search-only", "--pool", str(scripted_pool(tmp_path)), "--input-dims", "300",
                             "--center-items", "10"], monkeypatch, capsys)
    assert code == 2 and "--input-dims 300 needs at least as many --center-items" in err
    assert "`" not in err and "\x1e" not in err


def test_every_option_library_text_names_is_a_flag() -> None:
    """Each `option("name")` in the library, and each evolve option a resume conflict can
    name, is a flag of some command, so no message names an option that does not exist."""
    import dataclasses
    import re
    from pathlib import Path

    import trinity_cli
    from trinity_cli.evolve.options import EvolveOptions

    src = Path(trinity_cli.__file__).parent
    marked = {name for path in src.rglob("*.py")
              for name in re.findall(r"""\boption\(\s*["']([a-z_0-9]+)["']\s*\)""", path.read_text())}
    assert {"input_dims", "exclude", "ray_workers", "svf_targets"} <= marked
    names = marked | {f.name for f in dataclasses.fields(EvolveOptions)}
    flags = cli.option_flags()
    assert sorted(names - set(flags)) == []
    assert flags["svf_targets"] == "--svf-target" and flags["exclude"] == "--exclude"

