"""How well what a reply shows tells right answers from wrong, on a sample matrix
(bench/matrix.py), at no model call: for each feature of a member's greedy reply, the AUC
over that member's replies, per task and over all.

Features of member m's greedy reply to an item (oriented so that higher should mean right):
    confidence  its tokens' mean log-probability (logprob_stats "mean": backends/confidence.py)
    tail        the mean over its last 16 tokens ("tail")
    low         its lowest 16-token window ("low")
    certainty   minus the mean entropy of its tokens' distributions
    agreement   how many other members' greedy replies give the same final answer (not code)
    consistent  1 when the member's own fresh attempt gives the same final answer (k >= 2;
                SLM-MUX's self-consistency), else 0 (not code)
    examples    1 when its code passed the task's shown examples, else 0 (code only)
    finished    1 when it stopped on its own, 0 when it reached its token cap
    short       minus its reply tokens
A reply lacking a feature (no log-probabilities recorded, another kind of task) is left out
of that feature's AUC. AUC = P(the feature of a right reply > that of a wrong one) + half the
ties (Mann-Whitney), None when the member has no right or no wrong reply with it.

Result (`signal_table`): {"features": [...], "auc": {member: {task | "all": {feature: AUC |
None}}}, "n": {member: {task | "all": {feature: replies with it}}}}.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from trinity_cli import tasks
from trinity_cli.answer_kinds import answer_kind
from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.bench.procedures import Matrix, Reply, samples
from trinity_cli.turns import settle

FEATURES = ("confidence", "tail", "low", "certainty", "agreement", "consistent", "examples", "finished", "short")


def auc(right: Sequence[float], wrong: Sequence[float]) -> float | None:
    """P(a right reply's value > a wrong one's) + half the ties; None when a side is empty."""
    if not right or not wrong:
        return None
    wins = sum((r > w) + 0.5 * (r == w) for r in right for w in wrong)
    return wins / (len(right) * len(wrong))


def _stat(reply: Reply, key: str, sign: float = 1.0) -> float | None:
    stats = reply.turn.logprob_stats or {}
    value = stats.get(key)
    return None if value is None else sign * float(value)


def _same(a: Reply, b: Reply, kind: AnswerKind) -> bool:
    mine, theirs = settle.answer_of(a.turn, kind), settle.answer_of(b.turn, kind)
    return mine is not None and theirs is not None and kind.same(mine, theirs)


def features(row: dict[str, list[Reply]], member: str, kind: AnswerKind) -> dict[str, float | None]:
    """The features of `member`'s greedy reply in one item's row (module docstring)."""
    mine = row[member][0]
    code = kind.judged
    finish = mine.turn.finish_reason
    return {
        "confidence": _stat(mine, "mean"), "tail": _stat(mine, "tail"), "low": _stat(mine, "low"),
        "certainty": _stat(mine, "entropy", -1.0),
        "agreement": None if code else float(sum(_same(mine, row[o][0], kind) for o in row if o != member)),
        "consistent": (None if code or len(samples(row)[member]) < 2 else float(_same(mine, row[member][1], kind))),
        "examples": None if mine.turn.examples_passed is None else float(mine.turn.examples_passed),
        "finished": None if finish is None else float(finish != "length"),
        "short": -float(mine.turn.completion_tokens),
    }


def signal_table(matrix: Matrix, items: Sequence[tasks.TaskItem], order: Sequence[str]) -> dict[str, Any]:
    """Every feature's AUC per member, per task (`order`) and over all (module docstring)."""
    members = list(next(iter(matrix.values())))
    scopes: list[tuple[str, Callable[[tasks.TaskItem], bool]]] = [
        *((t, lambda item, t=t: item.task == t) for t in order), ("all", lambda item: True)]
    table: dict[str, Any] = {"features": list(FEATURES), "auc": {}, "n": {}}
    kinds = {item.key: answer_kind(item.scorer) for item in items}
    rows = {item.key: {m: features(matrix[item.key], m, kinds[item.key]) for m in members} for item in items}
    for member in members:
        table["auc"][member], table["n"][member] = {}, {}
        for scope, within in scopes:
            chosen = [item for item in items if within(item)]
            aucs, counts = {}, {}
            for feature in FEATURES:
                right = [v for i in chosen if (v := rows[i.key][member][feature]) is not None
                         and matrix[i.key][member][0].correct]
                wrong = [v for i in chosen if (v := rows[i.key][member][feature]) is not None
                         and not matrix[i.key][member][0].correct]
                aucs[feature], counts[feature] = auc(right, wrong), len(right) + len(wrong)
            table["auc"][member][scope], table["n"][member][scope] = aucs, counts
    return table


def markdown(table: dict[str, Any]) -> str:
    """Each feature's AUC per member over all tasks, with how many replies had it."""
    members = list(table["auc"])
    lines = ["| feature (AUC over all tasks, replies) | " + " | ".join(members) + " |",
             "|---|" + "---|" * len(members)]
    for feature in table["features"]:
        cells = []
        for m in members:
            value, n = table["auc"][m]["all"][feature], table["n"][m]["all"][feature]
            cells.append("—" if value is None else f"{value:.2f} ({n})")
        lines.append(f"| {feature} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
