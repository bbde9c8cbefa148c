"""The fixed procedures of a sample matrix (bench/matrix.py), computed at no model call,
and their Markdown table (what `trinity matrix` prints).

For every item, the accuracy and cost (calls, tokens, model seconds per item) of every fixed
procedure, per task, settled by turns/settle.py's own rules:

    single:M          the member's greedy reply
    sc:M@J            its first J replies, plurality (code: the latest passing its examples)
    agree:M1>M2..     members in that order, round-robin from the task alone, until two answers
                      agree (code: until one passes its examples); plurality at `budget` calls
    vote-all          plurality over every reply of every member
    cvote-all         the same, each reply weighing exp(its tokens' mean log-probability) (CISC's
                      confidence-weighted self-consistency; a reply without log-probabilities
                      weighs 1); code: the most confident reply among those passing their
                      examples (else among all)
    mux-all           the member whose own replies agree most (SLM-MUX): per member, the share
                      of its replies giving its plurality answer (code: passing its examples);
                      the highest share wins, ties to the most confident member, then pool
                      order; its plurality answer (code: its most confident passing reply)
    any-right         an item counts when any reply is right (a bound, not a procedure)

how well the shown examples tell right code from wrong (replies passing them, right or
wrong on the hidden tests); the Verifier table: outside code tasks a Verifier answers alone
(turns/rules.py), so a Verifier that checks a Worker's greedy answer is that member's reply
from the task alone (its greedy reply, or its second when it was the Worker) and ACCEPTs when
the answers agree: for each Verifier, the share of right answers it ACCEPTs and of wrong ones
it REVISEs, read off the matrix; and `best-procedure-per-task`: for each task the most
accurate procedure (ties: fewer tokens), chosen with the items' labels, so a reference like
bench's `best-per-task`, not a system; it is what a coordinator that knows which procedure
suits each task could reach on this loop. Each procedure is paired (exact McNemar,
bench/stats.py) with the best single member.

Result (`analyse`; the matrix file holds it too): {"paired", "models", "k", "budget", "tasks",
"table": {procedure: {task | "all": {"correct", "n", "calls", "tokens", "seconds"}}},
"any_right", "best_single", "best_procedure_per_task": {"correct", "n", "picks"},
"verifiers", "examples"}.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from trinity_cli import tasks
from trinity_cli.answer_kinds import answer_kind
from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.bench.stats import paired_test
from trinity_cli.messages import Turn
from trinity_cli.turns import settle

T = TypeVar("T")


@dataclass
class Reply:
    """One reply of a sample matrix: the turn (its messages dropped) and whether it was right."""

    turn: Turn
    correct: bool


Matrix = dict[str, dict[str, list[Reply]]]  # item key -> member -> replies, attempt order


@dataclass
class Outcome:
    correct: bool
    calls: int
    tokens: int
    seconds: float
    short: bool = False  # the matrix lacked an attempt the procedure asked for: it stopped there


def outcome(seq: Sequence[Reply], answer: str | None) -> Outcome:
    chosen = next((r for r in reversed(seq) if r.turn.reply == answer), None)
    return Outcome(bool(chosen and chosen.correct), len(seq),
                   sum(r.turn.prompt_tokens + r.turn.completion_tokens for r in seq),
                   sum(r.turn.latency_s for r in seq))


def _renumber(seq: Sequence[Reply]) -> list[Turn]:
    return [replace(r.turn, index=i) for i, r in enumerate(seq)]


def settle_all(seq: Sequence[Reply], kind: AnswerKind) -> Outcome:
    """Plurality over `seq` (code: the latest passing its examples), as an episode ends."""
    return outcome(seq, settle.settled_answer(_renumber(seq), kind))


def until_agreement(row: dict[str, list[Reply]], order: Sequence[str], kind: AnswerKind, budget: int) -> Outcome:
    """The `agree` procedure over `order`: round-robin, stop at the first agreement."""
    seq, found, missing = _agree_walk(row, order, kind, budget)
    done = outcome(seq, seq[found].turn.reply) if found is not None else settle_all(seq, kind)
    return replace(done, short=missing is not None)


def agree_wants(row: dict[str, list[Reply]], order: Sequence[str], kind: AnswerKind, budget: int) -> str | None:
    """The member whose next attempt `until_agreement` over `order` asks for and `row` does
    not hold, before it agrees or spends `budget` calls (None: it settles on what `row` holds)."""
    return _agree_walk(row, order, kind, budget)[2]


def _agree_walk(row: dict[str, list[Reply]], order: Sequence[str], kind: AnswerKind,
                budget: int) -> tuple[list[Reply], int | None, str | None]:
    """The replies `agree` reads, the index of the one it agrees on (None: none) and the
    member whose attempt it lacked when the row ran out (None: it did not)."""
    attempts = {m: 0 for m in order}
    seq: list[Reply] = []
    while len(seq) < budget:
        model = order[len(seq) % len(order)]
        if attempts[model] >= len(row[model]):
            return seq, None, model  # the matrix holds no more attempts of this member
        seq.append(row[model][attempts[model]])
        attempts[model] += 1
        found = settle.agreement(_renumber(seq), kind)
        if found is not None:
            return seq, found, None
    return seq, None, None


def procedures(models: Sequence[str], k: int) -> list[str]:
    names = [f"single:{m}" for m in models]
    names += [f"sc:{m}@{j}" for m in models for j in range(2, k + 1)]
    for size in range(1, len(models) + 1):
        names += ["agree:" + ">".join(order) for order in itertools.permutations(models, size)]
    return [*names, "vote-all", "cvote-all", "mux-all"]


def weight(reply: Reply) -> float:
    """How much a reply weighs in `cvote-all`: exp(mean log-probability of its tokens), 1
    without log-probabilities."""
    mean = (reply.turn.logprob_stats or {}).get("mean")
    return math.exp(mean) if mean is not None else 1.0


def _groups(seq: Sequence[Reply], kind: AnswerKind) -> list[list[Reply]]:
    """The answering replies of `seq` grouped by their final answer (not code)."""
    groups: list[list[Reply]] = []
    for reply in seq:
        mine = settle.answer_of(reply.turn, kind)
        if mine is None:
            continue
        for group in groups:
            theirs = settle.answer_of(group[0].turn, kind)
            if theirs is not None and kind.same(mine, theirs):
                group.append(reply)
                break
        else:
            groups.append([reply])
    return groups


def _most_confident(seq: Sequence[Reply], kind: AnswerKind) -> Reply | None:
    """The reply the confidence-weighted plurality settles on (module docstring, cvote-all)."""
    if kind.judged:
        passing = [r for r in seq if r.turn.examples_passed]
        pool = passing or list(seq)
        return max(pool, key=weight) if pool else None
    groups = _groups(seq, kind)
    if not groups:
        return None
    best = max(groups, key=lambda g: sum(weight(r) for r in g))
    return max(best, key=weight)


def _mux(row: dict[str, list[Reply]], kind: AnswerKind) -> Outcome:
    """SLM-MUX over the members' own replies (module docstring, mux-all)."""
    scored = []
    for i, (member, replies) in enumerate(row.items()):
        if kind.judged:
            share = sum(bool(r.turn.examples_passed) for r in replies) / len(replies)
        else:
            groups = _groups(replies, kind)
            share = max((len(g) for g in groups), default=0) / len(replies)
        confidence = sum(weight(r) for r in replies) / len(replies)
        scored.append((share, confidence, -i, member))
    member = max(scored)[3]
    chosen = _most_confident(row[member], kind)
    everything = [r for replies in row.values() for r in replies]
    return outcome(everything, chosen.turn.reply if chosen else None)


