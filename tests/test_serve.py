"""`trinity serve` against scripted pools: the app through Starlette's TestClient, and the
real server (`python -m trinity_cli serve`, uvicorn) under a bounded concurrent load
through the official `openai` client."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from trinity_cli import cli, entry, paths
from trinity_cli.coordinator import head as head_mod
from trinity_cli.errors import ConfigError
from trinity_cli.runs.store import RunStore
from trinity_cli.serve import create_app
from trinity_cli.serve.service import ServeOptions

from .conftest import free_port, scripted_pool, stop_process, write_pool

QUESTION = [{"role": "user", "content": "What is 12*7?"}]
KEY_VAR = "TRINITY_TEST_SERVE_KEY"
KEY = "serve-secret-token-4711"




@pytest.fixture
def pool_file(tmp_path: Path) -> Path:
    return scripted_pool(tmp_path)


@pytest.fixture
def client(pool_file: Path) -> Iterator[TestClient]:
    with TestClient(create_app(ServeOptions(pool=str(pool_file)))) as test_client:
        yield test_client


def chat(client: TestClient, **body: Any) -> httpx.Response:
    return client.post("/v1/chat/completions", json={"model": "trinity", "messages": QUESTION, **body})


def saved_runs() -> list[str]:
    return [r.id for r in RunStore().list()]


def assert_error(response: httpx.Response, status: int, code: str | None = None, needle: str = "") -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert needle in error["message"]
    if code is not None:
        assert error["code"] == code
    assert "Traceback" not in response.text
    return error


def sse_events(text: str) -> tuple[list[str], list[Any]]:
    """(comment lines, decoded data payloads) of an SSE body; "[DONE]" stays a string."""
    comments, data = [], []
    for block in text.split("\n\n"):
        for line in block.splitlines():
            if line.startswith(":"):
                comments.append(line[1:].strip())
            elif line.startswith("data: "):
                payload = line[len("data: ") :]
                data.append(payload if payload == "[DONE]" else json.loads(payload))
    return comments, data


# -- models and plain completions --------------------------------------------------------


def test_models_lists_trinity_and_the_heads_made_for_this_pool(pool_file: Path) -> None:
    info = {"ref": "smollm2-135m", "fingerprint": None, "hidden_size": 576}
    mine = head_mod.untrained("scripted", ["m0", "m1", "m2"], info, 576)
    mine.manifest["name"] = "mine"
    mine.save(paths.user_heads_dir() / "mine")
    other = head_mod.untrained("other", ["a", "b"], info, 576)
    other.save(paths.user_heads_dir() / "other")

    with TestClient(create_app(ServeOptions(pool=str(pool_file)))) as client:
        listing = client.get("/v1/models").json()
        reply = client.post("/v1/chat/completions", json={"model": "trinity/mine", "messages": QUESTION})
        wrong_pool = client.post("/v1/chat/completions", json={"model": "trinity/other", "messages": QUESTION})

    assert listing["object"] == "list"
    assert [m["id"] for m in listing["data"]] == ["trinity", "trinity/untrained", "trinity/mine", "trinity/agree",
                                                  "trinity/conductor", "trinity/drafts", "trinity/drafts-told"]
    assert all(m["object"] == "model" and m["owned_by"] == "trinity" for m in listing["data"])
    assert reply.status_code == 200 and reply.json()["trinity"]["head"] == "mine"
    assert_error(wrong_pool, 404, "model_not_found", "trinity/other")


def test_agree_answers_trinity_agree_and_is_the_default_where_the_pool_says_so(tmp_path: Path) -> None:
    """"trinity/agree" runs the agree procedure (members in order, from the question alone,
    until two answers agree); a pool file with `router: agree` makes it what "trinity" runs,
    and start-up says so on its first line."""
    for sub in ("plain", "routed"):
        (tmp_path / sub).mkdir()
    plain = scripted_pool(tmp_path / "plain")
    with TestClient(create_app(ServeOptions(pool=str(plain)))) as client:
        agreed = client.post("/v1/chat/completions", json={"model": "trinity/agree", "messages": QUESTION})
        headed = chat(client)
    assert agreed.status_code == 200, agreed.text
    record = RunStore().load(agreed.headers["X-Trinity-Run"])
    assert record["mode"] == "agree" and record["head"] is None
    assert [t["model"] for t in record["transcript"]["turns"]] == ["m0", "m1"]
    assert record["transcript"]["stop_reason"] == "agreed" and agreed.json()["choices"][0]["message"]["content"] == "84"
    assert RunStore().load(headed.headers["X-Trinity-Run"])["mode"] == "coordinator"

    events: list = []
    routed = scripted_pool(tmp_path / "routed", router="agree")
    from trinity_cli.serve.service import ServedPool

    served = ServedPool(ServeOptions(pool=str(routed)), progress=events.append)
    try:
        assert events[0].default == "agree" and served.default_head.startswith("none")
    finally:
        served.close()
    with TestClient(create_app(ServeOptions(pool=str(routed)))) as client:
        default = chat(client)
        by_head = client.post("/v1/chat/completions", json={"model": "trinity/untrained", "messages": QUESTION})
    assert RunStore().load(default.headers["X-Trinity-Run"])["mode"] == "agree"
    assert RunStore().load(by_head.headers["X-Trinity-Run"])["mode"] == "coordinator"


def test_serve_loads_the_pools_weights_at_start_beside_the_backbone(tmp_path: Path, monkeypatch) -> None:
    """ServedPool starts the pool's preload before it warms the backbone, and waits for it:
    the first request finds the weights loaded (pool/pool.py's `preload`)."""
    from trinity_cli.pool.pool import Pool
    from trinity_cli.serve.service import ServedPool

    order: list[str] = []
    real = Pool.preload

    def preload(self, names):
        order.append("preload " + ",".join(names))
        return real(self, names)

    monkeypatch.setattr(Pool, "preload", preload)
    served = ServedPool(ServeOptions(pool=str(scripted_pool(tmp_path))),
                        progress=lambda event: order.append(type(event).__name__))
    served.close()
    assert order[:2] == ["ServeLoading", "preload m0,m1,m2"]


def test_a_reader_is_served_by_name_and_reads_no_backbone(pool_file: Path) -> None:
    from trinity_cli.coordinator import reader as reader_mod

    reader = reader_mod.Reader.agree_start("scripted", ["m0", "m1", "m2"])
    reader.manifest["name"] = "reads"
    reader_mod.save(reader, paths.user_heads_dir() / "reads")
    with TestClient(create_app(ServeOptions(pool=str(pool_file), head="reads"))) as client:
        listing = [m["id"] for m in client.get("/v1/models").json()["data"]]
        reply = client.post("/v1/chat/completions", json={"model": "trinity", "messages": QUESTION})
    assert "trinity/reads" in listing
    assert reply.status_code == 200, reply.text
    body = reply.json()
    record = RunStore().load(reply.headers["X-Trinity-Run"])
    assert body["trinity"]["head"] == "reads" and record["backbone"] is None
    assert all(t["alone"] and t["role"] == "worker" for t in record["transcript"]["turns"])


def test_completion_answers_with_usage_header_and_an_inspectable_run(client: TestClient) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "I will ask some arithmetic."},
        {"role": "assistant", "content": [{"type": "text", "text": "Go ahead."}]},
        *QUESTION,
    ]
    response = client.post("/v1/chat/completions", json={"model": "trinity", "messages": messages})

    assert response.status_code == 200, response.text
    body = response.json()
    run_id = response.headers["X-Trinity-Run"]
    record = RunStore().load(run_id)
    turns = record["transcript"]["turns"]
    assert body["object"] == "chat.completion" and body["id"] == f"chatcmpl-{run_id}"
    assert body["model"] == "trinity"
    [choice] = body["choices"]
    # The answer alone; the whole reply is in the run record.
    assert choice["message"] == {"role": "assistant", "content": "84"} and choice["finish_reason"] == "stop"
    assert record["answer"] == "84" and record["transcript"]["answer"] == "12 times 7 is 84.\nAnswer: 84"
    prompt, completion = sum(t["prompt_tokens"] for t in turns), sum(t["completion_tokens"] for t in turns)
    assert body["usage"] == {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}
    assert body["trinity"]["run"] == run_id and len(body["trinity"]["turns"]) == len(turns)
    assert record["via"] == "serve" and record["question"] == "What is 12*7?"
    assert [m["role"] for m in record["transcript"]["context"]] == ["system", "user", "assistant"]
    assert record["transcript"]["context"][2]["content"] == "Go ahead."

    shown = CliRunner().invoke(cli.app, ["inspect", run_id])
    assert shown.exit_code == 0 and "Answer" in shown.output and "What is 12*7?" in shown.output


