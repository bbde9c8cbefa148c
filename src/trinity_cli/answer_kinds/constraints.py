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
    paragraphs {"n", "by"?, "relation"?}  n paragraphs (separated by blank lines or ***; with
                                        "by": "***", by *** alone); relation exactly unless given
    ends_with  {"phrase"}               the text ends with the phrase (case-insensitive, final
                                        punctuation and quotes aside)
    starts_with {"phrase"}              the text opens with it
    include    {"words": [...]}         each word or phrase appears (case-insensitive)
    exclude    {"words": [...]}         none of them appears (as a word)
    quoted                              the whole text is wrapped in double quotation marks
    title                               a title wrapped in double angular brackets: <<title>>
    frequency  {"word", "relation", "n"}  the word appears (as a word, any case) so many times
    letters    {"letter", "relation", "n"}  the letter appears (any case) so many times
    highlights {"n"}                    at least n sections highlighted in markdown: *text*
    placeholders {"n"}                  at least n placeholders in square brackets: [name]
    postscript {"marker"}               the marker (P.S., P.P.S) opens a postscript
    rows       {"n"}                    a markdown table of n rows (the header row aside, or
                                        counted in: either reading passes)

`parse(text)` finds them in a request's own wording (for `ask` and `serve`); `check(c, text)`
gives (passed, what is wrong in one sentence); `score_constraints` is the `freeform` scorer
(1.0 when a reply meets every constraint its item lists). `Constraints` is a free-form
task's checks (answer_kinds/base.py `Checks`): every answer is checked, the result is
recorded on the turn and shown to later turns, and a Verifier is not asked about an answer
that failed; with `repeats` it also records whether the answer repeats itself past the limits
(tasks/repeats.py), which the drafts policy alone reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trinity_cli.tasks.answer_body import answer_body
from trinity_cli.tasks.repeats import repeated

Constraint = dict[str, Any]

_NUMBERS = {"once": 1, "twice": 2, "thrice": 3,
            "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
            "ten": 10, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "fifty": 50, "hundred": 100}
_N = r"(\d+|" + "|".join(_NUMBERS) + r")"
_RELATIONS = {"at least": "at_least", "no fewer than": "at_least", "more than": "more_than",
              "at most": "at_most", "no more than": "at_most", "fewer than": "less_than", "less than": "less_than",
              "under": "less_than", "exactly": "exactly", "only": "exactly", "in": "exactly"}
_QUOTED = r"[\"“'‘]([^\"”'’]+)[\"”'’]"  # one quoted word or phrase
_RELATION = r"(at least|no fewer than|more than|at most|no more than|fewer than|less than|under|exactly)"
_ITEM = r"[A-Za-z][\w'-]*"
_LIST = rf"{_ITEM}(?:(?:,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+){_ITEM})*"  # a, b, and c (unquoted)
_QLIST = r"\[?(?:[\"“'‘][^\"”'’]+[\"”'’](?:,?\s*(?:and |or )?)?)+\]?"  # "a", "b" and "c"
# Words an unquoted list cannot hold: the list has ended, or it was no list ("the word of").
_NOT_ITEMS = {"a", "an", "the", "of", "in", "to", "for", "from", "that", "which", "with", "as", "and", "or",
              "you", "your", "it", "its", "at", "on", "is", "be", "should", "must", "any", "such", "this", "these",
              "anywhere", "throughout", "whatsoever", "etc", "count", "limit", "limits", "length", "choice", "order",
              "list", "below", "above", "following", "given"}
_PER = r"(?:times?)?"
_QUOTE = "\"'“”‘’`"


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS[text.lower()]


def _phrase(text: str) -> str:
    return text.strip().strip(_QUOTE).strip()


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9']+(?:-[A-Za-z0-9']+)*", text)


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if _words(s)]


def _paragraphs(text: str, by: str | None = None) -> list[str]:
    split = r"\s*(?<!\*)\*\*\*(?!\*)\s*" if by == "***" else r"\n\s*\n|\n?\s*\*\*\*\s*\n?"
    return [p for p in re.split(split, text.strip()) if p.strip()]


