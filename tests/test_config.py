from __future__ import annotations

import pytest

from trinity_cli.errors import ConfigError, NotFound
from trinity_cli.pool_config import load_pool, parse_pool


def test_bundled_default_pool_validates() -> None:
    pool = load_pool(None)
    assert pool.name == "local"
    assert len(pool.models) >= 3
    assert all(m.kind == "gguf" for m in pool.models)


def test_unknown_key_names_file_model_and_field() -> None:
    text = """
name: p
models:
  - name: alpha
    kind: scripted
    n_ctxx: 10
"""
    with pytest.raises(ConfigError) as info:
        parse_pool(text, "pools/p.yaml")
    msg = info.value.message
    assert "pools/p.yaml" in msg and "'alpha'" in msg and "n_ctxx" in msg and "unknown field" in msg


def test_bad_type_names_field() -> None:
    text = "name: p\nmodels:\n  - {name: a, kind: gguf, weights: {path: /x.gguf}, n_ctx: lots}\n"
    with pytest.raises(ConfigError) as info:
        parse_pool(text, "p.yaml")
    assert "'a'" in info.value.message and "n_ctx" in info.value.message


def test_weights_need_exactly_one_source() -> None:
    text = "name: p\nmodels:\n  - {name: a, kind: gguf, weights: {path: /x, hf: {repo: r, file: f}}}\n"
    with pytest.raises(ConfigError, match="exactly one"):
        parse_pool(text, "p.yaml")


def test_bad_yaml_reports_line() -> None:
    with pytest.raises(ConfigError, match="line"):
        parse_pool("name: p\nmodels: [\n  - a: b\n", "p.yaml")


def test_duplicate_names_rejected() -> None:
    text = "name: p\nmodels:\n  - {name: a, kind: scripted}\n  - {name: a, kind: scripted}\n"
    with pytest.raises(ConfigError, match="twice"):
        parse_pool(text, "p.yaml")


def test_api_key_env_must_be_a_variable_name() -> None:
    text = ("name: p\nmodels:\n  - {name: a, kind: openai, base_url: 'http://x/v1', model: m, "
            "api_key_env: 'sk-abc123-secret'}\n")
    with pytest.raises(ConfigError, match="api_key_env"):
        parse_pool(text, "p.yaml")


def test_unknown_pool_name_suggests() -> None:
    with pytest.raises(NotFound) as info:
        load_pool("locl")
    assert "local" in (info.value.hint or "")


def test_role_max_tokens_names_roles_and_positive_caps() -> None:
    base = "name: p\nmodels:\n  - {name: a, kind: scripted, role_max_tokens: %s}\n"
    caps = parse_pool(base % "{thinker: 96, verifier: 200}", "p.yaml").models[0].role_max_tokens
    assert caps == {"thinker": 96, "verifier": 200}
    with pytest.raises(ConfigError, match="role_max_tokens"):
        parse_pool(base % "{planner: 96}", "p.yaml")
    with pytest.raises(ConfigError, match="role_max_tokens"):
        parse_pool(base % "{thinker: 0}", "p.yaml")


def test_speculative_decoding_is_for_server_members_with_one_source(tmp_path) -> None:
    from trinity_cli.pool_config import parse_pool

    def pool(spec: str, runtime: str = "server") -> str:
        return (f"name: x\nmodels:\n  - {{name: a, kind: gguf, runtime: {runtime}, weights: {{path: a.gguf}}, "
                f"speculative: {spec}}}\n")

    assert parse_pool(pool("{ngram: {size_n: 4}}"), "p.yaml").models[0].speculative.ngram.size_n == 4
    assert parse_pool(pool("{draft: {path: d.gguf}, n_max: 8}"), "p.yaml").models[0].speculative.n_max == 8
    for spec, runtime, needle in (("{ngram: {}}", "inprocess", "needs runtime: server"),
                                  ("{}", "server", "exactly one of"),
                                  ("{ngram: {}, draft: {path: d.gguf}}", "server", "exactly one of")):
        with pytest.raises(ConfigError, match=needle):
            parse_pool(pool(spec, runtime), "p.yaml")