def test_extensions_bound_and_steer_the_episode(client: TestClient) -> None:
    one = chat(client, max_turns=1).json()
    routed = chat(client, exclude=["m0", "m1"], max_turns=4, seed=3).json()
    again = chat(client, exclude=["m0", "m1"], max_turns=4, seed=3).json()
    budget = chat(client, max_tokens_total=1, max_turns=5)

    assert len(one["trinity"]["turns"]) == 1 and one["trinity"]["turns"][0]["role"] == "worker"
    assert {t["model"] for t in routed["trinity"]["turns"]} == {"m2"}
    assert routed["trinity"]["turns"] == again["trinity"]["turns"]
    data = budget.json()
    # The first turn spends the budget; a Worker answers on it or, failing that, on one more turn.
    turns = data["trinity"]["turns"]
    assert data["trinity"]["stop_reason"] == "token_budget" and len(turns) in (1, 2)
    assert turns[-1]["role"] == "worker" and all(t["role"] != "worker" for t in turns[:-1])
    assert data["choices"][0]["message"]["content"] and data["choices"][0]["finish_reason"] == "stop"
    record = RunStore().load(budget.headers["X-Trinity-Run"])
    assert record["exclude"] == [] and record["max_turns"] == 5


def test_show_work_returns_the_whole_reply(client: TestClient) -> None:
    shown = chat(client, show_work=True).json()
    assert shown["choices"][0]["message"]["content"] == "12 times 7 is 84.\nAnswer: 84"
    assert_error(chat(client, show_work="yes"), 400, "invalid_value", "show_work")


