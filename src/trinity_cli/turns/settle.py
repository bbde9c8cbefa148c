"""How an episode's answer is settled: which answers are votes, when two agree, the plurality
at the end, and code answers run against the examples the task itself shows.

Answers are read exactly as the task's scorer reads them (`tasks.answers.final_answer` for
the scorer kind). Every function is given the episode's `AnswerKind` (answer_kinds/base.py),
the object the episode carries, and asks it how to read and compare. Rules (episode/loop.py applies them turn by turn):

    vote        A turn that answers (a Worker, or a Verifier asked alone: rules.proposes_answer)
                casts a vote for its answer, unless an equal answer was in its prompt (an
                answering turn among the turns it was shown): a Worker copying the proposed
                answer is not a second opinion.
    agreement   A Verifier asked alone ACCEPTs when its answer equals the answer of ANY
                earlier answering turn (`agreed_with`, the latest such turn), and the
                episode's answer is that turn's reply. The fixed `agree` procedure stops at
                the first vote that equals an earlier vote (`agreement`).
    plurality   At the end without agreement: the answer with the most votes, ties to the
                one voted for first; its first vote's reply is the episode's answer (a
                member's first reply is its greedy one, and on the default pool's training
                items greedy replies beat fresh samples: `trinity matrix`,
                docs/turns.md). With no vote at all, the latest answering turn's reply.
    code        Answers are not compared (programs are judged by running them): every code
                answer is run against the task's examples (`run_examples`), and a Verifier
                is only asked about code that passed them (turns/source_rules.py, rule 3).
                The answer is the latest code that passes its examples, else the latest
                code answer. In `agree` and in a head's episode (turns/source_rules.py, rule 5),
                the first code that passes its examples ends the episode.

How a kind settles is the kind's to declare (answer_kinds/base.py `settles`): "votes" kinds
follow the rules above; "judged" kinds (code, free-form) are not compared, and what "code"
says above holds for every judged kind with its own checks (code: the task's shown examples,
answer_kinds/examples.py; free-form: the request's stated constraints). A free-form
episode's answer is the accepted one, else the latest answer that passed its checks, else
the latest answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.answer_kinds.examples import ExampleRun, Examples, run_examples
from trinity_cli.messages import Turn
from trinity_cli.tasks.answers import FinalAnswer
from trinity_cli.turns import rules

__all__ = ["ExampleRun", "Examples", "run_examples"]  # where callers have always found them

def answer_of(turn: Turn, kind: AnswerKind) -> FinalAnswer | None:
    """The answer an answering turn commits to, as the scorer of `kind` reads it (None for
    code, and for turns that do not answer)."""
    if not rules.proposes_answer(turn):
        return None
    return kind.read(turn.reply)


def gives_answer(reply: str, kind: AnswerKind) -> bool:
    """Whether `reply` holds an answer of `kind` (its `gives_answer`: on code, a definition in
    its code; a short answer of no stated form or free-form, any text; otherwise a final answer)."""
    return kind.gives_answer(reply)


def shown_turns(turns: Sequence[Turn], turn: Turn) -> list[Turn]:
    """The earlier turns `turn`'s prompt showed (none when it was asked alone); `turns` are
    numbered on from the first's index (an episode's: episode/loop.py's `first_index`)."""
    if turn.alone or not turns:
        return []
    return list(turns[turn.truncated_turns : turn.index - turns[0].index])


def is_vote(turns: Sequence[Turn], turn: Turn, kind: AnswerKind) -> bool:
    """Whether `turn` (not yet in, or last of, `turns`) casts a vote (module docstring)."""
    mine = answer_of(turn, kind)
    if mine is None:
        return False
    for seen in shown_turns(turns, turn):
        theirs = answer_of(seen, kind)
        if theirs is not None and kind.same(mine, theirs):
            return False
    return True


def agreed_with(turns: Sequence[Turn], answer: FinalAnswer | None, kind: AnswerKind) -> int | None:
    """Index of the latest answering turn of `turns` whose answer equals `answer`, or None."""
    if answer is None:
        return None
    for turn in reversed(turns):
        theirs = answer_of(turn, kind)
        if theirs is not None and kind.same(answer, theirs):
            return turn.index
    return None


def agreement(turns: Sequence[Turn], kind: AnswerKind) -> int | None:
    """For the `agree` procedure, after the latest turn: the index of the turn it agrees
    with when it is a vote equal to an earlier vote (code: the latest turn itself when its
    code passed its examples); else None."""
    if not turns:
        return None
    last = turns[-1]
    if kind.judged:  # code: the first that passes its examples; free-form: only an ACCEPT
        # `passing_checks_settle` (answer_kinds/base.py): passing the checks is the whole judgement.
        return last.index if last.examples_passed and kind.passing_checks_settle else None
    if not last.vote:
        return None
    return agreed_with([t for t in turns[:-1] if t.vote], answer_of(last, kind), kind)


def settled_answer(turns: Sequence[Turn], kind: AnswerKind) -> str | None:
    """The episode's answer at the end without agreement (module docstring: plurality; code)."""
    answering = [t for t in turns if rules.proposes_answer(t)]
    if not answering:
        return None
    if kind.judged:
        passing = [t for t in answering if t.examples_passed]
        return (passing or answering)[-1].reply
    groups: list[tuple[FinalAnswer, list[Turn]]] = []
    for turn in answering:
        if not turn.vote:
            continue
        mine = answer_of(turn, kind)
        assert mine is not None  # a vote has an answer
        group = next((g for g in groups if kind.same(g[0], mine)), None)
        if group is None:
            groups.append((mine, [turn]))
        else:
            group[1].append(turn)
    if not groups:
        return answering[-1].reply
    best = max(groups, key=lambda g: (len(g[1]), -g[1][0].index))
    return best[1][0].reply
