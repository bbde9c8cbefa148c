"""Mix parsing and sampling, and user task files (hermetic: no packaged data needed)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from trinity_cli.answer_kinds import score_item
from trinity_cli.errors import ConfigError
from trinity_cli.tasks.mix import MixEntry, format_mix, parse_mix, sample_items
from trinity_cli.tasks.registry import load_split, split_sizes
from trinity_cli.tasks.userfile import load_jsonl

DATA = Path(__file__).parent / "data"


@pytest.fixture
def numeric_file(tmp_path: Path) -> Path:
    path = tmp_path / "sums.jsonl"
    lines = [
        json.dumps({"id": f"q{i}", "prompt": f"What is {i} + {i}?", "answer": 2 * i, "scorer": "numeric"})
        for i in range(60)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------- parse_mix


def test_parse_mix() -> None:
    assert parse_mix("gsm8k:train,arc-challenge:test:200") == [
        ("gsm8k", "train", None, 1),
        ("arc-challenge", "test", 200, 1),
    ]
    assert parse_mix(" mmlu : validation , humaneval:test:5 ,") == [
        MixEntry("mmlu", "val", None),
        MixEntry("humaneval", "test", 5),
    ]
    assert parse_mix("gsm8k:train,gsm8k:val") == [MixEntry("gsm8k", "train"), MixEntry("gsm8k", "val")]


def test_format_mix_round_trips() -> None:
    text = "gsm8k:train,mbpp:test:20"
    assert format_mix(parse_mix(text)) == text


def test_parse_mix_file_entries(numeric_file: Path) -> None:
    assert parse_mix(f"file:{numeric_file}:test:5") == [MixEntry(f"file:{numeric_file}", "test", 5)]
    assert parse_mix(f"file:{numeric_file}:all") == [MixEntry(f"file:{numeric_file}", "all", None)]


@pytest.mark.parametrize(
    ("mix", "message", "hint"),
    [
        ("gsm8:train", "unknown task 'gsm8'", "gsm8k"),
        ("gsm8k", "names no split", "gsm8k:train"),
        ("gsm8k:trian", "unknown split 'trian'", "train"),
        ("gsm8k:train:0", "neither a positive integer", "gsm8k:train:100"),
        ("gsm8k:train:ten", "neither a positive integer", ""),
        ("gsm8k:train:-3", "neither a positive integer", ""),
        ("gsm8k:train:5:6", "too many", "TASK:SPLIT"),
        ("", "empty", "TASK:SPLIT"),
        (" , ", "empty", ""),
        ("gsm8k:train,gsm8k:train:10", "twice", "merge"),
        ("gsm8k:all,gsm8k:test", "all", ""),
        ("file:/no/such/file.jsonl:test", "not found", ""),
        ("file:", "no split", ""),
    ],
)
def test_parse_mix_errors(mix: str, message: str, hint: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_mix(mix)
    assert message in err.value.message
    assert "\n" not in err.value.message
    assert err.value.hint and hint in err.value.hint


# --------------------------------------------------------------------------- sample_items


def test_sampling_is_deterministic_and_seed_dependent(numeric_file: Path) -> None:
    mix = f"file:{numeric_file}:train:10,file:{numeric_file}:test"
    first = sample_items(mix, seed=7)
    random.seed(12345)  # global state must not matter
    again = sample_items(mix, seed=7)
    assert [i.id for i in first] == [i.id for i in again]
    assert len(first) == 10 + len(load_split(f"file:{numeric_file}", "test"))
    other = sample_items(mix, seed=8)
    assert [i.id for i in other] != [i.id for i in first]


def test_sampling_draws_from_the_named_split_only(numeric_file: Path) -> None:
    task = f"file:{numeric_file}"
    train_ids = {item.id for item in load_split(task, "train")}
    for seed in range(5):
        drawn = sample_items([MixEntry(task, "train", 8)], seed=seed)
        assert len(drawn) == 8 and {item.id for item in drawn} <= train_ids


def test_larger_draws_keep_the_smaller_ones(numeric_file: Path) -> None:
    task = f"file:{numeric_file}"
    small = {item.id for item in sample_items(f"{task}:train:5", seed=3)}
    large = {item.id for item in sample_items(f"{task}:train:15", seed=3)}
    assert small < large


def test_asking_for_more_items_than_the_split_holds(numeric_file: Path) -> None:
    with pytest.raises(ConfigError) as err:
        sample_items(f"file:{numeric_file}:test:500", seed=0)
    assert "asks for 500 items" in err.value.message


def test_seed_must_be_an_integer(numeric_file: Path) -> None:
    with pytest.raises(ConfigError):
        sample_items(f"file:{numeric_file}:test", seed="0")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- user task files


def test_user_file_loads_every_scorer() -> None:
    path = DATA / "user_tasks.jsonl"
    items = load_jsonl(path)
    assert [item.id for item in items] == ["mul", "half", "planet", "capital", "add", "line-7"]
    assert {item.scorer for item in items} == {"numeric", "math", "choice", "exact", "code"}
    by_id = {item.id: item for item in items}
    assert by_id["planet"].reference == "B"
    assert by_id["add"].reference == {
        "tests": "assert add(1, 2) == 3\nassert add(-1, 1) == 0",
        "prelude": "",
        "entry_point": None,
        "timeout_s": 10.0,
    }
    replies = {
        "mul": "12 * 7 = 84\nAnswer: 84",
        "half": r"$\boxed{\dfrac12}$",
        "planet": "Jupiter is the largest.\nAnswer: B",
        "capital": "Answer: Paris",
        "add": "```python\ndef add(a, b):\n    return a + b\n```",
        "line-7": "Answer: 1234",
    }
    for item_id, reply in replies.items():
        assert score_item(by_id[item_id], reply) == 1.0, item_id
    assert score_item(by_id["mul"], "Answer: 85") == 0.0


def test_user_file_splits_do_not_depend_on_the_path_spelling(numeric_file: Path, monkeypatch) -> None:
    monkeypatch.chdir(numeric_file.parent)
    absolute = [item.id for item in load_split(f"file:{numeric_file}", "test")]
    relative = [item.id for item in load_split(f"file:{numeric_file.name}", "test")]
    assert absolute == relative and absolute
    sizes = split_sizes(f"file:{numeric_file}")
    assert sum(sizes.values()) == 60


@pytest.mark.parametrize(
    ("lines", "message", "hint"),
    [
        (
            ['{"prompt": "q", "answer": 1, "scorer": "numeric"}', "{not json"],
            ":2: not valid JSON",
            "one JSON",
        ),
        (['{"prompt": "q", "anwser": 1, "scorer": "numeric"}'], ":1: unknown field 'anwser'", "answer"),
        (['{"prompt": "q", "answer": 1}'], ":1: missing field 'scorer'", ""),
        (['{"prompt": "q", "answer": 1, "scorer": 3}'], ":1: 'scorer' must name an answer kind", "numeric"),
        (['{"prompt": "", "answer": 1, "scorer": "numeric"}'], "'prompt' must be a non-empty string", ""),
        (['{"prompt": "q", "answer": "lots", "scorer": "numeric"}'], "is not a number", "1,234"),
        (['{"prompt": "q", "answer": "F", "scorer": "choice"}'], "letter A-E", ""),
        (['{"prompt": "q", "answer": "def (", "scorer": "code"}'], "not valid Python", ""),
        (
            ['{"prompt": "q", "answer": {"test": "x"}, "scorer": "code"}'],
            "unknown code answer field",
            "tests",
        ),
        (
            ['{"prompt": "q", "answer": {"tests": "assert 1", "examples": "assert (("}, "scorer": "code"}'],
            "the examples are not valid Python",
            "examples",
        ),
        (
            ['{"prompt": "q", "answer": {"tests": "assert 1", "examples": 3}, "scorer": "code"}'],
            "'examples' must be test code",
            "assert",
        ),
        (["[1, 2]"], "expected a JSON object", ""),
        (
            [
                '{"id": "a", "prompt": "q", "answer": 1, "scorer": "numeric"}',
                '{"id": "a", "prompt": "r", "answer": 2, "scorer": "numeric"}',
            ],
            ":2: id 'a' already used on line 1",
            "",
        ),
        ([""], "has no items", ""),
    ],
)
def test_user_file_errors_name_file_and_line(
    tmp_path: Path, lines: list[str], message: str, hint: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as err:
        load_jsonl(path)
    assert str(path) in err.value.message
    assert message in err.value.message
    assert "\n" not in err.value.message
    assert err.value.hint is not None and hint in err.value.hint


def test_user_file_code_examples_are_kept_apart_from_the_tests(tmp_path: Path) -> None:
    path = tmp_path / "code.jsonl"
    path.write_text(json.dumps({"prompt": "Write f. f(1) == 2", "scorer": "code", "answer": {
        "tests": "assert f(5) == 6", "examples": ["assert f(1) == 2"]}}) + "\n"
                    + json.dumps({"prompt": "Write g.", "scorer": "code", "answer": "assert g() == 1"}) + "\n")
    with_examples, without = load_jsonl(path)
    assert with_examples.reference["examples"] == "assert f(1) == 2"
    assert with_examples.reference["tests"] == "assert f(5) == 6"
    assert "examples" not in without.reference


def test_missing_user_file() -> None:
    with pytest.raises(ConfigError, match="task file not found"):
        load_jsonl("/no/such/tasks.jsonl")


def test_a_range_takes_the_items_ranked_between_its_ends() -> None:
    assert parse_mix("gsm8k:test:101-200") == [("gsm8k", "test", 100, 101)]
    assert str(parse_mix("gsm8k:test:101-200")[0]) == "gsm8k:test:101-200"
    first, rest, both = (sample_items(m, seed=3) for m in ("gsm8k:test:100", "gsm8k:test:101-200", "gsm8k:test:200"))
    assert len(rest) == 100
    assert {i.id for i in rest} == {i.id for i in both} - {i.id for i in first}
    for bad in ("gsm8k:test:200-101", "gsm8k:test:0-5", "gsm8k:test:a-b"):
        with pytest.raises(ConfigError, match="neither a positive integer nor a range"):
            parse_mix(bad)
    with pytest.raises(ConfigError, match="up to rank"):
        sample_items("gsm8k:test:50-100000", seed=0)
