"""The `ifeval` and `ifbench` task families: IFEval's 541 prompts (Zhou et al., 2023) and IFBench's
test prompts (Pyatkin et al., 2025), each with its verifiable instructions, scored by the
benchmarks' own checkers (tasks/ifeval_checks.py).

Data: `data/ifeval.jsonl.gz` and `data/ifbench.jsonl.gz` (data/ATTRIBUTION.md), one record a line:
{"key": the benchmark's own id, "prompt": str, "instruction_id_list": [str], "kwargs": [dict]}.

Items: id = str(key), prompt = the benchmark's prompt exactly (IFEval is asked with the prompt
alone), answer kind `freeform`; reference = {"benchmark", "prompt", "instruction_id_list",
"kwargs"}. The family's scorer is IFEval's prompt-level strict accuracy (1.0 when the answer
follows every instruction); `score_all` gives the four figures the papers report.

Splits (tasks/registry.py, `TaskFamily.split_counts`): IFEval's items in hash order, the first
150 test, the next 100 val, the other 291 train; IFBench is a transfer set, nothing is chosen
on it: every item is test. IFBench items holding an instruction its checkers cannot run offline
(`ifeval_checks.UNSCORABLE`) are left out.

trinity's own constraint checks (answer_kinds/constraints.py), which an episode runs on every draft,
read the prompt's words alone (the kind's `checks` of a reference that is not a list): they
never see these references.
"""

from __future__ import annotations

from typing import Any

from trinity_cli.tasks.answer_body import answer_body
from trinity_cli.tasks.ifeval_checks import UNSCORABLE, Scores, evaluate
from trinity_cli.tasks.items import TaskItem
from trinity_cli.tasks.packaged import shipped_records


def _load(benchmark: str) -> list[TaskItem]:
    items = []
    for doc in shipped_records(benchmark):
        if UNSCORABLE & set(doc["instruction_id_list"]):
            continue
        reference = {"benchmark": benchmark, "prompt": doc["prompt"],
                     "instruction_id_list": doc["instruction_id_list"], "kwargs": doc["kwargs"]}
        items.append(TaskItem(task=benchmark, id=str(doc["key"]), prompt=doc["prompt"], reference=reference,
                              scorer="freeform"))
    return items


def load_ifeval() -> list[TaskItem]:
    return _load("ifeval")


def load_ifbench() -> list[TaskItem]:
    return _load("ifbench")


def score_all(output: str, reference: dict[str, Any]) -> Scores:
    """Prompt- and instruction-level, strict and loose, of one answer (ifeval_checks.evaluate)."""
    return evaluate(reference["benchmark"], reference["prompt"], reference["instruction_id_list"],
                    reference["kwargs"], output)


def score(output: str, reference: Any) -> float:
    """Prompt-level strict: 1.0 when the answer `output` gives (answer_body.py: what `ask` prints)
    follows every instruction (0.0 for odd input)."""
    if not isinstance(reference, dict) or "instruction_id_list" not in reference:
        return 0.0
    return score_all(answer_body(output), reference).prompt_strict
