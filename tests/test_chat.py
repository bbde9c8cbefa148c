"""Conversations: the shared model (conversation.py), a conversation as one run
(ask/conversation.py), `trinity ask -c` / `--conversation`, piped text and `--system`, and
`trinity chat` driven through a pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import sys
import time
from pathlib import Path

import pytest

from trinity_cli import conversation
from trinity_cli.ask import AskOptions, read_piped
from trinity_cli.ask import conversation as conv_mod
from trinity_cli.chat.session import ChatSession, LeaveChat
from trinity_cli.errors import ConfigError, NotFound
from trinity_cli.events import ContextShortened, KindFollowed
from trinity_cli.messages import ChatMessage
from trinity_cli.runs.store import RunStore
from trinity_cli.serve import protocol

from .conftest import run_main, write_pool

# Matched in the task (the prompt's "Task:" part), not in the earlier conversation shown above it.
MULTIPLY = [
    {"match": r"Task:\n[^\n]*12\*8", "reply": "12 times 8 is 96.\nAnswer: 96"},
    {"match": r"Task:\n[^\n]*12\*9", "reply": "12 times 9 is 108.\nAnswer: 108"},
    {"match": r"Task:\n[^\n]*12\*7", "reply": "12 times 7 is 84.\nAnswer: 84"},
]


def one_member_pool(tmp_path: Path, rules: list | None = None, **member) -> Path:
    """One scripted member (so one call per message with --max-turns 1), `router: agree`."""
    return write_pool(tmp_path, {"name": "chatty", "router": "agree", "models": [
        {"name": "m0", "kind": "scripted", "rules": rules or MULTIPLY, "default": "I do not know.", **member}]})


# -- the shared model ------------------------------------------------------------------------


def test_messages_and_split_lay_out_a_conversation() -> None:
    said = [conversation.Exchange("What is 12*7?", "84"), conversation.Exchange("And 12*8?", "96")]
    messages = conversation.messages("Be brief.", said, "And 12*9?")
    assert [m.role for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    task, context = conversation.split(messages)
    assert task == "And 12*9?" and context == messages[:-1]
    with pytest.raises(ValueError, match="last message must be the user's"):
        conversation.split(messages[:-1])
    with pytest.raises(ValueError, match="no user message"):
        conversation.split([ChatMessage("system", "x")])


def test_shortenings_leave_out_the_oldest_first_keep_system_and_never_open_with_an_answer() -> None:
    context = conversation.messages("S", [conversation.Exchange(f"q{i}", f"a{i}") for i in range(3)], "q")[:-1]
    forms = list(conversation.shortenings(context))
    assert forms[0] == (context, 0)
    for kept, left_out in forms[1:]:
        assert kept[0] == ChatMessage("system", "S")
        assert len(kept) == len(context) - left_out
        assert kept[1:2] == [] or kept[1].role == "user"
    assert [left for _, left in forms] == [0, 2, 4, 6]


def test_serve_and_chat_turn_the_same_messages_into_the_same_context(tmp_path: Path) -> None:
    """A served request's `messages` and a chat's conversation give the same task and context,
    and the same episode: the member is sent the same messages either way."""
    said = [conversation.Exchange("What is 12*7?", "84")]
    messages = conversation.messages("Answer with a number.", said, "And 12*8?")
    body = json.dumps({"model": "trinity", "messages": [{"role": m.role, "content": m.content} for m in messages]})
    request = protocol.parse_request(body.encode(), ["m0"], ["trinity"])
    assert (request.task, request.context) == conversation.split(messages)

    pool = str(one_member_pool(tmp_path))
    options = AskOptions(pool=pool, max_turns=1, system="Answer with a number.", use_cache=False)
    with ChatSession(options) as chat:
        chat.say("What is 12*7?")
        chat.say("And 12*8?")
        chat_calls = chat.served.pool.backend("m0").calls  # type: ignore[attr-defined]
    from trinity_cli.serve.service import ServedPool, ServeOptions

    served = ServedPool(ServeOptions(pool=pool, use_cache=False))
    try:
        request.max_turns = 1
        served_result = served.answer(request)
        served_calls = served.pool.backend("m0").calls  # type: ignore[attr-defined]
    finally:
        served.close()
    assert served_result.answer == "96"
    assert len(chat_calls) == 2 and served_calls == [chat_calls[-1]]
    record = RunStore().load(served_result.run_id)
    chat_record = RunStore().load("run-1")
    assert record["transcript"]["context"] == chat_record["exchanges"][1]["transcript"]["context"]
    assert record["transcript"]["turns"][0]["messages"] == chat_record["exchanges"][1]["transcript"]["turns"][0][
        "messages"]


def test_system_prompt_stands_for_the_plain_line_of_a_free_form_draft() -> None:
    from trinity_cli.answer_kinds.freeform import DRAFT_SYSTEM, FREEFORM

    context = [ChatMessage("system", "Answer in French."), ChatMessage("user", "Hi"), ChatMessage("assistant", "Salut")]
    drafted = FREEFORM.draft_messages("reason", "Write a haiku.", context)
    assert drafted[0] == ChatMessage("system", "Answer in French.")
    assert [m.role for m in drafted] == ["system", "user", "assistant", "user"]
    assert FREEFORM.draft_messages("reason", "Write a haiku.")[0] == ChatMessage("system", DRAFT_SYSTEM)


# -- a conversation is one run ---------------------------------------------------------------


def test_a_chat_session_saves_each_exchange_in_one_run_as_it_goes(tmp_path: Path) -> None:
    with ChatSession(AskOptions(pool=str(one_member_pool(tmp_path)), max_turns=1)) as chat:
        assert chat.say("What is 12*7?").answer == "84"
        assert chat.run_id == "run-1"
        assert len(RunStore().load("run-1")["exchanges"]) == 1  # saved before the next message
        second = chat.say("And 12*8?")
        assert second.answer == "96" and second.run_id == "run-1"
        context = second.transcript.context
        assert [(m.role, m.content) for m in context] == [("user", "What is 12*7?"), ("assistant", "84")]
        assert chat.command("/reset").text.startswith("a new conversation")
        chat.say("What is 12*9?")
        assert chat.run_id == "run-2"
    record = RunStore().load("run-1")
    assert record["kind"] == "chat" and record["title"] == "What is 12*7?"
    assert [e["answer"] for e in record["exchanges"]] == ["84", "96"]
    assert [r.kind for r in RunStore().list()] == ["chat", "chat"]
    assert (RunStore().path("run-1") / "calls.log").is_file()


def test_an_interrupted_answer_leaves_the_conversation_as_it_was(tmp_path: Path) -> None:
    def stop(event: object) -> None:
        if type(event).__name__ == "DecisionMade":
            raise KeyboardInterrupt

    with ChatSession(AskOptions(pool=str(one_member_pool(tmp_path)), max_turns=1)) as chat:
        chat.say("What is 12*7?")
        with pytest.raises(KeyboardInterrupt):
            chat.say("And 12*8?", stop)
        assert len(chat.conversation.exchanges) == 1
        assert chat.say("And 12*9?").answer == "108"
    assert [e["question"] for e in RunStore().load("run-1")["exchanges"]] == ["What is 12*7?", "And 12*9?"]
    with ChatSession(AskOptions(pool=str(one_member_pool(tmp_path)), max_turns=1)) as chat:
        with pytest.raises(KeyboardInterrupt):
            chat.say("What is 12*7?", stop)
    assert [r.id for r in RunStore().list()] == ["run-1"]  # a first message stopped leaves no run


def test_prompt_commands_change_what_follows_and_refuse_unknown_names(tmp_path: Path) -> None:
    with ChatSession(AskOptions(pool=str(one_member_pool(tmp_path)), max_turns=1)) as chat:
        assert chat.command("/mode agree").text == "mode: agree" and chat.options.mode == "agree"
        assert chat.command("/mode").text == "mode: agree"
        chat.command("/mode default")
        assert chat.options.mode is None
        assert chat.command("/kind numeric").text == "kind: numeric"
        assert chat.options.kind == "numeric"
        chat.command("/kind auto")
        assert chat.options.kind is None
        with pytest.raises(ConfigError, match="unknown answer kind|did you mean"):
            chat.command("/kind numerik")
        with pytest.raises(ConfigError):
            chat.command("/mode agreee")
        with pytest.raises(ConfigError, match="unknown command"):
            chat.command("/frobnicate")
        with pytest.raises(LeaveChat):
            chat.command("/exit")


def test_a_follow_up_to_a_whole_answer_gets_a_whole_answer(tmp_path: Path) -> None:
    rules = [{"match": "poem", "reply": "Waves on the shore\nthe sea is calm tonight"},
             {"match": "shorter", "reply": "Calm sea tonight"}]
    events: list[object] = []
    with ChatSession(AskOptions(pool=str(one_member_pool(tmp_path, rules)))) as chat:
        first = chat.say("Write a short poem about the sea.")
        second = chat.say("Make it shorter.", events.append)
        third = chat.say("What is 12*7?")  # a question of its own: the short path again
        fourth = chat.say("Give me a plan for a week in Rome.")
    record = RunStore().load(first.run_id)
    assert [e["answer_kind"] for e in record["exchanges"]] == ["freeform", "freeform", None, "freeform"]
    assert third.transcript.context[-1] == ChatMessage("assistant", "Calm sea tonight") and fourth.answer
    assert KindFollowed("freeform") in events
    assert second.answer == "Calm sea tonight"
    code = [{"answer_kind": "code"}]
    assert conv_mod.follow_up_kind("Write a Python function f(x).", record["exchanges"]) == ("code", False)
    assert conv_mod.follow_up_kind("Now make it multiply them instead.", code) == ("code", True)
    assert conv_mod.follow_up_kind("What about 17?", [{"answer_kind": None}]) == (None, True)
    assert conv_mod.follow_up_kind("And in Fahrenheit?", [{"answer_kind": None}]) == (None, True)
    assert conv_mod.follow_up_kind("Thanks, go on.", [{"answer_kind": None}]) == ("freeform", False)
    # a question of its own keeps its own kind after a whole answer; a request about it follows it
    assert conv_mod.follow_up_kind("What is the capital of France?", record["exchanges"]) == (None, False)
    assert conv_mod.follow_up_kind("Now say it in French.", record["exchanges"]) == ("freeform", True)
    assert conv_mod.follow_up_kind("Now say it in French.", [{"answer_kind": "numeric"}]) == ("numeric", True)


def test_a_long_conversation_leaves_out_its_oldest_messages_and_says_so(tmp_path: Path, monkeypatch, capsys) -> None:
    pool = str(one_member_pool(tmp_path, n_ctx=300))
    events: list[object] = []
    long = " ".join(["word"] * 25)
    with ChatSession(AskOptions(pool=pool, max_turns=1, kind="short")) as chat:
        for i in range(4):
            chat.say(f"{long} {i} What is 12*7?")
        result = chat.say("And 12*8?", events.append)
    shortened = [e for e in events if isinstance(e, ContextShortened)]
    assert shortened and shortened[0].messages == 8 and shortened[0].left_out >= 2
    assert shortened[0].n_ctx == 300
    context = result.transcript.context
    assert len(context) == 8 - shortened[0].left_out and context[0].role == "user"
    assert context[-1] == ChatMessage("assistant", "84")  # the newest stay
    code, out, err = run_main(["ask", "-c", "And 12*9?", "--pool", pool, "--max-turns", "1"], monkeypatch, capsys)
    assert code == 0 and out == "108\n", err
    assert re.search(r"warning: the conversation is longer than a member's context \(300 tokens\): its \d+ oldest "
                     r"of 10 messages are left out", err)


# -- trinity ask -c, piped text, --system ----------------------------------------------------


def test_ask_continue_continues_the_latest_conversation_and_a_given_one(tmp_path, monkeypatch, capsys) -> None:
    pool = str(one_member_pool(tmp_path))
    code, _, err = run_main(["ask", "-c", "And 12*8?", "--pool", pool], monkeypatch, capsys)
    assert code == 2 and "no conversation to continue" in err and "Traceback" not in err
    code, out, err = run_main(["ask", "What is 12*7?", "--pool", pool, "--max-turns", "1"], monkeypatch, capsys)
    assert code == 0 and out == "84\n", err
    code, out, err = run_main(["ask", "-c", "And 12*8?", "--pool", pool, "--max-turns", "1"], monkeypatch, capsys)
    assert code == 0 and out == "96\n", err
    record = RunStore().load("run-2")  # the ask run continued as a new conversation
    assert record["kind"] == "chat" and record["continues"] == "run-1"
    assert [e["question"] for e in record["exchanges"]] == ["What is 12*7?", "And 12*8?"]
    code, out, err = run_main(["ask", "--conversation", "run-2", "And 12*9?", "--pool", pool, "--max-turns", "1"],
                              monkeypatch, capsys)
    assert code == 0 and out == "108\n", err
    record = RunStore().load("run-2")
    assert len(record["exchanges"]) == 3
    context = record["exchanges"][2]["transcript"]["context"]
    assert [m["content"] for m in context] == ["What is 12*7?", "84", "And 12*8?", "96"]
    code, _, err = run_main(["ask", "--conversation", "run-9", "x", "--pool", pool], monkeypatch, capsys)
    assert code != 0 and "no run 'run-9'" in err


def test_piped_text_is_asked_with_the_question_text_first(tmp_path, monkeypatch, capsys) -> None:
    rules = [{"match": "Summari[sz]e this", "reply": "The notes say the sea is calm."}]
    pool = str(one_member_pool(tmp_path, rules))
    code, out, err = run_main(["ask", "Summarize this.", "--pool", pool], monkeypatch, capsys,
                              stdin="The sea was calm tonight.\nThe tide is full.\n")
    assert code == 0, err
    record = RunStore().load("run-1")
    assert record["question"] == "The sea was calm tonight.\nThe tide is full.\n\nSummarize this."
    assert record["answer_kind"] == "freeform"  # from the question's wording, not the file's
    assert out.strip() == "The notes say the sea is calm."


def test_piped_binary_or_oversized_input_is_refused_in_one_line() -> None:
    import io

    class Piped(io.BytesIO):
        def isatty(self) -> bool:
            return False

    binary = io.TextIOWrapper(Piped(b"\x7fELF\x00\x01"))
    with pytest.raises(ConfigError, match="not text"):
        read_piped("explain this", binary)
    latin = io.TextIOWrapper(Piped("caf\u00e9".encode("latin-1")))
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_piped("explain this", latin)
    big = io.TextIOWrapper(Piped(b"x" * 101))
    with pytest.raises(ConfigError, match="longer than 100 characters"):
        read_piped("explain this", big, cap=100)
    empty = io.TextIOWrapper(Piped(b""))
    assert read_piped("explain this", empty) == ("explain this", None)


def test_system_reaches_a_free_form_draft_as_its_system_message(tmp_path, monkeypatch, capsys) -> None:
    rules = [{"match": "poem", "reply": "Les vagues"}]
    pool = str(one_member_pool(tmp_path, rules))
    code, out, err = run_main(["ask", "Write a short poem about the sea.", "--system", "Answer in French.",
                               "--pool", pool], monkeypatch, capsys)
    assert code == 0, err
    turn = RunStore().load("run-1")["transcript"]["turns"][0]
    assert turn["messages"][0] == {"role": "system", "content": "Answer in French."}


def test_continue_without_any_conversation_run_names_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no conversation"):
        conv_mod.latest(RunStore())


# -- trinity chat through a pseudo-terminal --------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]|\x1b\][^\x07]*\x07|\r")


class Terminal:
    """A command run on a pseudo-terminal (stdlib pty): what it wrote, ANSI codes taken out."""

    def __init__(self, args: list[str], env: dict[str, str], sigint: signal.Handlers = signal.SIG_DFL) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the command, on the pty, SIGINT as `sigint` says (inherited by exec)
            signal.signal(signal.SIGINT, sigint)  # not as the test runner may have left it
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            os.execvpe(args[0], args, env)
        self.seen = ""

    def expect(self, pattern: str, timeout: float = 60.0) -> str:
        end = time.monotonic() + timeout
        found = re.compile(pattern)
        while not found.search(self.seen):
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} within {timeout} s; the terminal shows:\n{self.seen[-2000:]}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.2))
            if ready:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:  # the command ended
                    data = b""
                if not data:
                    if not found.search(self.seen):
                        raise AssertionError(f"ended without {pattern!r}:\n{self.seen[-2000:]}")
                    break
                self.seen += ANSI.sub("", data.decode(errors="replace"))
        return self.seen

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, timeout: float = 30.0) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    self.seen += ANSI.sub("", os.read(self.fd, 4096).decode(errors="replace"))
                except OSError:  # the command ended: its status is read next
                    pass
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError(f"still running after {timeout} s:\n{self.seen[-2000:]}")


def test_chat_through_a_terminal_two_messages_a_stopped_answer_exit_then_ask_c(
        tmp_path: Path, trinity_home: Path, monkeypatch, capsys) -> None:
    rules = [*MULTIPLY, {"match": "slowly", "reply": "Answer: 1"}]
    pool = str(one_member_pool(tmp_path, rules, delay_s=1.0))
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "TRINITY_HOME": str(trinity_home), "PYTHONPATH": src, "TERM": "xterm", "COLUMNS": "100"}
    term = Terminal([sys.executable, "-m", "trinity_cli", "chat", "--pool", pool, "--max-turns", "1"], env)
    term.expect(r">>> ")
    term.send("What is 12*7?\r")
    term.expect(r"\n84\n+>>> ")
    term.send('"""And 12*8?\rAnswer with a number."""\r')
    term.expect(r"\n96\n+>>> ")
    term.send("Count slowly to one.\r")
    term.expect(r"turn 1: m0")
    time.sleep(0.2)
    term.send("\x03")  # Ctrl-C while the answer is written
    term.expect(r"stopped: that answer is not saved")
    term.expect(r"not saved[^>]*\n>>> ")
    term.send("/exit\r")
    term.expect(r"saved as run-1")
    assert term.wait() == 0
    record = RunStore().load("run-1")
    assert [e["question"] for e in record["exchanges"]] == ["What is 12*7?", "And 12*8?\nAnswer with a number."]
    assert (trinity_home / "chat-history").is_file()

    code, out, err = run_main(["ask", "-c", "And 12*9?", "--pool", pool, "--max-turns", "1"], monkeypatch, capsys)
    assert code == 0 and out == "108\n", err
    record = RunStore().load("run-1")
    assert [e["answer"] for e in record["exchanges"]] == ["84", "96", "108"]
    assert [r.id for r in RunStore().list()] == ["run-1"]


def test_ctrl_c_stops_an_answer_even_when_the_chat_was_started_with_sigint_ignored(
        tmp_path: Path, trinity_home: Path) -> None:
    # A shell's background job or a test runner may start it so; exec keeps SIGINT ignored.
    pool = str(one_member_pool(tmp_path, [{"match": "slowly", "reply": "Answer: 1"}], delay_s=3.0))
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "TRINITY_HOME": str(trinity_home), "PYTHONPATH": src, "TERM": "xterm", "COLUMNS": "100"}
    term = Terminal([sys.executable, "-m", "trinity_cli", "chat", "--pool", pool, "--max-turns", "1"], env,
                    sigint=signal.SIG_IGN)
    term.expect(r">>> ")
    term.send("Count slowly to one.\r")
    term.expect(r"turn 1: m0")
    time.sleep(0.2)
    term.send("\x03")
    term.expect(r"stopped: that answer is not saved")
    term.send("/exit\r")
    assert term.wait() == 0


def test_the_latency_script_measures_each_message_of_a_chat_on_a_scripted_pool(tmp_path: Path,
                                                                               trinity_home: Path) -> None:
    """scripts/perf/chat_latency.py drives `trinity chat` through a pty: one row per message,
    its first streamed text no later than its answer, on a pool whose replies take 0.3 s."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    pool = one_member_pool(tmp_path, delay_s=0.3)
    env = {**os.environ, "TRINITY_HOME": str(trinity_home), "PYTHONPATH": str(root / "src")}
    done = subprocess.run([sys.executable, str(root / "scripts/perf/chat_latency.py"), "--pool", str(pool),
                           "--message", "What is 12*7?", "--message", "And 12*8?", "--json", "--timeout", "60",
                           "--", "--max-turns", "1"], env=env, capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [r["message"] for r in report["rows"]] == ["What is 12*7?", "And 12*8?"]
    for row in report["rows"]:
        assert 0.3 <= row["first_s"] <= row["answer_s"] < 30
    assert report["later_first_max_s"] == report["rows"][1]["first_s"]


def test_inspect_lists_a_conversation_and_replays_it_message_by_message(tmp_path, monkeypatch, capsys) -> None:
    with ChatSession(AskOptions(pool=str(one_member_pool(tmp_path)), max_turns=1, system="Be brief.")) as chat:
        chat.say("What is 12*7?")
        chat.say("And 12*8?")
    code, out, err = run_main(["inspect"], monkeypatch, capsys)
    assert code == 0 and re.search(r"run-1\s*\|\s*chat\s*\|.*What is 12\*7\?", out), out + err
    code, out, err = run_main(["inspect", "run-1"], monkeypatch, capsys)
    assert code == 0, err
    assert "conversation of 2 messages" in out and "System: Be brief." in out
    assert out.index("message 1") < out.index("What is 12*7?") < out.index("message 2") < out.index("And 12*8?")
    assert "12 times 8 is 96." in out

    from trinity_cli.viewer.opened import OpenedRun
    from trinity_cli.viewer.pages import run_page, runs_page

    page = run_page(OpenedRun(RunStore(), "run-1"))
    assert [c["label"] for c in page["columns"]] == ["message 1: What is 12*7?", "message 2: And 12*8?"]
    assert page["answer"] == "96" and page["columns"][1]["episodes"][0]["transcript"]["turns"]
    assert runs_page(RunStore())["runs"][0]["items"] == "2 messages"


def test_system_travels_to_a_warm_server_with_the_question(tmp_path: Path) -> None:
    """`ask --system` through a warm server: the request carries it (trinity-warm/4) and the
    server's run is the one an in-process ask saves, the system prompt its context."""
    from trinity_cli.serve import warm
    from trinity_cli.serve.service import ServedPool, ServeOptions

    rules = [{"match": "poem", "reply": "Les vagues"}]
    pool = str(one_member_pool(tmp_path, rules))
    body = warm.request_body("Write a short poem about the sea.", AskOptions(pool=pool, system="Answer in French."))
    assert body["options"]["system"] == "Answer in French." and warm.FORMAT == "trinity-warm/4"
    served = ServedPool(ServeOptions(pool=pool))
    try:
        result = served.ask_warm(body["question"], body["options"])
    finally:
        served.close()
    assert result.answer == "Les vagues"
    assert result.transcript.context == [ChatMessage("system", "Answer in French.")]
    assert result.transcript.turns[0].messages[0] == ChatMessage("system", "Answer in French.")