def samples(row: dict[str, list[T]]) -> dict[str, list[T]]:
    """A matrix row's samples: each member's first k replies, k the shortest non-empty list
    (the further attempts `agree` asked for, bench/matrix.py's `complete_agree`, left out)."""
    k = min((len(replies) for replies in row.values() if replies), default=0)
    return {m: replies[:k] for m, replies in row.items()}


def play(name: str, row: dict[str, list[Reply]], kind: AnswerKind, budget: int) -> Outcome:
    """Procedure `name` on one item's row: `agree` reads every attempt it needs, the others
    the row's `samples`."""
    if name.startswith("agree:"):
        return until_agreement(row, name[6:].split(">"), kind, budget)
    row = samples(row)
    if name.startswith("single:"):
        return outcome(row[name[7:]][:1], row[name[7:]][0].turn.reply)
    if name.startswith("sc:"):
        model, j = name[3:].rsplit("@", 1)
        return settle_all(row[model][: int(j)], kind)
    if name == "mux-all":
        return _mux(row, kind)
    ordered = [r for attempt in itertools.zip_longest(*row.values()) for r in attempt if r is not None]
    if name == "cvote-all":
        chosen = _most_confident(ordered, kind)
        return outcome(ordered, chosen.turn.reply if chosen else None)
    return settle_all(ordered, kind)


