"""Constraints a free-form request states that trinity can check without a model (in the
spirit of IFEval's verifiable instructions): no commas, all lower case, at most N words,
exactly N bullet points, end with a phrase, include or avoid words, and so on.

A constraint is a plain dict, `{"type": TYPE, ...parameters}`, so a task file can list them
as an item's reference and a run record can keep them:

    no_commas                           no "," anywhere
    lowercase / uppercase               every letter lower (upper) case
    words      {"relation", "n"}        word count at_least / at_most / exactly n
    sentences  {"relation", "n"}        sentence count (split at . ! ?) likewise
    bullets    {"n"}                    exactly n lines that open with "* ", "- " or "• "
    paragraphs {"n"}                    exactly n paragraphs (separated by blank lines or ***)
    ends_with  {"phrase"}               the text ends with the phrase (case-insensitive, final
                                        punctuation and quotes aside)
    starts_with {"phrase"}              the text opens with it
    include    {"words": [...]}         each word or phrase appears (case-insensitive)
    exclude    {"words": [...]}         none of them appears (as a word)
    quoted                              the whole text is wrapped in double quotation marks
    title                               a title wrapped in double angular brackets: <<title>>

`parse(text)` finds them in a request's own wording (for `ask` and `serve`); `check(c, text)`
gives (passed, what is wrong in one sentence); `score_constraints` is the `freeform` scorer
(1.0 when a reply meets every constraint its item lists). `Constraints` is a free-form
task's checks (answer_kinds/base.py `Checks`): every answer is checked, the result is
recorded on the turn and shown to later turns, and a Verifier is not asked about an answer
that failed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trinity_cli.tasks.answer_body import answer_body

Constraint = dict[str, Any]

_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
            "ten": 10, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "fifty": 50, "hundred": 100}
_N = r"(\d+|" + "|".join(_NUMBERS) + r")"
_RELATIONS = {"at least": "at_least", "no fewer than": "at_least", "more than": "more_than",
              "at most": "at_most", "no more than": "at_most", "fewer than": "less_than", "less than": "less_than",
              "under": "less_than", "exactly": "exactly", "only": "exactly", "in": "exactly"}
_QUOTED = r"[\"“'‘]([^\"”'’]+)[\"”'’]"  # one quoted word or phrase
_RELATION = r"(at least|no fewer than|more than|at most|no more than|fewer than|less than|under|exactly)"
_QUOTE = "\"'“”‘’`"


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS[text.lower()]


def _phrase(text: str) -> str:
    return text.strip().strip(_QUOTE).strip()


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9']+(?:-[A-Za-z0-9']+)*", text)


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if _words(s)]


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n|\n?\s*\*\*\*\s*\n?", text.strip()) if p.strip()]


def _bullets(text: str) -> int:
    return len(re.findall(r"^\s*(?:[*\-•])\s+\S", text, re.MULTILINE))


def _compare(count: int, relation: str, n: int) -> bool:
    return {"at_least": count >= n, "more_than": count > n, "at_most": count <= n, "less_than": count < n,
            "exactly": count == n}[relation]


def _said(relation: str, n: int, what: str) -> str:
    return f"{relation.replace('_', ' ')} {n} {what}"


def _letters(text: str) -> str:
    return "".join(ch for ch in text if ch.isalpha())


def _plain_end(text: str) -> str:
    return text.strip().rstrip(".!?" + _QUOTE + " *").casefold()


def _has(text: str, word: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(word.casefold()) + r"(?!\w)", text.casefold()) is not None


_CHECKS: dict[str, Callable[[Constraint, str], tuple[bool, str]]] = {
    "no_commas": lambda c, t: (t.count(",") == 0, f"it has {t.count(',')} comma(s); the request allows none"),
    "lowercase": lambda c, t: (_letters(t) == _letters(t).lower(),
                               "it has capital letters; the request asks for lower case only"),
    "uppercase": lambda c, t: (_letters(t) == _letters(t).upper(),
                               "it has lower-case letters; the request asks for capital letters only"),
    "words": lambda c, t: (_compare(len(_words(t)), c["relation"], c["n"]),
                           f"it has {len(_words(t))} words; the request asks for "
                           f"{_said(c['relation'], c['n'], 'words')}"),
    "sentences": lambda c, t: (_compare(len(_sentences(t)), c["relation"], c["n"]),
                               f"it has {len(_sentences(t))} sentences; the request asks for "
                               f"{_said(c['relation'], c['n'], 'sentences')}"),
    "bullets": lambda c, t: (_bullets(t) == c["n"],
                             f"it has {_bullets(t)} bullet points; the request asks for exactly {c['n']}"),
    "paragraphs": lambda c, t: (len(_paragraphs(t)) == c["n"],
                                f"it has {len(_paragraphs(t))} paragraphs; the request asks for {c['n']}"),
    "ends_with": lambda c, t: (_plain_end(t).endswith(_plain_end(c["phrase"])),
                               f"it does not end with \"{c['phrase']}\""),
    "starts_with": lambda c, t: (t.strip().lstrip(_QUOTE + "*# ").casefold().startswith(c["phrase"].casefold()),
                                 f"it does not start with \"{c['phrase']}\""),
    "include": lambda c, t: (all(_has(t, w) for w in c["words"]),
                             "it does not use " + ", ".join(f'"{w}"' for w in c["words"] if not _has(t, w))),
    "exclude": lambda c, t: (not any(_has(t, w) for w in c["words"]),
                             "it uses " + ", ".join(f'"{w}"' for w in c["words"] if _has(t, w))
                             + ", which the request forbids"),
    "quoted": lambda c, t: (len(t.strip()) > 1 and t.strip()[0] in "\"“" and t.strip()[-1] in "\"”",
                            "it is not wrapped in double quotation marks"),
    "title": lambda c, t: (re.search(r"<<[^<>\n]+>>", t) is not None,
                           "it has no title in double angular brackets, like <<title>>"),
}

TYPES = tuple(_CHECKS)


def check(constraint: Constraint, text: str) -> tuple[bool, str]:
    """(passed, what is wrong) of `text` against one constraint (module docstring)."""
    kind = constraint.get("type")
    if kind not in _CHECKS:
        raise ValueError(f"unknown constraint type {kind!r}: use one of {', '.join(TYPES)}")
    passed, why = _CHECKS[kind](constraint, text)
    return passed, "" if passed else why


def describe(constraint: Constraint) -> str:
    """A constraint in a few words, as a check's result names it."""
    extra = {k: v for k, v in constraint.items() if k != "type"}
    return constraint["type"] + (" " + ", ".join(f"{k}={v}" for k, v in extra.items()) if extra else "")