def test_the_same_seed_draws_per_question(client: TestClient) -> None:
    """The request's seed with the conversation seeds the draws: the same request replays its
    route, and other questions under the same seed draw other routes."""
    def route(question: str) -> list:
        body = chat(client, messages=[{"role": "user", "content": question}], seed=0, max_turns=4).json()
        return [(t["model"], t["role"]) for t in body["trinity"]["turns"]]

    questions = [f"What is 12*7? (try {i})" for i in range(6)]
    routes = [route(q) for q in questions]
    assert route(questions[0]) == routes[0]
    assert len({tuple(r) for r in routes}) > 1, routes


def test_streaming_sends_the_turns_as_reasoning_then_the_answer(client: TestClient) -> None:
    plain = chat(client, seed=5).json()
    body = {"model": "trinity", "messages": QUESTION, "seed": 5, "stream": True,
            "stream_options": {"include_usage": True}}
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        run_id = response.headers["X-Trinity-Run"]
        text = response.read().decode()

    comments, data = sse_events(text)
    assert data[-1] == "[DONE]"
    chunks = data[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == f"chatcmpl-{run_id}" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert content == plain["choices"][0]["message"]["content"] == "84"
    finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finals) == 1 and finals[0]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == plain["usage"]
    turns = plain["trinity"]["turns"]
    reasoning = [c["choices"][0]["delta"]["reasoning_content"] for c in chunks
                 if c["choices"] and "reasoning_content" in c["choices"][0]["delta"]]
    # Each turn three times: when it is decided, its reply as it is written, then who acted and
    # what it cost; all before the answer.
    assert [r.startswith("Turn ") for r in reasoning] == [True, False, False] * len(turns)
    assert "Answer: 84" in reasoning[-2]
    assert reasoning[-1].lstrip("\n").startswith(f"{turns[-1]['model']} {turns[-1]['role']}")
    assert "tokens" in reasoning[-1]
    first_content = next(i for i, c in enumerate(chunks) if c["choices"] and c["choices"][0]["delta"].get("content"))
    last_reasoning = max(i for i, c in enumerate(chunks)
                         if c["choices"] and "reasoning_content" in c["choices"][0]["delta"])
    assert last_reasoning < first_content and not comments
    assert RunStore().load(run_id)["answer"] == content


def test_streaming_without_include_usage_has_no_usage_chunk(client: TestClient) -> None:
    with client.stream("POST", "/v1/chat/completions",
                       json={"model": "trinity", "messages": QUESTION, "stream": True}) as response:
        _, data = sse_events(response.read().decode())
    assert data[-1] == "[DONE]" and all(c["choices"] for c in data[:-1])