def analyse(matrix: Matrix, items: Sequence[tasks.TaskItem], budget: int, order: Sequence[str]) -> dict:
    """The table of every procedure per task (`order`: the mix's task order), the bound and
    best-procedure-per-task."""
    models = list(next(iter(matrix.values())))
    k = min(len(replies) for row in matrix.values() for replies in row.values())
    task_names = [t for t in order if any(i.task == t for i in items)]
    table: dict[str, dict[str, dict[str, float]]] = {}
    right: dict[str, dict[str, float]] = {}  # procedure -> item key -> reward (0 or 1)
    kinds = {item.key: answer_kind(item.scorer) for item in items}  # each item's kind, resolved once
    for name in procedures(models, k):
        per_task: dict[str, list[Outcome]] = {t: [] for t in task_names}
        right[name] = {}
        for item in items:
            out = play(name, matrix[item.key], kinds[item.key], budget)
            per_task[item.task].append(out)
            right[name][item.key] = float(out.correct)
        table[name] = {t: _summary(outs) for t, outs in per_task.items()}
        table[name]["all"] = _summary([o for outs in per_task.values() for o in outs])
    bound = {t: sum(any(r.correct for rs in matrix[i.key].values() for r in rs) for i in items if i.task == t)
             for t in task_names}
    best_single = max((n for n in table if n.startswith("single:")), key=lambda n: table[n]["all"]["correct"])
    picks = {t: max(table, key=lambda n: (table[n][t]["correct"], -table[n][t]["tokens"])) for t in task_names}
    bppt = {"correct": sum(table[picks[t]][t]["correct"] for t in task_names), "n": len(items), "picks": picks}
    right["best-procedure-per-task"] = {i.key: right[picks[i.task]][i.key] for i in items}
    paired = {name: paired_test(mine, right[best_single], best_single)
              for name, mine in right.items() if name != best_single}
    return {"paired": paired, "models": models, "k": k, "budget": budget, "tasks": task_names, "table": table,
            "any_right": bound, "best_single": best_single, "best_procedure_per_task": bppt,
            "verifiers": verifier_table(matrix, items), "examples": example_table(matrix, items)}


def example_table(matrix: Matrix, items: Sequence[tasks.TaskItem]) -> dict[str, int]:
    """Over every reply to a code item with examples: right ones (on the hidden tests) that
    pass the shown examples, and wrong ones that fail them."""
    counts = {"right": 0, "right_passed": 0, "wrong": 0, "wrong_failed": 0}
    for item in items:
        for replies in matrix[item.key].values():
            for reply in replies:
                if reply.turn.examples_passed is None:
                    continue
                if reply.correct:
                    counts["right"] += 1
                    counts["right_passed"] += reply.turn.examples_passed
                else:
                    counts["wrong"] += 1
                    counts["wrong_failed"] += not reply.turn.examples_passed
    return counts


