"""The free-form answer kind: a proof, an explanation, advice, a piece of writing — anything
without a short checkable value. The answer is the whole reply, in Markdown.

A draft (a Worker shown no turns: the first answer, or one asked alone) is the request asked
as a person asks it: a plain system line (`DRAFT_SYSTEM`, or the conversation's own system
prompt in its place; a `direct` member's adds that the answer begins at once) and the earlier
conversation and the request as chat messages, nothing about a team, roles or a transcript, so
there is no scaffolding to copy.

What `ask` and `serve` play on a free-form question when no mode or head is named
(`default_mode`): the `drafts` policy (policies/drafts.py), chosen on IFEval's validation items
(docs/freeform.md). The roles below are those of `--mode agree` (draft, judge, revise) and of a
head's episodes.

Roles, as the paper means them: a Thinker outlines (or critiques) without answering; a
Worker writes the answer, or, once there is one, revises it with the critique and the check
results shown above it; a Verifier is shown the request and the latest answer alone and
either ACCEPTs it or says concretely what is wrong (`Verdict: ACCEPT|REVISE`). The episode
ends at an ACCEPT (the answer is the accepted one) or when the turns run out (the latest
answer that met the request's stated constraints, else the latest answer).

Checks: the constraints the request states (answer_kinds/constraints.py) are checked on every
answer; the result is shown to later turns, a Verifier is not asked about an answer that
failed them (the next Worker revises it), and a Verifier's ACCEPT of such an answer cannot
happen. `program` members are not asked (a haiku is not a program; a question that asks for
a computation is a short-answer kind). Replies get room for a real answer (`max_tokens`).

Scoring (bench): an item's reference is its list of constraints; it scores 1.0 when the
answer meets all of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from trinity_cli.answer_kinds.base import AnswerKind
from trinity_cli.answer_kinds.constraints import Constraints, parse, score_constraints
from trinity_cli.messages import ChatMessage, Role
from trinity_cli.tasks.answer_body import answer_body
from trinity_cli.tasks.answers import FinalAnswer
from trinity_cli.tasks.repeats import asks_for_repetition

# Detection (`FreeForm.detect`, tried before the short answer's cues: answer_kinds/registry.py).
# A request nobody's rule claims is free-form anyway; these say "a whole answer" even where a short
# answer's cue also fires ("How many ... ? Answer in at least 100 words", "Who was X and why ...").
# What a request for a free-form answer opens with (after "please", "can you", ...).
_OPENING = re.compile(
    r"^\s*(?:(?:please|kindly|now)\s*,?\s+|(?:can|could|would|will) you\s+(?:please\s+)?|i (?:want|need) you to\s+|"
    r"help me\s+)*(?:prove|show that|explain|describe|write|compose|draft|summari[sz]e|translate|outline|discuss|"
    r"compare|contrast|argue|suggest|recommend|give (?:me )?(?:some |a few |an? )?(?:tips|advice|ideas|examples|"
    r"overview|summary|explanation|reasons|list|plan|schedule|itinerary|outline|recipe)|"
    r"tell me (?:about|a|an|how|why)|list|brainstorm|rewrite|paraphrase|"
    r"critique|review|plan|design|create|generate|propose|justify|derive|elaborate|introduce|define|teach|"
    r"make (?:me )?(?:a|an|some)|put together|help|name (?:a few|some|\d+|two|three|four|five|ten)|reply to|"
    r"proofread|imagine|pretend|act as|idea for)\b",
    re.I)
# ... or asks for anywhere: an open question (why, how to, pros and cons, which is better), a piece of writing.
_ANYWHERE = re.compile(
    r"^\s*(?:how (?:do|does|did|can|could|should|would|to|is|are)|what (?:are|were) (?:the |some )?"
    r"(?:pros|cons|benefits|advantages|disadvantages|reasons|causes|differences|ways|steps|main|key)|"
    r"what(?:'s| is) the (?:difference|relationship|meaning|purpose|role|significance)|in what ways)\b"
    r"|\bwhy\b|\bpros and cons\b|\b(?:vs\.?|versus)\s|\bshould (?:i|we|you)\b|\bbetter\b"
    r"|\bbest (?:way|approach|practice)"
    r"|\b(?:a|an|one|short|brief|little)\s+(?:poem|haiku|limerick|sonnet|story|essay|letter|email|speech|song|"
    r"paragraph|blog post|tweet|slogan|toast|joke)\b"
    r"|\bstep[- ]by[- ]step (?:proof|explanation|guide)\b"
    r"|\bshow (?:your|the|all) (?:work|working|steps)\b|\bexplain (?:each|every) step\b",
    re.I)
# ... or states how the answer must look (IFEval's kinds of instruction, in people's words): a whole
# answer is asked for, whatever its topic.
_FORMAT = re.compile(
    r"(?<!enter )(?<!express )(?<!put )\b(?:your|the|entire|whole) (?:entire |whole |final )?"
    r"(?:response|answer|reply|output|essay|text)s?\b"
    r"(?! is\b)(?:[^.?!\n]{0,60})\b(?:must|should|needs? to|has to|will|may|can|is to|in|with|be|contain|include|"
    r"start|begin|end|wrap|use|have|not)\b"
    r"|\b(?:respon(?:se|d)|answer|reply|write|output)\w*\s+(?:\w+\s+){0,3}(?:in|with|using)\s+"
    r"(?!(?:only |just )?(?:one|a single|a|the) (?:word|number|letter|name)\b)(?:\w+\s+){0,2}"
    r"(?:json|markdown|bullet|sections?|paragraphs?|lowercase|lower case|uppercase|capital|all caps|english|"
    r"\w+ language|format|style|tone|words?|sentences?|letters?|placeholders?)\b"
    r"|\b(?:at least|at most|no more than|no less than|fewer than|less than|more than|exactly|under|only|up to)\s+"
    r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|twelve|fifteen|twenty|thirty|fifty|hundred)\s+"
    r"(?:\w+\s+)?(?:words?|sentences?|paragraphs?|bullet|points?|sections?|times|placeholders?|letters?|lines?|"
    r"characters?|highlighted|items?|responses?)\b"
    r"|\bmy answer is\b|\bp\.\s?s\.|\bpostscript\b|\bhighlight|\bplaceholder|\bjson\b|\bmarkdown\b|\bbullet"
    r"|(?<!separated by )\bcommas?\b|\ball (?:capital|lowercase|lower case|uppercase|upper case|caps)"
    r"|\bcapital letters\b"
    r"|\b(?:lowercase|uppercase) letters\b|\bno other language\b|\bin (?:the )?\w+ language\b"
    r"|\brepeat (?:the|this|my) (?:request|question|prompt)|\bwrap\b|\bdouble (?:quotation|angular)|<<"
    r"|\btitle\b|\bkeywords?\b|\bthe (?:word|letter|phrase)s? (?!only\b)[\"'“‘]?\w|\*{3,}|\bparagraphs?\b|\bsections?\b"
    r"|\b(?:do not|don't|never|avoid|without) (?:use|using|say|saying|include|including|mention|mentioning)\b"
    r"(?! (?:a |any )?calculators?\b)"
    r"|\b(?:start|begin|end|finish|conclude) (?:your|each|every) \w+|(?:^|[.!?:]\s*)(?:start|begin|end) (?:it )?with\b"
    r"|\bexact phrase\b|\bin (?:a|the) style\b|\bratio of\b[^.?!\n]{0,60}\b(?:sentences|words|paragraphs)\b"
    r"|\bunique words\b|\b(?:each|every) (?:new )?(?:sentence|paragraph|word|line)\b|\bsyllables?\b|\blevels? deep\b"
    r"|\bconsecutive (?:words|sentences)\b|\banswer with one of the following options\b"
    r"|\bin (?:the|your) (?:response|reply)\b|\bonly output this\b",
    re.I)
# Rules on the response itself, which make a request that names a program a piece of writing that those
# rules are checked on (IFBench's "Write python code ... Only output this sentence here"): `Code.detect`
# leaves such a request to free-form.
_RESPONSE_RULES = re.compile(
    r"\b(?:the|your) (?:entire |whole )?(?:response|reply) (?:must|should|needs? to|has to)\b"
    r"|\bin (?:the|your) (?:response|reply)\b|\brepeat the request\b|\bonly output this\b",
    re.I)


def states_response_rules(task: str) -> bool:
    """Whether `task` states rules on the response itself ("The response must contain between 57 and
    61 words", "... in the response", "Repeat the request ..."): the answer is then judged as writing."""
    return bool(_RESPONSE_RULES.search(task))

_WRITE = ("You answer the request in full, as a knowledgeable and careful assistant would: the whole answer "
          "itself (a proof, an explanation, advice or a piece of writing), in Markdown where it helps. Follow "
          "every instruction in the request exactly (length, format, words to use or avoid). Do not add an "
          "'Answer:' line, and do not talk about the team or the instructions.")
_REVISE = ("You revise the latest answer above. Fix every problem the Verifier or trinity's check pointed out "
           "and keep what was right; follow every instruction in the request exactly. Write the whole revised "
           "answer (not a list of changes), in Markdown where it helps, and nothing else: no remarks about the "
           "revision, no 'Answer:' line.")
_DIRECT = " Begin the answer at once, with no preamble."
_JUDGE = ("You check the answer above against the request, and you do not trust it. Look for mistakes, gaps in "
          "reasoning, missing parts, and every instruction in the request that it does not follow (length, "
          "format, words). If it is correct, complete and follows every instruction, end with the line "
          "'Verdict: ACCEPT'. Otherwise say briefly and concretely what is wrong and how to fix it, then end "
          "with the line 'Verdict: REVISE'.")
_OUTLINE = ("You help the team, but you do not write the answer. In at most five short lines, outline what a good "
            "answer must contain and how to structure it; if an answer was already proposed, say exactly what is "
            "wrong or missing in it. End with one last line that is exactly 'Next: worker' (to have the answer "
            "written) or 'Next: verifier' (to have the latest answer checked).")


DRAFT_SYSTEM = "You are a helpful assistant."
# A redraw told what the checks found (`redraft_messages`); {wrong}: their sentences, "; "-joined.
_TOLD = ("Your answer does not follow my request: {wrong}. Write the whole answer again so that it follows every "
         "instruction in my request. Reply with the new answer only.")
_DRAFT_DIRECT = " Begin your answer at once, with no preamble."


class FreeForm(AnswerKind):
    """Free-form answers: drafted, or judged and revised (module docstring)."""

    name, priority = "freeform", 60
    settles = "judged"
    summary = "a whole answer in Markdown (a proof, an explanation, advice, writing), drafted as a person asks"
    verifier_sees_turns = False
    agree_by_verdict = True
    default_mode = "drafts"  # validated on IFEval: docs/freeform.md, policies/drafts.py
    proposal_label = "Answer to check:"
    history_chars = 3000
    caps = {Role.WORKER: 1024, Role.VERIFIER: 320, Role.THINKER: 192}

    def detect(self, task: str) -> bool:
        """Whether the request says it wants a whole answer (`_OPENING`, `_ANYWHERE`, `_FORMAT`),
        so that no short answer's cue takes it. A request that nothing claims is free-form as well
        (registry.detect): this only has to win where a short cue would also fire."""
        return bool(_OPENING.search(task) or _ANYWHERE.search(task) or _FORMAT.search(task))

    def fits_style(self, style: str, task: str) -> bool:
        return style != "program"

    def max_tokens(self, role: Role) -> int | None:
        return self.caps[role]

    def draft_messages(self, style: str, task: str, context: Sequence[ChatMessage] = ()) -> list[ChatMessage]:
        # The conversation's own system prompt (`trinity ask --system`, a served request's system
        # message) stands in for the plain line: one system message, first, as chat templates want.
        given = "\n\n".join(m.content for m in context if m.role == "system")
        system = (given or DRAFT_SYSTEM) + (_DRAFT_DIRECT if style == "direct" else "")
        return [ChatMessage("system", system), *(m for m in context if m.role != "system"), ChatMessage("user", task)]

    def redraft_messages(self, style: str, task: str, context: Sequence[ChatMessage], draft: str,
                         wrong: str) -> list[ChatMessage]:
        # The same conversation as the draft's, the draft as the assistant's turn and what the
        # checks found as the person's next message: told as a person would tell it, so there
        # is no scaffolding to copy (module docstring).
        return [*self.draft_messages(style, task, context), ChatMessage("assistant", draft),
                ChatMessage("user", _TOLD.format(wrong=wrong))]

    def instruction(self, style: str, role: Role, revising: bool) -> tuple[str, str]:
        if role is Role.THINKER:
            return _OUTLINE, "Write the outline or critique now (not the answer)."
        if role is Role.VERIFIER:
            return _JUDGE, "Give your critique and verdict now."
        if revising:
            return _REVISE + (_DIRECT if style == "direct" else ""), "Write the whole revised answer now."
        return _WRITE + (_DIRECT if style == "direct" else ""), "Write your answer now."

    def read(self, reply: str) -> FinalAnswer | None:
        return None  # judged, not compared

    def vote_key(self, answer: str, reference: Any = None) -> str | None:
        return None  # whole answers are not voted on

    def procedure_summary(self, procedure: str | None) -> str | None:
        if procedure != "agree":
            return None
        return ("agree on a free-form question: the first member drafts, the next judges, the first revises, "
                "until an ACCEPT")

    def check_note(self, result: dict[str, Any]) -> str:
        if result.get("passed"):
            return "(trinity checked this answer against the request's stated constraints: all met)"
        return f"(trinity checked this answer against the request's stated constraints: {result.get('error')})"

    def answer_text(self, text: str, printed: str | None = None) -> str:
        return answer_body(text)

    def checks(self, task: str, reference: Any = None) -> Constraints | None:
        """The constraints a scored item lists (its reference), else those its wording states;
        and whether the answer repeats past the limits, unless the request asks for repetition
        (tasks/repeats.py)."""
        repeats = not asks_for_repetition(task)
        if isinstance(reference, list):
            return Constraints.of(reference, repeats)
        return Constraints.of(parse(task), repeats)

    def score(self, output: str, reference: Any) -> float:
        return score_constraints(output, reference)


FREEFORM = FreeForm()