# (pattern, builder): each finds one constraint in a request's wording.
_PATTERNS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], Constraint]]] = [
    (re.compile(r"\b(?:without(?: using)?|no|(?:do )?not (?:use|using|include|including|contain|have)|"
                r"(?:cannot|can't|don't|never|must not|should not) (?:use|contain|include|have)|"
                r"refrain from(?: using)?|avoid(?: using)?) (?:any )?commas?\b|\bcommas? (?:are|is) not allowed\b",
                re.I), lambda m: {"type": "no_commas"}),
    (re.compile(r"\b(?:in|using|use) (?:all |only )?lower[- ]?case\b|\ball lower[- ]?case\b|"
                r"\blower[- ]?case letters(?: only)?\b|\bonly lower[- ]?case\b|\bin lower[- ]?cases\b|"
                r"\ball letters lower[- ]?cased\b|\bwithout (?:using )?any capital letters\b", re.I),
     lambda m: {"type": "lowercase"}),
    (re.compile(r"\b(?:in )?all (?:capital|upper[- ]?case) letters\b|\bin all caps\b|\bentirely in upper[- ]?case\b",
                re.I), lambda m: {"type": "uppercase"}),
    (re.compile(rf"\b{_RELATION} {_N} words?\b", re.I),
     lambda m: {"type": "words", "relation": _RELATIONS[m.group(1).lower()], "n": _number(m.group(2))}),
    (re.compile(rf"\b{_N}(?:\+| or more) words?\b|\b{_N} words? or more\b", re.I),
     lambda m: {"type": "words", "relation": "at_least", "n": _number(m.group(1) or m.group(2))}),
    (re.compile(rf"\b{_N} (?:or (?:less|fewer) words?|words? or (?:less|fewer))\b", re.I),
     lambda m: {"type": "words", "relation": "at_most", "n": _number(m.group(1))}),
    (re.compile(rf"\b{_RELATION} {_N} sentences?\b", re.I),
     lambda m: {"type": "sentences", "relation": _RELATIONS[m.group(1).lower()], "n": _number(m.group(2))}),
    (re.compile(rf"\b(?:exactly |in |with |using |as )?{_N} bullet(?:ed)?[- ]points?\b", re.I),
     lambda m: {"type": "bullets", "n": _number(m.group(1))}),
    (re.compile(rf"\b(?:exactly |in |with )?{_N} paragraphs\b", re.I),
     lambda m: {"type": "paragraphs", "n": _number(m.group(1))}),
    (re.compile(r"\b(?:end|finish|conclude)(?: (?:your|the) (?:entire |whole )?\w+(?: post)?| it)? with "
                r"(?:(?:the|this) (?:exact )?(?:phrase|words?|sentence):? |exactly:? )?"
                r"([\"“'‘])(.+?)[\"”'’](?=[\s.,;]|$)",
                re.I),
     lambda m: {"type": "ends_with", "phrase": _phrase(m.group(2))}),
    (re.compile(r"\b(?:start|begin|open)(?: your (?:response|answer|reply)| it)? with (?:the (?:exact )?"
                r"(?:phrase|words?|sentence) )?([\"“'‘])(.+?)[\"”'’](?=[\s.,;]|$)", re.I),
     lambda m: {"type": "starts_with", "phrase": _phrase(m.group(2))}),
    (re.compile(r"(?<!not )(?<!n't )(?<!never )(?<!without )\b(?:include|use|mention|contain)s? the (?:key)?words? "
                r"((?:[\"“'‘][^\"”'’]+[\"”'’](?:,? (?:and )?)?)+)",
                re.I), lambda m: {"type": "include", "words": [_phrase(w) for w in re.findall(_QUOTED, m.group(1))]}),
    (re.compile(r"\b(?:do not|don't|never|without|not) (?:use|using|say|saying|mention|mentioning|include|including)"
                r"(?: the)?(?: following)? (?:key)?words?:? \[?((?:[\"“'‘][^\"”'’]+[\"”'’](?:,? (?:or |and )?)?)+)",
                re.I),
     lambda m: {"type": "exclude", "words": [_phrase(w) for w in re.findall(_QUOTED, m.group(1))]}),
    (re.compile(r"\bthe words? [\"“'‘]?([A-Za-z][\w-]*)[\"”'’]? (?:should|must|does|do|will|may)(?: not|n't) "
                r"(?:appear|be used|be included|be in)", re.I),
     lambda m: {"type": "exclude", "words": [m.group(1)]}),
    (re.compile(r"\b(?:wrap|put|enclose|surround)\b[^.!?\n]{0,40}?\b(?:in|with|inside|within) double quot|"
                r"\bdouble quot\w*(?: marks)? around (?:your |the )?(?:entire |whole )", re.I),
     lambda m: {"type": "quoted"}),
    (re.compile(r"double angular brackets|<<\s*title\s*>>", re.I), lambda m: {"type": "title"}),
]