def _occurrences(text: str, word: str) -> int:
    return len(re.findall(r"(?<!\w)" + re.escape(word.casefold()) + r"(?!\w)", text.casefold()))


def _highlights(text: str) -> int:
    spans = re.findall(r"\*\*[^\n*]+\*\*|(?<!\*)\*[^\n*]+\*(?!\*)", text)
    return sum(1 for span in spans if span.strip("*").strip())


def _placeholders(text: str) -> int:
    return len(re.findall(r"\[[^\[\]\n]*\]", text))


def _table_rows(text: str) -> tuple[int, int]:
    """(body rows, header rows) of the markdown tables in `text`: lines that open with "|",
    separator lines ("|---|") aside; a row right above a separator is a header."""
    lines = [line.strip() for line in text.splitlines()]
    separator = re.compile(r"^\|?[\s:|-]*-[\s:|-]*$")
    rows = [i for i, line in enumerate(lines) if line.startswith("|") and not separator.match(line)]
    headers = [i for i in rows if i + 1 < len(lines) and separator.match(lines[i + 1]) and "-" in lines[i + 1]]
    return len(rows) - len(headers), len(headers)


def _rows_pass(text: str, n: int) -> bool:
    body, headers = _table_rows(text)
    return body == n or body + headers == n


def _postscript(text: str, marker: str) -> bool:
    letters = [ch for ch in marker.lower() if ch.isalpha()]  # "P.P.S" -> p, p, s
    pattern = r"\.?\s?".join(letters) + r"\b"
    return re.search(r"(?<![a-z])" + pattern, text.lower()) is not None


def _bullets(text: str) -> int:
    return len(re.findall(r"^\s*(?:[*\-•])\s+\S", text, re.MULTILINE))


def _compare(count: int, relation: str, n: int) -> bool:
    return {"at_least": count >= n, "more_than": count > n, "at_most": count <= n, "less_than": count < n,
            "exactly": count == n}[relation]


