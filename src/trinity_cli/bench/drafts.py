"""Every way of choosing among a free-form matrix's drafts, scored from the matrix alone (no
model call): what `trinity matrix` prints for free-form items (IFEval, IFBench, `instructions`).

The drafts of an item are its matrix replies (bench/matrix.py: each member's greedy reply and
k-1 fresh attempts, each a Worker asked alone) taken in the order the draft policy draws them:
attempt 0 of every member in the matrix's member order, then attempt 1 of every member, ...
(`drafts_of`). What trinity knows of each without the benchmark's checker (turns/choose.py
`Draft`): its stated-constraint checks (the matrix's "examples"), self-certainty and mean
log-probability (its logprob stats).

Rows (`analyse`):

    draft:M           member M's greedy draft alone (one call)
    <rule>@N          the first N drafts, the answer chosen by turns/choose.py's rule (N calls)
    until-pass@N/<fallback>
                      drafts drawn one at a time until one passes the stated checks, at most N;
                      a request with no stated constraint trinity reads stops at the first
                      that does not degenerate; without a passing draft the answer is the
                      fallback rule's pick among the drafts drawn (what the draft policy plays)

A draft that degenerates (turns/choose.py `Draft`: repeats past the limits, cut at the token
cap) fails its checks, every rule chooses among the drafts that do not degenerate when there
are any (`choose.pick`), and a draft is scored as it is shown: its repeats trimmed.
    oracle@N          an item counts when any of the first N drafts is right (a bound)

Every row but `draft:M` depends on the order the drafts are drawn in: each is scored in every
order of the members (`orders`, up to three members), named "<row> <M1>><M2>..." for an order
other than the matrix's member order.

Each row: prompt-level strict (the family's scorer: `Reply.correct`) with its 95% Wilson
interval and, where the item's reference holds IFEval-style instructions (tasks/ifeval.py),
prompt-level loose and instruction-level strict and loose; mean calls, tokens and model seconds
per item; an exact McNemar test on prompt-level strict against the best member's greedy draft.
`best` is the playable row (not a bound) of highest prompt-level strict, ties to fewer tokens:
how the free-form default is chosen on validation items.

Result: {"members", "k", "n", "best_member", "best", "rows": {name: {"strict", "loose",
"inst_strict", "inst_loose", "instructions", "n", "low", "high", "calls", "tokens", "seconds",
"paired": {"b", "c", "p_value"} | None, "bound": bool}}}.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trinity_cli import tasks
from trinity_cli.answer_kinds import score_item
from trinity_cli.bench.procedures import Matrix, Reply
from trinity_cli.bench.stats import mcnemar_exact, wilson_interval
from trinity_cli.tasks.answer_body import answer_body
from trinity_cli.turns.choose import CHOOSERS, Draft, pick

FALLBACKS = ("first", "mbr", "certainty")


@dataclass(frozen=True)
class Scored:
    """One draft: what the rules read, and how the benchmark scores it."""

    draft: Draft
    strict: bool
    loose: bool
    inst_strict: int
    inst_loose: int
    instructions: int
    tokens: int
    seconds: float


def _scored(reply: Reply, item: tasks.TaskItem) -> Scored:
    """The draft scored as it would be shown: its repeats trimmed when it has any (`Draft.printed`)."""
    turn = reply.turn
    draft = Draft.of(turn)
    shown = draft.printed
    correct = reply.correct if shown == turn.reply else score_item(item, shown) == 1.0
    strict = loose = correct
    inst_strict = inst_loose = int(correct)
    count = 1
    reference = item.reference
    if isinstance(reference, dict) and "instruction_id_list" in reference:
        from trinity_cli.tasks.ifeval import score_all

        found = score_all(answer_body(shown), reference)
        strict = found.prompt_strict == 1.0
        loose = found.prompt_loose == 1.0
        count = len(found.instructions)
        inst_strict = sum(s for _, s, _ in found.instructions)
        inst_loose = sum(lo for _, _, lo in found.instructions)
    return Scored(draft, strict, loose, inst_strict, inst_loose, count, turn.prompt_tokens + turn.completion_tokens,
                  turn.latency_s)


def drafts_of(row: dict[str, list[Reply]], members: Sequence[str]) -> list[Reply]:
    """An item's drafts in the order the draft policy draws them (module docstring)."""
    depth = max((len(row.get(m, [])) for m in members), default=0)
    return [row[m][a] for a in range(depth) for m in members if a < len(row.get(m, []))]


Rule = Callable[[Sequence[Scored]], tuple[int, list[int]]]  # drafts -> (chosen index, indices drawn)


def _fixed(rule: str, n: int) -> Rule:
    return lambda drafts: (pick(rule, [s.draft for s in drafts[:n]]), list(range(min(n, len(drafts)))))


def _until_pass(n: int, fallback: str) -> Rule:
    def play(drafts: Sequence[Scored]) -> tuple[int, list[int]]:
        for i, scored in enumerate(drafts[:n]):
            if scored.draft.passed is None or scored.draft.passed:
                return i, list(range(i + 1))
        drawn = min(n, len(drafts))
        return pick(fallback, [s.draft for s in drafts[:drawn]]), list(range(drawn))
    return play


def _rules(members: Sequence[str], k: int) -> dict[str, Rule]:
    """The rows that depend on the order drafts are drawn in (module docstring), for drafts in
    `members`' order."""
    rules: dict[str, Rule] = {}
    total = len(members) * k
    for n in sorted({n for n in (2, len(members), total) if 2 <= n <= total}):
        for name in CHOOSERS:
            if name != "first":
                rules[f"{name}@{n}"] = _fixed(name, n)
        for fallback in FALLBACKS:
            rules[f"until-pass@{n}/{fallback}"] = _until_pass(n, fallback)
    return rules