def test_episodes_run_one_at_a_time(client: TestClient) -> None:
    pool = client.app.state.served.pool  # type: ignore[attr-defined]
    real_chat, active, peak = pool.chat, [0], [0]

    def slow_chat(*args: Any, **kwargs: Any) -> Any:
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        try:
            return real_chat(*args, **kwargs)
        finally:
            active[0] -= 1

    pool.chat = slow_chat
    with ThreadPoolExecutor(max_workers=6) as workers:
        replies = list(workers.map(lambda seed: chat(client, seed=seed, max_turns=2), range(6)))

    assert [r.status_code for r in replies] == [200] * 6
    assert peak == [1]
    assert len({r.headers["X-Trinity-Run"] for r in replies}) == 6


# -- refusals ---------------------------------------------------------------------------


def test_bearer_token_is_required_when_configured(pool_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, KEY)
    with TestClient(create_app(ServeOptions(pool=str(pool_file), api_key_env=KEY_VAR))) as client:
        missing = chat(client)
        wrong = client.post("/v1/chat/completions", json={"model": "trinity", "messages": QUESTION},
                            headers={"Authorization": "Bearer not-the-token"})
        basic = client.post("/v1/chat/completions", json={"model": "trinity", "messages": QUESTION},
                            headers={"Authorization": f"Basic {KEY}"})
        models = client.get("/v1/models")
        assert saved_runs() == []
        right = client.post("/v1/chat/completions", json={"model": "trinity", "messages": QUESTION},
                            headers={"Authorization": f"bearer {KEY}"})

    for response in (missing, wrong, basic, models):
        error = assert_error(response, 401, "invalid_api_key")
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert KEY not in json.dumps(error)
    assert right.status_code == 200 and saved_runs() == [right.headers["X-Trinity-Run"]]


def test_unset_key_variable_is_a_startup_error(pool_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_VAR, raising=False)
    with pytest.raises(ConfigError, match=f"{KEY_VAR}: the environment variable is not set"):
        create_app(ServeOptions(pool=str(pool_file), api_key_env=KEY_VAR))