def _said(relation: str, n: int, what: str) -> str:
    return f"{relation.replace('_', ' ')} {n} {what}".rstrip()


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
    "paragraphs": lambda c, t: (_compare(len(_paragraphs(t, c.get("by"))), c.get("relation", "exactly"), c["n"]),
                                f"it has {len(_paragraphs(t, c.get('by')))} paragraphs"
                                + (" separated by ***" if c.get("by") else "") + "; the request asks for "
                                + _said(c.get("relation", "exactly"), c["n"], "")),
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
    "frequency": lambda c, t: (_compare(_occurrences(t, c["word"]), c["relation"], c["n"]),
                               f"it uses \"{c['word']}\" {_occurrences(t, c['word'])} time(s); the request asks "
                               f"for {_said(c['relation'], c['n'], 'times')}"),
    "letters": lambda c, t: (_compare(t.casefold().count(c["letter"].casefold()), c["relation"], c["n"]),
                             f"the letter \"{c['letter']}\" appears {t.casefold().count(c['letter'].casefold())} "
                             f"time(s); the request asks for {_said(c['relation'], c['n'], 'times')}"),
    "highlights": lambda c, t: (_highlights(t) >= c["n"],
                                f"it highlights {_highlights(t)} section(s) like *this*; the request asks for at "
                                f"least {c['n']}"),
    "placeholders": lambda c, t: (_placeholders(t) >= c["n"],
                                  f"it has {_placeholders(t)} placeholder(s) like [name]; the request asks for at "
                                  f"least {c['n']}"),
    "rows": lambda c, t: (_rows_pass(t, c["n"]),
                          f"its table has {_table_rows(t)[0]} rows; the request asks for {c['n']}"),
    "postscript": lambda c, t: (_postscript(t, c["marker"]),
                                f"it has no postscript starting with {c['marker']}"),
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
def _items(text: str) -> list[str]:
    """The words of a list as a request writes it: quoted ("a", 'b' or ['a', 'b']) or not (a, b and
    c: single words, the list ending at the first word that cannot be an item)."""
    quoted = re.findall(_QUOTED, text)
    if quoted:
        return [_phrase(w) for w in quoted]
    items = []
    for word in re.split(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", text.strip()):
        if word.lower() in _NOT_ITEMS:
            break
        items.append(word)
    return items


def _range(kind: str, low: str, high: str) -> list[Constraint]:
    return [{"type": kind, "relation": "at_least", "n": _number(low)},
            {"type": kind, "relation": "at_most", "n": _number(high)}]


def _times(word_or_letter: str, key: str, relation: str, n: str, negated: bool = False) -> Constraint:
    kind = "letters" if key == "letter" else "frequency"
    relation = _RELATIONS.get(relation.lower(), relation)
    if negated and relation == "more_than":  # "avoid using the letter i more than twice"
        relation = "at_most"
    return {"type": kind, key: _phrase(word_or_letter).lower() if key == "letter" else _phrase(word_or_letter),
            "relation": relation, "n": _number(n)}


_NEG = (r"(?:do not|don't|never|without|not|avoid|refrain from|doesn't|does not|must not|should not|cannot|can't)"
        r"(?: (?:to|be))?")
_SEP = r"(?<!\*)(?:\*\*\*|3 asterisks?|three asterisks?)(?!\*)"

_PATTERNS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], Constraint | list[Constraint]]]] = [
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
    (re.compile(r"\b(?:wrap(?:ped)?|put|enclose[ds]?|surround(?:ed)?)\b[^.!?\n]{0,40}?"
                r"\b(?:in|with|inside|within) double quot|"
                r"\bdouble quot\w*(?: marks)? around (?:your |the )?(?:entire |whole )", re.I),
     lambda m: {"type": "quoted"}),
    (re.compile(r"double angular brackets|<<\s*title\s*>>", re.I), lambda m: {"type": "title"}),
    # ranges: "20 to 25 sentences", "600 to 700 words"
    (re.compile(rf"\b(?:between )?{_N} (?:to|and|-) {_N} (words|sentences)\b", re.I),
     lambda m: _range("words" if m.group(3).lower() == "words" else "sentences", m.group(1), m.group(2))),
    (re.compile(rf"\b{_RELATION} (?:a total of )?{_N} sentences\b", re.I),
     lambda m: {"type": "sentences", "relation": _RELATIONS[m.group(1).lower()], "n": _number(m.group(2))}),
    (re.compile(rf"\bnumber of words\b[^.!?\n]{{0,40}}?\b(?:should|must) be {_N} or more\b", re.I),
     lambda m: {"type": "words", "relation": "at_least", "n": _number(m.group(1))}),
    # words a request forbids, quoted or not
    (re.compile(rf"\b{_NEG} (?:use|using|say|saying|mention|mentioning|include|including|contain|containing|have)"
                r"(?: (?:any )?(?:the|these|negative))?(?: following)? (?:key)?words?:?(?: such as)? "
                rf"({_QLIST}|{_LIST})",
                re.I),
     lambda m: {"type": "exclude", "words": _items(m.group(1))}),
    (re.compile(rf"\b{_NEG} (?:use|using|say|saying|mention|mentioning|include|including)(?: the)? ({_QLIST})", re.I),
     lambda m: {"type": "exclude", "words": _items(m.group(1))}),
    (re.compile(rf"\bavoid(?: using)?(?: the)? (?:key)?words?:? ({_QLIST}|{_LIST})", re.I),
     lambda m: {"type": "exclude", "words": _items(m.group(1))}),
    (re.compile(rf"\bthe words? ({_LIST}) (?:cannot|can't|must not|should not|shouldn't|mustn't) (?:be|appear)\b",
                re.I), lambda m: {"type": "exclude", "words": _items(m.group(1))}),
    # words a request asks for, quoted or not
    (re.compile(rf"(?<!not )(?<!n't )(?<!never )(?<!without )\b(?:include|use|mention|contain|has|have)s? "
                rf"(?:the|these) (?:(?:key)?(?:words?|items):? ({_QLIST}|{_LIST})|(?:line|phrase):? ({_QLIST}))", re.I),
     lambda m: {"type": "include", "words": _items(m.group(1) or m.group(2))}),
    (re.compile(rf"(?<!not )(?<!n't )(?<!never )(?<!without )\b(?:include|mention)s? ({_QLIST})", re.I),
     lambda m: {"type": "include", "words": _items(m.group(1))}),
    # an end phrase written without quotation marks, to the end of its sentence
    (re.compile(r"\b(?:end|finish|conclude)(?: (?:your|the) (?:entire |whole )?\w+| it)? with ?(?:(?:the|this) exact "
                r"phrase:?|(?:the|this) phrase:|exactly:|:)\s*([^\s\"“'‘][^\n\"“”]*?[.!?])(?=\s|$)", re.I),
     lambda m: {"type": "ends_with", "phrase": _phrase(m.group(1))}),
    (re.compile(r"\bvery end of your (?:entire )?response should read exactly like:\s*([^\n\"“”]+?[.!?])(?=\s|$)",
                re.I), lambda m: {"type": "ends_with", "phrase": _phrase(m.group(1))}),
    # capitals and lower case, in other words
    (re.compile(r"\bonly use capital letters\b|\bcapitali[sz]e (?:every|each|all) letters?\b|"
                r"\ball letters in your (?:entire )?(?:response|answer|reply) (?:should|must) be capitali[sz]ed\b",
                re.I), lambda m: {"type": "uppercase"}),
    (re.compile(r"\b(?:with )?no capital letters\b|\bnot a single letter\b[^.!?\n]{0,50}\bis capitali[sz]ed\b", re.I),
     lambda m: {"type": "lowercase"}),
    # bullets: "exactly 9 very short bullet points", "exactly 3 names ... using markdown bullet points"
    (re.compile(rf"\b(?:exactly |in |with |using |as )?{_N} (?:(?:very|short|brief|concise|key|main|simple|"
                r"markdown|separate|distinct)\s+){1,3}bullet(?:ed)?[- ]points?\b", re.I),
     lambda m: {"type": "bullets", "n": _number(m.group(1))}),
    (re.compile(rf"\b(?:list|name|give|write|provide) exactly {_N} (?:[a-z-]+ ){{0,3}}?[a-z-]+s\b[^\d\n]{{0,100}}?"
                r"\b(?:using|in|as|into|with) (?:markdown )?bullet points?\b", re.I),
     lambda m: {"type": "bullets", "n": _number(m.group(1))}),
    # parts separated by ***: "3 parts, separated by ***", "at least 5 sections, separated using 3 asterisks"
    (re.compile(rf"\b(at least |exactly )?{_N} (?:[a-z]+ )?(?:sections|parts|stanzas|paragraphs|steps)\b"
                r"[^*\n]{0,100}?"
                rf"\b(?:separat\w*|divid\w*)\b[^.!?\n*]{{0,40}}?{_SEP}", re.I),
     lambda m: {"type": "paragraphs", "n": _number(m.group(2)), "by": "***",
                **({"relation": "at_least"} if (m.group(1) or "").lower().startswith("at least") else {})}),
    # how often a word or a letter appears
    (re.compile(rf"\bthe (word|letter) ([\"“'‘]?{_ITEM}[\"”'’]?|[\"“'‘][!?.,;:][\"”'’]) (?:should |must |will |to )?"
                rf"(?:appears?|show up|occurs?|be used|be included)? ?(?:in (?:the|your) (?:\w+ )?(?:response|answer|"
                rf"reply|song|poem) )?{_RELATION} {_N}\b", re.I),
     lambda m: _times(m.group(2), m.group(1).lower(), m.group(3), m.group(4))),
    (re.compile(rf"\b(?:include|use|contain|using)s? the (word|letter) ([\"“'‘]?{_ITEM}[\"”'’]?) {_RELATION} {_N}\b",
                re.I), lambda m: _times(m.group(2), m.group(1).lower(), m.group(3), m.group(4))),
    (re.compile(rf"\bthe (word|letter) ([\"“'‘]?{_ITEM}[\"”'’]?) (?:should |must |will )?(?:appear|occur) {_N} or more "
                r"times\b", re.I), lambda m: _times(m.group(2), m.group(1).lower(), "at least", m.group(3))),
    (re.compile(rf"\bthe (word|letter) ([\"“'‘]?{_ITEM}[\"”'’]?) (?:should |must |will )?(?:appear|occur) {_N} or "
                rf"{_N} times\b", re.I),
     lambda m: [_times(m.group(2), m.group(1).lower(), "at least", m.group(3)),
                _times(m.group(2), m.group(1).lower(), "at most", m.group(4))]),
    (re.compile(rf"\b{_NEG} (?:use|using|contain|containing|include|including)? ?(?:any )?(?:the )?letter "
                rf"([\"“'‘]?[A-Za-z][\"”'’]?)(?: (more than) {_N})?(?=[\s.,;!?])", re.I),
     lambda m: (_times(m.group(1), "letter", m.group(2), m.group(3), negated=True) if m.group(2)
                else {"type": "letters", "letter": _phrase(m.group(1)).lower(), "relation": "less_than", "n": 1})),
    # a table of N rows: "in a table with three rows", "a 5-row table"
    (re.compile(rf"\btable (?:with|of|in|that has) (?:exactly |only )?{_N} rows\b|\b{_N}[- ]rows? table\b", re.I),
     lambda m: {"type": "rows", "n": _number(m.group(1) or m.group(2))}),
    # highlights, placeholders, a postscript
    (re.compile(rf"\b(?:highlight|italici[sz]e)\w* (?:at least )?{_N} (?:[a-z]+ )?(?:sections?|parts?|words|keywords|"
                r"phrases|names)|"
                rf"\bat least {_N} (?:[a-z]+ )?(?:sections?|parts?) (?:should be |must be )?highlighted\b|"
                rf"\bat least {_N} italic\b", re.I),
     lambda m: {"type": "highlights", "n": _number(next(g for g in m.groups() if g))}),
    (re.compile(rf"\b(?:at least )?{_N} placeholders?\b", re.I),
     lambda m: {"type": "placeholders", "n": _number(m.group(1))}),
    (re.compile(r"\bpostscript\b[^.!?\n]{0,40}?\b(?:starting|beginning|indicated|marked) (?:with|by) (P\.\s?P\.\s?S\.?|"
                r"P\.\s?S\.?)", re.I), lambda m: {"type": "postscript", "marker": m.group(1).upper().replace(" ", "")}),
]


