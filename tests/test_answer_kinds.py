"""Answer kinds as one seam: detection, the registry (a package's kind included), the free-form
kind's constraints, and free-form episodes (draft, judge, revise) on the scripted backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from trinity_cli.answer_kinds import KINDS, answer_kind, detect, kind_name
from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.answer_kinds.constraints import Constraints, check, parse
from trinity_cli.episode.loop import run_episode
from trinity_cli.episode.schedules import FixedSchedule, agree
from trinity_cli.errors import ConfigError
from trinity_cli.messages import Role, Turn
from trinity_cli.pool.pool import open_pool
from trinity_cli.pool_config import load_pool
from trinity_cli.turns import prompts
from trinity_cli.turns.answer_text import answer_text

from .conftest import write_pool


@pytest.mark.parametrize(("question", "kind"), [
    ("Prove that the sum of two even integers is even.", "freeform"),
    ("Explain briefly why the sky is blue.", "freeform"),
    ("Write a haiku about autumn leaves.", "freeform"),
    ("Translate to French: 'The cat sleeps on the warm window sill.'", "freeform"),
    ("Why do cats purr?", "freeform"),
    ("Could you please summarize the plot of Hamlet?", "freeform"),
    ("What is 12*7? Answer with a number.", None),
    ("Is 221 prime?", None),
    ("What is the capital of France?", None),
    ("Write a Python function is_prime(n).", "code"),
    ("Which is a mammal?\n(A) trout\n(B) whale\n(C) crow\n\nAnswer: <letter>", "choice"),
])
def test_a_question_asks_for_its_kind(question: str, kind: str | None) -> None:
    assert detect(question) == kind


def test_kinds_are_registered_by_name_and_an_unknown_one_says_what_is_close() -> None:
    assert {"short", "numeric", "choice", "math", "exact", "code", "freeform"} <= set(KINDS.names())
    assert answer_kind(None).name == "short" and kind_name("short") is None and kind_name("freeform") == "freeform"
    assert answer_kind("contains").name == "short"  # a task file's own scorer reads kind-free
    with pytest.raises(ConfigError) as raised:
        kind_name("free-form")
    assert "freeform" in (raised.value.hint or "")


def test_a_kind_registered_like_a_package_one_is_detected_before_freeform() -> None:
    class Haiku(AnswerKind):
        name, priority, settles = "haiku", 50, "judged"

        def detect(self, task: str) -> bool:
            return "haiku" in task.lower()

    KINDS.register("haiku", Haiku())
    try:
        assert detect("Write a haiku about the sea.") == "haiku"
    finally:
        KINDS._targets.pop("haiku")
        KINDS._loaded.pop("haiku", None)
    assert detect("Write a haiku about the sea.") == "freeform"


def test_constraints_are_read_from_the_request_and_checked_with_a_reason() -> None:
    found = parse('Describe the sea without using any commas, in at most 12 words. End your response with "the end".')
    assert found == [{"type": "no_commas"}, {"type": "words", "relation": "at_most", "n": 12},
                     {"type": "ends_with", "phrase": "the end"}]
    assert check({"type": "no_commas"}, "blue, wide") == (False, "it has 1 comma(s); the request allows none")
    assert check(found[1], "one two three") == (True, "")
    assert check(found[2], "Waves roll in. The end.")[0]
    checks = Constraints.of(found)
    assert checks is not None
    run = checks.run("Sure, here it is:\nthe sea is big, blue and deep and it never ends at all today ok")
    assert run["passed"] is False and "comma" in run["error"] and "words" in run["error"]
    assert parse("Explain the difference between lowercase and uppercase letters.") == []
    with pytest.raises(ValueError, match="unknown constraint type"):
        Constraints.of([{"type": "rhymes"}])


def test_freeform_scores_an_item_by_its_constraints() -> None:
    kind = answer_kind("freeform")
    assert kind.score("waves roll in", [{"type": "lowercase"}]) == 1.0
    assert kind.score("Waves roll in", [{"type": "lowercase"}]) == 0.0


def test_short_kinds_keep_their_prompts_and_freeform_gets_its_own() -> None:
    short = prompts.build_messages(Role.WORKER, "What is 2+2?", [], style="reason", kind=answer_kind("numeric"))
    assert short[-1].content.endswith(prompts.REQUEST["reason"][Role.WORKER])
    freeform = answer_kind("freeform")
    free = prompts.build_messages(Role.WORKER, "Write a haiku about rain.", [], style="direct", kind=freeform)
    # a draft is the request as a person asks it: a plain system line, the request alone
    assert [m.role for m in free] == ["system", "user"] and free[-1].content == "Write a haiku about rain."
    assert free[0].content.startswith("You are a helpful assistant.") and "team" not in free[0].content
    revising = prompts.build_messages(Role.WORKER, "Write a haiku about rain.", [
        Turn(index=0, model="m", role=Role.WORKER, chosen_role=Role.WORKER, model_probs=[], role_probs=[],
             messages=[], prompt_tokens=1, completion_tokens=1, latency_s=0.0, coordinator_s=0.0, reply="Rain.")],
        style="direct", kind=freeform)
    assert revising[-1].content.endswith("Write the whole revised answer now.")


FREEFORM_RULES = [
    {"match": "Write the whole revised answer now", "reply": "Rain on the roof\nsoft drums in the night\nsleep comes"},
    {"match": "\\AWrite a haiku", "reply": "Rain, rain, rain."},  # a draft: the request alone
    {"match": "stated constraints: all met\\)\\s+You check", "reply": "Good.\nVerdict: ACCEPT"},
    {"match": "Give your critique and verdict now", "reply": "It is one line, not a haiku.\nVerdict: REVISE"},
]


def _pool(tmp_path: Path, styles: tuple[str, ...] = ("reason", "direct", "program")) -> Path:
    models = [{"name": f"m-{s}", "kind": "scripted", "style": s, "rules": FREEFORM_RULES, "default": "?"}
              for s in styles]
    return write_pool(tmp_path, {"name": "scripted", "models": models})


def test_a_freeform_episode_drafts_judges_revises_and_ends_at_an_accept(tmp_path: Path) -> None:
    task = "Write a haiku about rain without using any commas."
    with open_pool(load_pool(_pool(tmp_path))) as pool:
        names = pool.names
        source = FixedSchedule(names, ["m-program", "m-reason", "m-direct"], (Role.WORKER, Role.VERIFIER))
        checks = answer_kind("freeform").checks(task)
        transcript = run_episode(task, pool, source, max_turns=6, kind="freeform", examples=checks)
    roles = [(t.model, t.role.value, t.verdict) for t in transcript.turns]
    # the draft broke the no-commas rule: the Verifier acts as a Worker and revises (rule 3)
    assert roles[0] == ("m-reason", "worker", None)
    assert transcript.turns[0].examples is not None and transcript.turns[0].examples["passed"] is False
    assert roles[1][1] == "worker" and "failed its checks" in (transcript.turns[1].override or "")
    assert "Rain, rain, rain." in transcript.turns[1].messages[-1].content  # revising, shown the draft
    assert "it has 2 comma(s)" in transcript.turns[1].messages[-1].content
    assert transcript.accepted and transcript.stop_reason == "accepted"
    answer = answer_text(transcript.answer, answer_kind("freeform"))
    assert answer == "Rain on the roof\nsoft drums in the night\nsleep comes"
    # a freeform Verifier is shown the answer, not the whole transcript, and no program member is asked
    verifier = next(t for t in transcript.turns if t.role is Role.VERIFIER)
    assert "Answer to check:" in verifier.messages[-1].content and "Turns so far" not in verifier.messages[-1].content
    assert all(t.model != "m-program" for t in transcript.turns)
    assert transcript.turns[0].max_tokens == 1024 and verifier.max_tokens == 320


def test_freeform_agree_is_draft_judge_revise(tmp_path: Path) -> None:
    task = "Write a haiku about rain."
    with open_pool(load_pool(_pool(tmp_path, ("reason", "direct")))) as pool:
        transcript = run_episode(task, pool, agree(pool.names), max_turns=4, kind="freeform")
    steps = [(t.model, t.role.value, t.verdict) for t in transcript.turns]
    assert steps[:3] == [("m-reason", "worker", None), ("m-direct", "verifier", "REVISE"),
                         ("m-reason", "worker", None)]
    assert transcript.answer is not None and transcript.answer.startswith("Rain on the roof")


def test_without_an_accept_the_answer_is_the_latest_revision(tmp_path: Path) -> None:
    rules = [{"match": "revised answer now", "reply": "Second try."},
             {"match": "\\AWrite a haiku", "reply": "First try."},
             {"match": "verdict now", "reply": "Too short.\nVerdict: REVISE"}]
    models = [{"name": n, "kind": "scripted", "style": "reason", "rules": rules, "default": "?"} for n in ("a", "b")]
    with open_pool(load_pool(write_pool(tmp_path, {"name": "s", "models": models}))) as pool:
        transcript = run_episode("Explain tides.", pool, agree(pool.names), max_turns=4, kind="freeform")
    assert not transcript.accepted and transcript.answer == "Second try."


def test_the_instructions_family_says_in_words_exactly_what_it_scores() -> None:
    import json

    from trinity_cli.tasks.registry import load_split, split_sizes

    items = load_split("instructions", "all")
    assert len(items) == 240 and sum(v for k, v in split_sizes("instructions").items() if k != "all") == 240
    as_set = lambda found: sorted(json.dumps(c, sort_keys=True) for c in found)  # noqa: E731
    for item in items:
        assert as_set(parse(item.prompt)) == as_set(item.reference), item.id
        assert detect(item.prompt) == "freeform", item.id
    assert len({item.prompt for item in items}) == 240


def test_a_reply_is_handed_on_as_it_is_written_and_again_from_the_cache(tmp_path: Path) -> None:
    from trinity_cli.events import TextWritten

    seen: list[TextWritten] = []
    for _ in range(2):  # the second time every reply comes from the rollout cache
        with open_pool(load_pool(_pool(tmp_path, ("reason", "direct")))) as pool:
            transcript = run_episode("Write a haiku about rain.", pool, agree(pool.names), max_turns=2,
                                     kind="freeform", progress=lambda e: seen.append(e) if isinstance(e, TextWritten)
                                     else None)
    assert [(e.index, e.role) for e in seen] == [(0, "worker"), (1, "verifier")] * 2
    assert seen[0].text == transcript.turns[0].reply and seen[3].text == transcript.turns[1].reply
    assert transcript.turns[0].cached and seen[2].text == seen[0].text


def test_ask_prints_a_freeform_answer_whole_and_streams_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys) -> None:
    import json

    from .conftest import run_main

    pool = _pool(tmp_path, ("reason", "direct", "program"))
    code, out, err = run_main(["ask", "--pool", str(pool), "--no-warm", "Write a haiku about rain."],
                              monkeypatch, capsys)
    assert code == 0, err
    # no head named: a free-form question gets the `drafts` policy: no constraint stated, one draft
    assert out == "Rain, rain, rain.\n"
    assert "Rain, rain, rain." in err and "Verdict" not in err  # the reply as written, and no judge
    code, out, err = run_main(["ask", "--pool", str(pool), "--no-warm", "--mode", "agree",
                               "Write a haiku about rain."], monkeypatch, capsys)
    # draft, judge, revise stays selectable, never by a program
    assert code == 0 and out == "Rain on the roof\nsoft drums in the night\nsleep comes\n"
    assert "It is one line, not a haiku." in err
    code, out, err = run_main(["ask", "--pool", str(pool), "--no-warm", "--kind", "short", "--json",
                               "Write a haiku about rain."], monkeypatch, capsys)
    record = json.loads(out)
    assert code == 0 and record["answer_kind"] is None and record["mode"] != "agree"  # read as a short answer
    code, out, err = run_main(["ask", "--pool", str(pool), "--no-warm", "--kind", "poem", "Hi"], monkeypatch, capsys)
    assert code == 2 and "unknown answer kind 'poem'" in err and "Traceback" not in err


def test_serve_answers_a_freeform_request_whole_and_streams_its_drafts(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from trinity_cli.serve import create_app
    from trinity_cli.serve.service import ServeOptions

    from .test_serve import sse_events

    question = [{"role": "user", "content": "Write a haiku about rain."}]
    with TestClient(create_app(ServeOptions(pool=str(_pool(tmp_path))))) as client:
        plain = client.post("/v1/chat/completions", json={"model": "trinity", "messages": question})
        assert plain.status_code == 200, plain.text
        # `trinity` plays what ask plays: the drafts policy, one draft when no constraint is stated
        assert plain.json()["choices"][0]["message"]["content"] == "Rain, rain, rain."
        haiku = "Rain on the roof\nsoft drums in the night\nsleep comes"
        streamed = client.post("/v1/chat/completions", json={"model": "trinity/agree", "messages": question,
                                                             "stream": True})
        _, data = sse_events(streamed.text)
        deltas = [d["choices"][0]["delta"] for d in data if isinstance(d, dict) and d.get("choices")]
        thinking = "".join(d.get("reasoning_content", "") for d in deltas)
        assert "Rain, rain, rain." in thinking and "It is one line, not a haiku." in thinking
        assert "".join(d.get("content", "") for d in deltas) == haiku
        bad = client.post("/v1/chat/completions", json={"model": "trinity", "messages": question, "kind": "poem"})
        assert bad.status_code == 400 and "answer kind" in bad.json()["error"]["message"]
