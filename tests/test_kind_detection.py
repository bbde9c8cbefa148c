"""Kind detection measured on the labelled set (tests/data/kind_set.jsonl, rebuilt by
scripts/build_kind_set.py): the targets asserted on its train part, the held-out figures that
docs/kind_detection.md quotes checked against what scripts/analysis/kind_detection.py prints,
the examples the issue names, the yes/no form of a short answer, and `--kind-from detect`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from trinity_cli.answer_kinds import answer_kind, detect, played_as, score_item
from trinity_cli.answer_kinds.short import yes_no_form
from trinity_cli.bench.matrix import MatrixOptions, sample_matrix
from trinity_cli.bench.options import BenchOptions
from trinity_cli.bench.runner import bench
from trinity_cli.errors import ConfigError
from trinity_cli.tasks.items import TaskItem
from trinity_cli.tasks.registry import load_split
from trinity_cli.turns.answer_text import answer_text
from trinity_cli.turns.program import OUTPUT_HEADER

from .conftest import write_pool

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "kind_detection.md"


def _script(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measure() -> ModuleType:
    return _script("scripts/analysis/kind_detection.py", "kind_detection")


def test_the_labelled_set_is_what_the_script_builds_from_the_shipped_data() -> None:
    build = _script("scripts/build_kind_set.py", "build_kind_set")
    assert (ROOT / "tests" / "data" / "kind_set.jsonl").read_text(encoding="utf-8") == build.render(build.build())
    rows = [json.loads(line) for line in (ROOT / "tests" / "data" / "kind_set.jsonl").read_text().splitlines()]
    assert len(rows) >= 400 and sum(row["source"] == "own" for row in rows) >= 100
    # IFEval's test items are never in it; IFBench only held out (the transfer set).
    test_ids = {f"ifeval/{line.strip()}" for line in (ROOT / "tests" / "data" / "ifeval_test_ids.txt").read_text()
                .splitlines() if line.strip() and not line.startswith("#")}
    assert test_ids and not test_ids & {row["id"] for row in rows}
    assert all(row["split"] == "heldout" for row in rows if row["source"] == "ifbench")
    train_ids = {f"gsm8k/{item.id}" for item in load_split("gsm8k", "train")}
    assert all(row["id"] in train_ids for row in rows if row["source"] == "gsm8k" and row["split"] == "train")
    assert not any(row["id"] in train_ids for row in rows if row["source"] == "gsm8k" and row["split"] == "heldout")
    # Each fresh part is all in its own split and no other request is (fresh2: never chosen on).
    for name, least in (("fresh", 160), ("fresh2", 199)):
        fresh = [row for row in rows if row["source"] == name]
        assert len(fresh) >= least and all(row["split"] == name for row in fresh)
        assert all(row["source"] == name for row in rows if row["split"] == name)
        assert not {row["text"] for row in fresh} & {row["text"] for row in rows if row["source"] != name}


@pytest.mark.parametrize("split", ["train", "heldout", "fresh"])
def test_detection_meets_its_targets_where_the_rules_were_chosen(measure: ModuleType, split: str) -> None:
    """Issue 86's targets on the parts the rules were chosen on (the train part, the first
    held-out part since the second round, the fresh part since the third): at most 2% of
    free-form requests sent to the short path and at most 2% of short questions sent to
    free-form; code read as code; every IFBench prompt free-form."""
    rows = measure.load(split)
    read = [(row["kind"], measure.path_of(detect(row["text"]))) for row in rows]
    free = [path for kind, path in read if kind == "freeform"]
    short = [path for kind, path in read if kind == "short"]
    code = [path for kind, path in read if kind == "code"]
    assert len(free) > 90 and len(short) > 55 and len(code) > 15
    assert free.count("short") <= 0.02 * len(free)
    assert short.count("freeform") <= 0.02 * len(short)
    assert code.count("code") >= 0.95 * len(code)
    assert all(measure.path_of(detect(row["text"])) == "freeform" for row in rows if row["source"] == "ifbench")


@pytest.mark.parametrize("split", ["train", "heldout", "fresh", "fresh2"])
def test_the_figures_in_the_docs_are_what_the_script_prints(measure: ModuleType, split: str) -> None:
    assert measure.report(measure.load(split), split) in DOC.read_text(encoding="utf-8")


@pytest.mark.parametrize(("request_text", "kind"), [
    ("Give me a step-by-step plan to learn basic Spanish in one month.", "freeform"),
    ("Compare TCP and UDP in a table with three rows.", "freeform"),
    ("Idea for empire where consciousnesses are forever suffering The response must start with a verb.", "freeform"),
    ("Can even the simplest lines of dialogue like 'So...About that date...' have deep emotional and narrative "
     "significance?", "freeform"),
    ("Use at least 85 unique words in the response. what is lua code?", "freeform"),
    ("hello", "freeform"),
    # Third round (docs/kind_detection.md): a yes/no question of fact is short, a request or a judgement is not.
    ("Does water expand when it freezes?", None),
    ("Can you recommend a laptop for students?", "freeform"),
    ("Is coffee bad for you?", "freeform"),
    ("Create a Dockerfile for a Flask app.", "code"),
    ("What is 17 * 23?", None),
    ("Is 221 prime? Answer yes or no.", None),
    ("How many ounces are in a pound?", None),
    ("Write a Python function that reverses a string", "code"),
    # Misreads of the first held-out part, read as meant since (docs/kind_detection.md).
    ("What's the difference between a virus and a bacterium?", "freeform"),
    ("Which is heavier: a kilogram of feathers or a pound of steel? Answer with one word.", None),
    ("If a shirt costs $40 and is 25% off, what is the sale price?", None),
    ("Write an angry rap bash script that downloads all files from a given directory.", "freeform"),
    ("Write python code to extract a filename from filepath. Only output this sentence here.", "freeform"),
    ("Try to explain what this function do: ```python\ndef f(x):\n    return x\n```", "freeform"),
    ("Include exactly 15 numbers in the response. what is the meaning of life?", "freeform"),
])
def test_the_issues_examples_are_read_as_meant(request_text: str, kind: str | None) -> None:
    assert detect(request_text) == kind


def test_benchmark_items_as_shipped_keep_their_kind() -> None:
    for task, kind in (("gsm8k", "numeric"), ("arc-challenge", "choice"), ("mmlu", "choice"), ("mbpp", "code")):
        assert {detect(item.prompt) for item in load_split(task, "train")[:50]} == {kind}, task


def test_a_yes_or_no_question_is_answered_yes_or_no_and_scoring_is_untouched() -> None:
    assert yes_no_form("False", "Is 221 prime? Answer yes or no.") == "no"
    assert yes_no_form("True", "Is 97 prime?") == "yes"
    assert yes_no_form("**Yes.**", "Yes or no: is a tomato a fruit?") == "yes"
    assert yes_no_form("False", "What does bool(0) print?") == "False"  # not asked yes or no
    assert yes_no_form("221", "Is 221 prime? Answer yes or no.") == "221"
    # A reply that opens with its verdict and explains it: the verdict alone where "yes or no" is
    # asked in so many words (a real reply of the default pool), the whole reply otherwise.
    assert yes_no_form("Yes, 221 is a prime number.", "Is 221 prime? Answer yes or no.") == "yes"
    assert yes_no_form("**No** - it is 13 * 17.", "Yes or no: is 221 prime?") == "no"
    assert yes_no_form("Yes, 221 is a prime number.", "Is 221 prime?") == "Yes, 221 is a prime number."
    assert yes_no_form("Nobody knows.", "Is it known? Answer yes or no.") == "Nobody knows."
    # A program member's reply as recorded (turns/program.py): what it printed is the answer.
    program = ("```python\nprint(all(221 % d for d in range(2, 15)))\n```" + OUTPUT_HEADER + "False\n```\n"
               "Answer: False")
    short = answer_kind(None)
    assert answer_text(program, short, "Is 221 prime? Answer yes or no.") == "no"
    assert answer_text(program, short) == "False"  # no question: as the program printed it
    assert answer_text("Answer: True", answer_kind("exact"), "Is 97 prime?") == "yes"
    assert answer_kind("code").as_asked("True", "Is it? Answer yes or no.") == "True"
    assert score_item(TaskItem("file:x", "1", "Is 221 prime?", "False", "exact"), program) == 1.0


def test_kind_from_detect_plays_ifeval_and_ifbench_as_ask_reads_them() -> None:
    items = load_split("ifeval", "train")[:20] + load_split("gsm8k", "train")[:5]
    assert played_as(items, "preset") == items
    played = played_as(items, "detect")
    # IFEval scores with its own checkers: only the kind it is played as can change (here it
    # does not: detection reads every one of these prompts as free-form).
    assert [item.scorer for item in played[:20]] == ["freeform"] * 20
    assert played[20:] == items[20:]  # GSM8K is scored by its kind: the kind stays
    with pytest.raises(ConfigError, match="kind_from|kind-from"):
        played_as(items, "guess")


def _drafting_pool(tmp_path: Path) -> Path:
    """Two scripted members that answer every request with a short paragraph (m1 with a comma)."""
    return write_pool(tmp_path, {"name": "writers", "models": [
        {"name": "m0", "kind": "scripted", "rules": [], "default": "A short answer without any comma at all."},
        {"name": "m1", "kind": "scripted", "rules": [], "default": "A short answer, with one comma."}]})


def test_matrix_and_bench_rows_with_detection_equal_the_preset_rows_on_ifeval(tmp_path: Path) -> None:
    """Detection reads every one of these IFEval prompts as free-form, their preset kind: the
    rows `ask` would give equal the preset rows, on a scripted pool (no model loads)."""
    pool = _drafting_pool(tmp_path)
    items = load_split("ifeval", "val")[:4]
    assert {detect(item.prompt) for item in items} == {"freeform"}
    preset, detected = (sample_matrix(MatrixOptions(pool=str(pool), tasks="ifeval", split="val", n=4, k=2,
                                                    kind_from=kind_from)) for kind_from in ("preset", "detect"))
    assert "drafts" in preset and preset == detected
    runs = [bench(BenchOptions(pool=str(pool), tasks="ifeval:val:4", systems=["single", "agree"], random_seeds=0,
                               kind_from=kind_from)).data for kind_from in ("preset", "detect")]
    assert runs[0]["options"]["kind_from"] == "preset" and runs[1]["options"]["kind_from"] == "detect"
    assert runs[0]["per_item"] == runs[1]["per_item"] and runs[0]["per_item"]
    assert runs[0]["results"].keys() == runs[1]["results"].keys()
    with pytest.raises(ConfigError, match="kind_from|kind-from"):
        bench(BenchOptions(pool=str(pool), tasks="ifeval:val:4", kind_from="guessed"))