# Wordings a pattern matches that state another constraint, one trinity cannot check: a few
# capitalised words ("at least 10 words in all capital letters"), how a paragraph or section
# starts ("Paragraph 2 must start with ..."). Read as the pattern reads them, they would fail
# answers that follow the request (found on IFEval's train split, and by comparing the checks' verdicts with
# IFEval's checker on the recorded validation drafts: docs/freeform.md).
_CAPITAL_WORDS_BEFORE = re.compile(r"\b(?:words|phrases)\s+(?:(?:with|in|using|written in)\s+)?$|"
                                   r"\bwords\b(?:\s+\w+){0,4}\s+(?:should|must|will)\s+be\s+$", re.I)
_TIMES_AFTER = re.compile(r"^\s*(?:should |must |will )?(?:appear |be used )?(?:at least |at most |less than |"
                          r"more than |fewer than |exactly )?\d+\s+times|^\s+(?:at least|at most|less than|more than|"
                          r"fewer than)\s+\d+", re.I)
_CAPITAL_AFTER = re.compile(r"^\s+(?:or phrases\s+)?(?:\w+\s+)?(?:in|with|using)\s+(?:all\s+)?(?:capital|caps|upper)|"
                            r"^[^.!?\n]{0,30}\bshould be\s+(?:in\s+)?(?:all\s+)?(?:capital|caps|upper)", re.I)
