"""serve/protocol.py works on plain bytes and dicts: no FastAPI needed to validate a
request or build a response."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trinity_cli.errors import BackendUnavailable, ContextOverflow
from trinity_cli.serve.protocol import ApiError, api_error, parse_request, sse


def test_protocol_imports_no_web_framework() -> None:
    code = ("import sys, trinity_cli.serve.protocol; "
            "print(sorted(m for m in ('fastapi', 'starlette', 'uvicorn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_parse_request_validates_and_reads_extensions() -> None:
    body = json.dumps({"model": "trinity/h", "messages": [{"role": "system", "content": "be brief"},
                                                          {"role": "user", "content": [{"type": "text", "text": "Q"}]}],
                       "stream": True, "stream_options": {"include_usage": True}, "exclude": ["b", "b"],
                       "max_turns": 2, "seed": 3}).encode()
    req = parse_request(body, ["a", "b"], ["trinity", "trinity/h"])
    assert (req.head, req.task, req.stream, req.include_usage, req.exclude, req.max_turns, req.seed) == (
        "h", "Q", True, True, ["b"], 2, 3)
    assert [(m.role, m.content) for m in req.context] == [("system", "be brief")]
    with pytest.raises(ApiError) as bad:
        parse_request(b'{"model": "trinity", "messages": [], "n": 2}', ["a"], ["trinity"])
    assert bad.value.status == 400 and bad.value.body()["error"]["param"] == "messages"
    with pytest.raises(ApiError) as unknown:
        parse_request(b'{"model": "trinty", "messages": [{"role": "user", "content": "Q"}]}', ["a"], ["trinity"])
    assert unknown.value.status == 404 and "trinity" in unknown.value.message


def test_errors_map_to_openai_statuses_and_events_are_one_line() -> None:
    assert api_error(BackendUnavailable("down")).status == 503
    assert api_error(ContextOverflow("long")).body()["error"]["code"] == "context_length_exceeded"
    assert api_error(RuntimeError("secret")).body()["error"]["message"].startswith("internal error (RuntimeError)")
    assert sse({"x": "é"}) == 'data: {"x": "é"}\n\n'.encode()