@pytest.mark.parametrize(
    "body,param,needle",
    [
        (b"{not json", None, "not valid JSON"),
        (b"[1, 2]", None, "JSON object"),
        (json.dumps({"model": "trinity"}).encode(), "messages", "non-empty list"),
        (json.dumps({"model": "trinity", "messages": []}).encode(), "messages", "non-empty list"),
        (json.dumps({"messages": QUESTION}).encode(), "model", "'model' is required"),
        (json.dumps({"model": "trinity", "messages": [{"role": "system", "content": "hi"}]}).encode(),
         "messages", "no user message"),
        (json.dumps({"model": "trinity", "messages": [*QUESTION, {"role": "assistant", "content": "4"}]}).encode(),
         "messages", "last message must be the user's"),
        (json.dumps({"model": "trinity", "messages": [{"role": "user", "content": "  "}]}).encode(),
         "messages", "empty"),
        (json.dumps({"model": "trinity", "messages": [{"role": "tool", "content": "x"}]}).encode(),
         "messages", "role 'tool'"),
        (json.dumps({"model": "trinity", "messages": QUESTION, "max_turns": 0}).encode(), "max_turns", "1 to 50"),
        (json.dumps({"model": "trinity", "messages": QUESTION, "max_turns": "3"}).encode(), "max_turns", "1 to 50"),
        (json.dumps({"model": "trinity", "messages": QUESTION, "exclude": ["m9"]}).encode(),
         "exclude", "did you mean"),
        (json.dumps({"model": "trinity", "messages": QUESTION, "exclude": ["m0", "m1", "m2"]}).encode(),
         "exclude", "every model"),
        (json.dumps({"model": "trinity", "messages": QUESTION, "seed": -1}).encode(), "seed", "non-negative"),
        (json.dumps({"model": "trinity", "messages": QUESTION, "max_cost_usd": 0}).encode(),
         "max_cost_usd", "positive"),
        (json.dumps({"model": "trinity", "messages": QUESTION, "n": 2}).encode(), "n", "n=1"),
        (json.dumps({"model": "trinity", "messages": QUESTION, "stream": True,
                     "exclude": ["nope"]}).encode(), "exclude", "no model 'nope'"),
    ],
)
def test_bad_requests_are_400_with_an_openai_error_body(client: TestClient, body: bytes, param: str | None,
                                                         needle: str) -> None:
    response = client.post("/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})

    error = assert_error(response, 400, needle=needle)
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert saved_runs() == []


def test_unknown_model_is_404_with_close_matches(client: TestClient) -> None:
    error = assert_error(chat(client, model="trinty"), 404, "model_not_found", "did you mean 'trinity'")
    assert error["type"] == "not_found_error" and error["param"] == "model"


def test_oversize_bodies_and_messages_are_refused(client: TestClient) -> None:
    huge = json.dumps({"model": "trinity", "messages": [{"role": "user", "content": "x" * (1 << 20)}]})
    long = [{"role": "user", "content": "word " * 50_000}]  # 250,000 characters, under 1 MiB

    assert_error(client.post("/v1/chat/completions", content=huge), 413, "request_too_large")
    assert_error(chat(client, messages=long), 400, "messages_too_long")
    assert saved_runs() == []


def test_a_task_no_context_holds_is_400_even_when_streaming(tmp_path: Path) -> None:
    pool = write_pool(tmp_path, {"name": "tiny", "models": [
        {"name": "small", "kind": "scripted", "n_ctx": 256, "default": "ok"}]})
    long = [{"role": "user", "content": "apple " * 2000}]
    with TestClient(create_app(ServeOptions(pool=str(pool)))) as client:
        plain = chat(client, messages=long)
        streamed = chat(client, messages=long, stream=True)

    assert_error(plain, 400, "context_length_exceeded")
    assert_error(streamed, 400, "context_length_exceeded")
    assert saved_runs() == []


def test_unreachable_backend_is_503_and_the_server_keeps_serving(tmp_path: Path) -> None:
    pool = write_pool(tmp_path, {"name": "mixed", "models": [
        {"name": "m0", "kind": "scripted", "rules": [{"match": "Solve the task now", "reply": "Answer: 84"}],
         "default": "Answer: 84"},
        {"name": "down", "kind": "openai", "base_url": f"http://127.0.0.1:{free_port()}/v1", "model": "x",
         "max_retries": 0, "timeout_s": 5},
    ]})
    with TestClient(create_app(ServeOptions(pool=str(pool)))) as client:
        failed = chat(client, exclude=["m0"])
        with client.stream("POST", "/v1/chat/completions", json={
                "model": "trinity", "messages": QUESTION, "exclude": ["m0"], "stream": True}) as response:
            status, streamed = response.status_code, response.read().decode()
        recovered = chat(client, exclude=["down"])

    error = assert_error(failed, 503, "backend_unavailable", "down")
    assert error["type"] == "server_error"
    assert status == 200
    _, data = sse_events(streamed)
    assert data[-1]["error"]["code"] == "backend_unavailable" and "[DONE]" not in data
    assert recovered.status_code == 200 and recovered.json()["choices"][0]["message"]["content"] == "84"
    assert saved_runs() == [recovered.headers["X-Trinity-Run"]]  # failed episodes leave no run


def test_unexpected_failure_is_500_without_a_traceback(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, trinity_home: Path
) -> None:
    from trinity_cli.ask import answer as ask

    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("secret internals")

    # The patch ends before the recovery request (conftest's home is patched apart, so it stays).
    with monkeypatch.context() as patched:
        patched.setattr(ask, "ask", boom)
        error = assert_error(chat(client), 500, needle="internal error (RuntimeError)")
    assert "secret internals" not in error["message"]
    recovered = chat(client)
    assert recovered.status_code == 200
    assert (trinity_home / "runs" / recovered.headers["X-Trinity-Run"]).is_dir()  # in the test's home


def test_unknown_route_has_an_openai_error_body(client: TestClient) -> None:
    assert_error(client.get("/v1/nothing"), 404)
    assert_error(client.get("/v1/chat/completions"), 405)


def test_cli_refuses_a_port_in_use(pool_file: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        monkeypatch.setattr(sys, "argv", ["trinity", "serve", "--pool", str(pool_file), "--port", str(port)])
        with pytest.raises(SystemExit) as info:
            entry.main()
    assert info.value.code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


# -- the real server under load -----------------------------------------------------------


@pytest.fixture
def live_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """`python -m trinity_cli serve` on a free port with bearer auth; (base URL, log file)."""
    rules = [{"match": rf"item-{i:02d}\b", "reply": f"Answer: {i * i}"} for i in range(20)]
    pool = scripted_pool(tmp_path, rules=rules)
    monkeypatch.setenv(KEY_VAR, KEY)
    port = free_port()
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "trinity_cli", "serve", "--pool", str(pool), "--port", str(port),
               "--api-key-env", KEY_VAR, "--max-turns", "2"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{base_url}/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield base_url, log
        assert process.poll() is None, "the server died:\n" + log.read_text()
    finally:
        stop_process(process)


def test_real_server_answers_20_parallel_openai_clients(live_server: tuple[str, Path]) -> None:
    base_url, log = live_server
    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=60)

    def ask(i: int) -> str:
        reply = client.chat.completions.create(
            model="trinity", messages=[{"role": "user", "content": f"item-{i:02d}: what is {i} squared?"}]
        )
        assert reply.usage is not None and reply.usage.total_tokens > 0
        return reply.choices[0].message.content or ""

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(ask, range(20)))

    assert answers == [f"{i * i}" for i in range(20)]

    stream = client.chat.completions.create(
        model="trinity/untrained", messages=[{"role": "user", "content": "item-07: 7 squared?"}],
        stream=True, stream_options={"include_usage": True}, extra_body={"max_turns": 1},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "49"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0

    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "item-01"}])
    assert [m.id for m in client.models.list()] == ["trinity", "trinity/untrained", "trinity/agree",
                                                    "trinity/conductor", "trinity/drafts", "trinity/drafts-told"]
    assert len(RunStore().list()) == 21

    output = log.read_text()
    assert f"{base_url}" in output and "trinity, trinity/untrained" in output
    # Start-up says what it loads before it listens (a log has no live display).
    assert output.index("trinity serve: loading pool scripted") < output.index(base_url)
    assert KEY not in output and "Traceback" not in output