# Wordings a pattern matches that state another constraint, one trinity cannot check: a few
# capitalised words ("at least 10 words in all capital letters"), how a paragraph or section
# starts ("Paragraph 2 must start with ..."). Read as the pattern reads them, they would fail
# answers that follow the request (found on IFEval's train split: docs/freeform.md).
_CAPITAL_WORDS_BEFORE = re.compile(r"\b(?:words|phrases)\s+(?:(?:with|in|using|written in)\s+)?$|"
                                   r"\bwords\b(?:\s+\w+){0,4}\s+(?:should|must|will)\s+be\s+$", re.I)
_TIMES_AFTER = re.compile(r"^\s*(?:should |must |will )?(?:appear |be used )?(?:at least |at most |less than |"
                          r"more than |fewer than |exactly )?\d+\s+times|^\s+(?:at least|at most|less than|more than|"
                          r"fewer than)\s+\d+", re.I)
_CAPITAL_AFTER = re.compile(r"^\s+(?:or phrases\s+)?(?:\w+\s+)?(?:in|with|using)\s+(?:all\s+)?(?:capital|caps|upper)",
                            re.I)
_PART_BEFORE = re.compile(r"\b(?:paragraph|section|sentence|line|bullet|point|part|stanza|verse)s?\b[^.!?\n]{0,25}$",
                          re.I)