def verifier_table(matrix: Matrix, items: Sequence[tasks.TaskItem]) -> dict[str, dict[str, int]]:
    """Per Verifier member: ACCEPTs of right and REVISEs of wrong greedy Worker answers of
    every member (itself included), outside code tasks (module docstring)."""
    table: dict[str, dict[str, int]] = {}
    for item in items:
        kind = answer_kind(item.scorer)
        if kind.judged:
            continue  # a judged answer is not compared
        row = matrix[item.key]
        for verifier in row:
            counts = table.setdefault(verifier, {"right": 0, "accepted": 0, "wrong": 0, "revised": 0})
            for worker in row:
                if verifier == worker and len(row[verifier]) < 2:
                    continue  # with --k 1 a member has no second reply to check its own with
                answer = row[worker][0]
                check = row[verifier][1 if verifier == worker else 0]
                mine = settle.answer_of(check.turn, kind)
                theirs = settle.answer_of(answer.turn, kind)
                agreed = mine is not None and theirs is not None and kind.same(mine, theirs)
                if answer.correct:
                    counts["right"] += 1
                    counts["accepted"] += agreed
                else:
                    counts["wrong"] += 1
                    counts["revised"] += not agreed
    return table


def _summary(outs: Sequence[Outcome]) -> dict[str, float]:
    n = len(outs) or 1
    return {"correct": sum(o.correct for o in outs), "n": len(outs), "calls": sum(o.calls for o in outs) / n,
            "tokens": sum(o.tokens for o in outs) / n, "seconds": sum(o.seconds for o in outs) / n}


def markdown(result: dict) -> str:
    """The table `trinity matrix` prints: every procedure, best first, then the bound,
    best-procedure-per-task, the example line and the Verifier table."""
    tasks_ = result["tasks"]
    head = ("| procedure | " + " | ".join(tasks_) + f" | all | calls | tokens | model s | vs {result['best_single']}: "
            "b / c, p |")
    lines = [f"# Procedures on {result['mix']} (k = {result['k']}, agree budget {result['budget']} calls)", "",
             head, "|" + "---|" * (len(tasks_) + 6)]
    ranked = sorted(result["table"].items(), key=lambda kv: (-kv[1]["all"]["correct"], kv[1]["all"]["tokens"]))
    for name, row in ranked:
        cells = [f"{row[t]['correct']}/{row[t]['n']}" for t in tasks_]
        a = row["all"]
        test = result["paired"].get(name)
        vs = f"{test['b']} / {test['c']}, {test['p_value']:.3f}" if test else "—"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | **{a['correct']}/{a['n']}** | {a['calls']:.1f} | "
                     f"{a['tokens']:.0f} | {a['seconds']:.1f} | {vs} |")
    bound = result["any_right"]
    lines.append("| any-right (bound) | " + " | ".join(f"{bound[t]}" for t in tasks_) + f" | {sum(bound.values())} |"
                 " | | | |")
    b = result["best_procedure_per_task"]
    single = result["table"][result["best_single"]]["all"]
    bt = result["paired"]["best-procedure-per-task"]
    lines += ["", f"best single member: {result['best_single']}, {single['correct']}/{single['n']} "
                  f"({100 * single['correct'] / single['n']:.1f}%)",
              f"best-procedure-per-task: {b['correct']}/{b['n']} ({100 * b['correct'] / b['n']:.1f}%, "
              f"{100 * (b['correct'] - single['correct']) / b['n']:+.1f} points; paired b / c "
              f"{bt['b']} / {bt['c']}, p = {bt['p_value']:.3f}), picks: "
              + ", ".join(f"{t}: {p}" for t, p in b["picks"].items())]
    ex = result["examples"]
    if ex["right"] + ex["wrong"]:
        lines += ["", f"code replies run against their task's shown examples: {ex['right_passed']} of {ex['right']} "
                      f"right ones passed, {ex['wrong_failed']} of {ex['wrong']} wrong ones failed"]
    lines += ["", "| Verifier (answers alone) | ACCEPTs right answers | REVISEs wrong answers | balanced |",
              "|---|---|---|---|"]
    for name, c in result["verifiers"].items():
        acc = c["accepted"] / c["right"] if c["right"] else 0.0
        rev = c["revised"] / c["wrong"] if c["wrong"] else 0.0
        lines.append(f"| {name} | {100 * acc:.0f}% ({c['accepted']}/{c['right']}) | "
                     f"{100 * rev:.0f}% ({c['revised']}/{c['wrong']}) | {50 * (acc + rev):.0f}% |")
    return "\n".join(lines)