def orders(members: Sequence[str]) -> list[tuple[str, ...]]:
    """The member orders rows are scored in: every order of up to three members, the given first."""
    return [tuple(members)] + ([o for o in itertools.permutations(members) if o != tuple(members)]
                               if len(members) <= 3 else [])


def analyse(matrix: Matrix, items: Sequence[tasks.TaskItem], members: Sequence[str], k: int) -> dict[str, Any]:
    """Every row of the module docstring on the items of `matrix`; a row that depends on the
    order drafts are drawn in is scored in every order of the members (`orders`), named
    "<row> <first>>..." for an order other than the given one."""
    keys = [item.key for item in items if item.key in matrix]
    by_key = {item.key: item for item in items}
    # each reply scored once (IFEval's checkers are the slow part), whatever the orders below
    scores = {id(r): _scored(r, by_key[key]) for key in keys for replies in matrix[key].values() for r in replies}
    outcomes: dict[str, dict[str, tuple[Scored, list[Scored]]]] = {}
    for m in members:
        outcomes[f"draft:{m}"] = {}
        for key in keys:
            first = scores[id(matrix[key][m][0])]
            outcomes[f"draft:{m}"][key] = (first, [first])
    deepest: dict[str, list[Scored]] = {}
    for order in orders(members):
        suffix = "" if order == tuple(members) else " " + ">".join(order)
        scored = {key: [scores[id(r)] for r in drafts_of(matrix[key], order)] for key in keys}
        if not suffix:
            deepest = scored
        for name, rule in _rules(order, k).items():
            outcomes[name + suffix] = {}
            for key, drafts in scored.items():
                chosen, drawn = rule(drafts)
                outcomes[name + suffix][key] = (drafts[chosen], [drafts[i] for i in drawn])
    rows = {name: _row(by_item) for name, by_item in outcomes.items()}
    depth = max((len(d) for d in deepest.values()), default=0)
    for n in sorted({min(2, depth), depth} - {0}):
        rows[f"oracle@{n}"] = {**_row({key: (next((s for s in d[:n] if s.strict), d[0]), d[:n])
                                       for key, d in deepest.items()}), "bound": True}
    singles = [f"draft:{m}" for m in members]
    best_member = max(singles, key=lambda s: (rows[s]["strict"], -rows[s]["tokens"]))
    base = {key: o[0].strict for key, o in outcomes[best_member].items()}
    for name, row in rows.items():
        mine = {key: o[0].strict for key, o in outcomes[name].items()} if name in outcomes else None
        if mine is None or name == best_member:
            row["paired"] = None
            continue
        b = sum(mine[key] and not base[key] for key in base)
        c = sum(not mine[key] and base[key] for key in base)
        row["paired"] = {"b": b, "c": c, "p_value": mcnemar_exact(b, c)}
    playable = [name for name, row in rows.items() if not row["bound"]]
    best = max(playable, key=lambda s: (rows[s]["strict"], -rows[s]["tokens"]))
    return {"members": list(members), "k": k, "n": len(keys), "best_member": best_member, "best": best,
            "rows": rows}


def _row(by_item: dict[str, tuple[Scored, list[Scored]]]) -> dict[str, Any]:
    n = len(by_item)
    chosen = [c for c, _ in by_item.values()]
    correct = sum(c.strict for c in chosen)
    low, high = wilson_interval(correct, n)
    drawn = [s for _, d in by_item.values() for s in d]
    return {"strict": correct, "n": n, "low": low, "high": high, "loose": sum(c.loose for c in chosen),
            "inst_strict": sum(c.inst_strict for c in chosen), "inst_loose": sum(c.inst_loose for c in chosen),
            "instructions": sum(c.instructions for c in chosen), "calls": len(drawn) / (n or 1),
            "tokens": sum(s.tokens for s in drawn) / (n or 1), "seconds": sum(s.seconds for s in drawn) / (n or 1),
            "bound": False}


def markdown(result: dict[str, Any], title: str) -> str:
    """The table: every row, best prompt-level strict first (ties: fewer tokens)."""
    def pct(x: float | None, n: int | None) -> str:
        return "—" if x is None or not n else f"{100 * x / n:.1f}"

    lines = [f"# Choosing among drafts on {title} ({result['n']} items; drafts: "
             f"{', '.join(result['members'])}, {result['k']} each)", "",
             "| row | prompt strict | 95% CI | prompt loose | instr. strict | instr. loose | calls | tokens "
             f"| model s | vs {result['best_member']}: b / c, p |", "|---|---|---|---|---|---|---|---|---|---|"]
    ranked = sorted(result["rows"].items(), key=lambda kv: (-kv[1]["strict"], kv[1]["tokens"]))
    for name, row in ranked:
        test = row["paired"]
        vs = f"{test['b']} / {test['c']}, {test['p_value']:.3f}" if test else "—"
        label = f"{name} (bound)" if row["bound"] else name
        lines.append(f"| {label} | {pct(row['strict'], row['n'])} | {100 * row['low']:.1f}–{100 * row['high']:.1f} "
                     f"| {pct(row['loose'], row['n'])} | {pct(row['inst_strict'], row['instructions'])} "
                     f"| {pct(row['inst_loose'], row['instructions'])} | {row['calls']:.2f} | {row['tokens']:.0f} "
                     f"| {row['seconds']:.1f} | {vs} |")
    lines += ["", f"best member: {result['best_member']}; best row (prompt strict, ties to fewer tokens): "
                  f"{result['best']}"]
    return "\n".join(lines)