def _other(constraint: Constraint, text: str, match: re.Match[str]) -> bool:
    """Whether `match` states something else than `constraint` (the wordings above)."""
    before, after = text[max(0, match.start() - 60): match.start()], text[match.end(): match.end() + 60]
    kind = constraint["type"]
    if kind == "uppercase":
        return bool(_CAPITAL_WORDS_BEFORE.search(before) or _TIMES_AFTER.search(after)
                    or re.search(r"\bcapitali[sz]ed words\b", before + after, re.I))
    if kind == "lowercase":  # "no lowercase letters allowed": the opposite
        return bool(re.search(r"\b(?:no|not|any|without|never)\b[^.!?\n]{0,60}$", before, re.I))
    if kind == "words":
        return bool(_CAPITAL_AFTER.search(after))
    if kind == "starts_with":
        return bool(_PART_BEFORE.search(before))
    return False


def parse(text: str) -> list[Constraint]:
    """The constraints a request states (module docstring), each once, in the order found."""
    found: list[Constraint] = []
    for pattern, build in _PATTERNS:
        for match in pattern.finditer(text):
            constraint = build(match)
            if constraint.get("words") == [] or _other(constraint, text, match):
                continue
            if constraint not in found:
                found.append(constraint)
    return found


@dataclass(frozen=True)
class Constraints:
    """A free-form task's checks: the constraints it states (`Checks`, answer_kinds/base.py)."""

    items: tuple[tuple[tuple[str, Any], ...], ...]

    @classmethod
    def of(cls, constraints: Sequence[Constraint]) -> Constraints | None:
        """Constraints from dicts (None when there are none); each is validated here."""
        for c in constraints:
            if c.get("type") not in _CHECKS:
                raise ValueError(f"unknown constraint type {c.get('type')!r}: use one of {', '.join(TYPES)}")
        frozen = tuple(tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in c.items()))
                       for c in constraints)
        return cls(frozen) if frozen else None

    @property
    def dicts(self) -> list[Constraint]:
        return [{k: list(v) if isinstance(v, tuple) else v for k, v in c} for c in self.items]

    def failures(self, text: str) -> list[str]:
        """What is wrong with `text`, one sentence per failed constraint (none: all passed)."""
        body = answer_body(text)
        return [why for c in self.dicts for passed, why in [check(c, body)] if not passed]

    def run(self, reply: str, strict: bool = False) -> dict[str, Any]:
        failed = self.failures(reply)
        return {"passed": not failed, "failing": None, "error": "; ".join(failed) or None,
                "checked": len(self.items)}


def score_constraints(output: str, reference: Any) -> float:
    """The `freeform` scorer: 1.0 when `output` meets every constraint of `reference` (a
    non-empty list of constraint dicts; anything else is a bug in the task data)."""
    if not isinstance(reference, list) or not reference:
        raise ValueError('a free-form item\'s reference is its list of constraints, e.g. [{"type": "no_commas"}]')
    checks = Constraints.of(reference)
    assert checks is not None
    return 0.0 if checks.failures(output) else 1.0