_TRYING_BEFORE = re.compile(r"\b(?:trying|try|tries|tried|attempting|attempts?)\s+to\s+$", re.I)
_NEGATED_BEFORE = re.compile(r"\b(?:avoid|not|never|don't|without|refrain)\b[^.!?\n]{0,30}$", re.I)
_PART_BEFORE = re.compile(r"\b(?:paragraph|section|sentence|line|bullet|point|part|stanza|verse)s?\b[^.!?\n]{0,25}$",
                          re.I)


def _other(constraint: Constraint, text: str, match: re.Match[str]) -> bool:
    """Whether `match` states something else than `constraint` (the wordings above)."""
    before, after = text[max(0, match.start() - 60): match.start()], text[match.end(): match.end() + 60]
    kind = constraint["type"]
    if _TRYING_BEFORE.search(before):  # "two people trying to avoid the letter t": the story, not the request
        return True
    if kind == "uppercase":
        return bool(_CAPITAL_WORDS_BEFORE.search(before) or _TIMES_AFTER.search(after)
                    or re.search(r"\bcapitali[sz]ed words\b", before + after, re.I))
    if kind == "lowercase":  # "no lowercase letters allowed": the opposite
        return bool(re.search(r"\b(?:no|not|any|without|never)\b[^.!?\n]{0,60}$", before, re.I))
    if kind == "words":
        return bool(_CAPITAL_AFTER.search(after))
    if kind == "starts_with":
        return bool(_PART_BEFORE.search(before))
    if kind in ("frequency", "letters") and constraint["relation"] in ("more_than", "at_least"):
        # "avoid using the letter i more than twice": the negation turns it around (read as at_most)
        return bool(_NEGATED_BEFORE.search(before))
    return False


