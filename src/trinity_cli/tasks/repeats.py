"""A reply that degenerates into repeats, found and trimmed without a model.

A small model sometimes loops: the same table row 132 times, a stanza copied until the token
cap, one word over and over. `repeated(text)` finds it:

- a **line** that appears more than `LINE_LIMIT` (5) times. Lines are compared as read: list
  numbering, bullets, markdown emphasis and closing punctuation aside, any case ("1. The UK
  is ..." and "7. The UK is ..." are the same line); a line of fewer than `LINE_WORDS` (3)
  words is structure, not text ("***", "|---|", "- **Weight:** 20%", "}") and is not counted;
- a run of `NGRAM` (10) words, lower-cased, that appears more than `NGRAM_LIMIT` (15) times:
  a loop within lines ("mother, mother, mother, ...") or across short ones.

The limits were chosen on the 400 recorded drafts of IFEval's validation items
(docs/freeform.md): no reply that ended by itself repeats a 10-word run more than 13 times, and
the replies with a line past 5 copies loop (six identical scenes, one list item nine times).

`asks_for_repetition(request)`: whether the request asks for repeated text ("repeat ... N
times", "write the word hello 50 times", "over and over"), where repeats are the answer and
neither counted nor trimmed. Repeating the request itself once ("repeat the request word for
word"), a chorus, or a word used at least N times within the text do not ask for a line
repeated past the limit.

`trim(text)`: the text with its repeats taken out: every later copy of a line past the limit
is dropped (its first copy kept), and a loop of words is cut where its second turn begins.
Text with no repeat past the limits is returned unchanged.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

LINE_LIMIT = 5
LINE_WORDS = 3
NGRAM = 10
NGRAM_LIMIT = 15

_WORD = re.compile(r"[a-z0-9]+")
_LINE_MARKS = re.compile(r"^[\s>#*\-•+|]*(?:\(?\d+[.):]\s*|[a-z][.)]\s+)?[\s*_\"“'‘]*|[\s*_\"”'’.,;:!?|]*$", re.I)
_TIMES = r"(?:\d+|two|three|four|five|six|seven|eight|nine|ten|twenty|fifty|a hundred|hundred|many|several) times"
_ASKS = re.compile(
    r"\b(?:repeat|say|write|print|type|sing|chant)(?: (?:out|down|back))? (?:(?:the|this|that) )?"
    r"(?:(?:word|words|line|lines|phrase|sentence|name|verse|chorus|refrain) )?"
    rf"(?:[\"“'‘][^\"”'’\n]{{1,80}}[\"”'’]|\w+(?: \w+){{0,3}}) {_TIMES}\b|"
    r"\b(?:over and over|again and again)\b", re.I)


@dataclass(frozen=True)
class Repeat:
    """What repeats past its limit: `kind` "line" or "words", the text, and how many times."""

    kind: str
    text: str
    count: int

    def describe(self) -> str:
        shown = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        what = "the line" if self.kind == "line" else "the words"
        return f"it repeats {what} \"{shown}\" {self.count} times"


def _line_key(line: str) -> str | None:
    """A line as it is compared (module docstring); None when it is too short to count."""
    core = _LINE_MARKS.sub("", line.strip()).casefold()
    return core if len(_WORD.findall(core)) >= LINE_WORDS else None


def _line_counts(text: str) -> Counter[str]:
    return Counter(key for line in text.splitlines() if (key := _line_key(line)) is not None)


def _words(text: str) -> list[re.Match[str]]:
    return list(_WORD.finditer(text.lower()))


def _ngram_counts(words: list[str]) -> Counter[tuple[str, ...]]:
    return Counter(tuple(words[i:i + NGRAM]) for i in range(len(words) - NGRAM + 1))


def repeated(text: str) -> Repeat | None:
    """The line or run of words that repeats past its limit (the most repeated; lines first),
    or None (module docstring)."""
    lines = _line_counts(text)
    if lines:
        line, count = lines.most_common(1)[0]
        if count > LINE_LIMIT:
            return Repeat("line", line, count)
    grams = _ngram_counts([m.group() for m in _words(text)])
    if grams:
        gram, count = grams.most_common(1)[0]
        if count > NGRAM_LIMIT:
            return Repeat("words", " ".join(gram), count)
    return None


def asks_for_repetition(request: str) -> bool:
    """Whether the request asks for repeated text (module docstring)."""
    return _ASKS.search(request) is not None


def trim(text: str) -> str:
    """`text` with its repeats taken out (module docstring)."""
    counts = _line_counts(text)
    over = {key for key, count in counts.items() if count > LINE_LIMIT}
    if over:
        kept, seen = [], set()
        for line in text.splitlines():
            key = _line_key(line)
            if key in over:
                if key in seen:
                    continue
                seen.add(key)
            kept.append(line)
        text = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    matches = _words(text)
    words = [m.group() for m in matches]
    grams = _ngram_counts(words)
    if grams:
        gram, count = grams.most_common(1)[0]
        if count > NGRAM_LIMIT:
            starts = [i for i in range(len(words) - NGRAM + 1) if tuple(words[i:i + NGRAM]) == gram]
            text = text[: matches[starts[1]].start()].rstrip(" ,;:-")
    return text