def test_a_streaming_openai_client_sees_each_turn_before_the_episode_ends(tmp_path: Path) -> None:
    """Through the official client: every turn arrives as `reasoning_content` while the
    episode runs (each call takes 1 s here), the answer as `content` at the end."""
    rules = [{"match": "Solve it independently", "reply": "Answer: 85\nVerdict: REVISE"},
             {"match": "Solve the task now", "reply": "Answer: 84"}]
    pool = write_pool(tmp_path, {"name": "slow", "models": [
        {"name": "m0", "kind": "scripted", "rules": rules, "default": "Answer: 84", "delay_s": 1.0}]})
    port = free_port()
    command = [sys.executable, "-m", "trinity_cli", "serve", "--pool", str(pool), "--port", str(port),
               "--head", "untrained"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=60)
        deadline = time.monotonic() + 60
        while True:
            try:
                client.models.list()
                break
            except openai.APIConnectionError:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        start = time.monotonic()
        seen: list[tuple[float, str, str]] = []
        stream = client.chat.completions.create(
            model="trinity", messages=[{"role": "user", "content": "What is 12*7?"}], stream=True,
            extra_body={"max_turns": 3, "seed": 1})
        for event in stream:
            if event.choices:
                delta = event.choices[0].delta
                reasoning = (delta.model_extra or {}).get("reasoning_content")
                if reasoning:
                    seen.append((time.monotonic() - start, "reasoning", reasoning))
                if delta.content:
                    seen.append((time.monotonic() - start, "content", delta.content))
    finally:
        stop_process(process)
    ended = [t for t, kind, text in seen if kind == "reasoning" and " tokens, " in text]  # each turn's last line
    answer = [t for t, kind, _ in seen if kind == "content"]
    assert len(ended) == 3 and "".join(text for _, kind, text in seen if kind == "content") == "84"
    # The first turn is on the client a whole model call (or more) before the answer.
    assert answer[0] - ended[0] > 0.9, seen


def test_a_client_leaving_a_stream_early_still_gets_its_run_saved(client: TestClient) -> None:
    body = {"model": "trinity", "messages": QUESTION, "stream": True}
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        run_id = response.headers["X-Trinity-Run"]
        first = next(response.iter_bytes())
    assert first.startswith(f'data: {{"id": "chatcmpl-{run_id}"'.encode())
    deadline = time.monotonic() + 10
    while run_id not in saved_runs() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert RunStore().load(run_id)["transcript"]["answer"]
    assert chat(client).status_code == 200  # the server is free for the next request