def parse(text: str) -> list[Constraint]:
    """The constraints a request states (module docstring), each once, in the order found."""
    found: list[Constraint] = []
    for pattern, build in _PATTERNS:
        for match in pattern.finditer(text):
            built = build(match)
            for constraint in built if isinstance(built, list) else [built]:
                if constraint.get("words") == [] or _other(constraint, text, match):
                    continue
                if constraint not in found:
                    found.append(constraint)
    # "exactly 2 paragraphs, separated by ***" is read twice: the paragraphs as counted either way
    plain = {c["n"] for c in found if c["type"] == "paragraphs" and "by" not in c and "relation" not in c}
    return [c for c in found if not (c["type"] == "paragraphs" and "by" in c and c["n"] in plain)]


@dataclass(frozen=True)
class Constraints:
    """A free-form task's checks: the constraints it states (`Checks`, answer_kinds/base.py) and,
    with `repeats`, whether the answer degenerates into repeats (tasks/repeats.py).

    `run` records {"passed", "failing", "error", "checked", "repeats"}: "passed" and "error" are
    the stated constraints' ("checked" of them; 0: none stated), which later prompts and the
    coordinator see (`check_note`, `Turn.examples_passed`); "repeats" is what repeats past its
    limit (None: nothing, or not checked), which the drafts policy reads (turns/choose.py
    `Draft`) and no prompt shows."""

    items: tuple[tuple[tuple[str, Any], ...], ...]
    repeats: bool = False

    @classmethod
    def of(cls, constraints: Sequence[Constraint], repeats: bool = False) -> Constraints | None:
        """Constraints from dicts (None when there are none and `repeats` is off); each is
        validated here."""
        for c in constraints:
            if c.get("type") not in _CHECKS:
                raise ValueError(f"unknown constraint type {c.get('type')!r}: use one of {', '.join(TYPES)}")
        frozen = tuple(tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in c.items()))
                       for c in constraints)
        return cls(frozen, repeats) if frozen or repeats else None

    @property
    def dicts(self) -> list[Constraint]:
        return [{k: list(v) if isinstance(v, tuple) else v for k, v in c} for c in self.items]

    def failures(self, text: str) -> list[str]:
        """What is wrong with `text`, one sentence per failed constraint (none: all passed)."""
        body = answer_body(text)
        return [why for c in self.dicts for passed, why in [check(c, body)] if not passed]

    def run(self, reply: str, strict: bool = False) -> dict[str, Any]:
        failed = self.failures(reply)
        found = repeated(answer_body(reply)) if self.repeats else None
        return {"passed": not failed, "failing": None, "error": "; ".join(failed) or None,
                "checked": len(self.items), "repeats": found.describe() if found else None}


def score_constraints(output: str, reference: Any) -> float:
    """The `freeform` scorer: 1.0 when `output` meets every constraint of `reference` (a
    non-empty list of constraint dicts; anything else is a bug in the task data)."""
    if not isinstance(reference, list) or not reference:
        raise ValueError('a free-form item\'s reference is its list of constraints, e.g. [{"type": "no_commas"}]')
    checks = Constraints.of(reference)
    assert checks is not None
    return 0.0 if checks.failures(output) else 1.0
