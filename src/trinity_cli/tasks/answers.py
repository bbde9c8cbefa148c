"""Reading the answer a reply commits to: answer markers, \\boxed{}, numbers, choice
letters, normalised text and LaTeX answers, each as a `FinalAnswer` (`number_answer`,
`choice_answer`, `math_answer`, `exact_answer`, kind-free `final_answer`) and `same_answer`,
which read replies exactly as the scorers do (tasks/scoring.py documents how
each kind is read). Roles, verifiers and bench's vote use these; scorers grade with them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from trinity_cli.tasks.mathequiv import _braced, math_equal, normalize_math

# --------------------------------------------------------------------------- shared bits

# "Answer: 18", "The answer is 18", "Final answer = 18", "answer is: C"; a separator is
# required so that "To answer this, 3 + 4..." is not read as an answer.
_ANSWER_MARK = re.compile(r"\banswer\b\s*(?:is\b\s*:?|[:=：])\s*", re.IGNORECASE)
_CHOICE_MARK = re.compile(
    r"\banswer\b\s*(?:is\b\s*:?|[:=：])\s*|\b(?:option|choice)\s+(?:is\s+)?(?=[(\[]?[A-E]\b)",
    re.IGNORECASE,
)


def _strip_markdown(text: str) -> str:
    return text.replace("**", "").replace("__", "")


# What may stand between a line's start and its answer marker for the marker to be the
# reply's own final answer: "Answer:", "**Final answer:**", "- So the answer is", "Thus, the
# correct answer is". Anything else ("The proposed answer: 18 is wrong") is an unanchored mention.
_ANCHOR_PREFIX = re.compile(
    r"[\s>*#\-]*(?:(?:so|thus|therefore|hence|and)\s*,?\s+)?(?:the\s+)?(?:my\s+|our\s+)?"
    r"(?:(?:final|correct|own)\s+)*$",
    re.IGNORECASE,
)
# An unanchored marker preceded by one of these words quotes someone else's answer.
_QUOTING = re.compile(
    r"\b(?:proposed|given|their|worker'?s|previous|other|suggested|claimed|expected|your|original)"
    r"\s+(?:final\s+)?$",
    re.IGNORECASE,
)


def answer_tails(text: str, marker: re.Pattern[str] = _ANSWER_MARK) -> tuple[list[str], list[str]]:
    """(anchored, unanchored): the rest of the line after each answer marker, last first.

    Anchored tails follow a marker that opens its line (see `_ANCHOR_PREFIX`): the reply's
    own final answer. Unanchored ones follow a marker inside a sentence; mentions of someone
    else's answer ("the proposed answer: 18") are left out of both.
    """
    anchored, loose = [], []
    anchored_lines: set[int] = set()
    for match in marker.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        tail = text[match.end() : line_end if line_end >= 0 else len(text)]
        before = text[line_start : match.start()]
        # A later marker on an anchored line restates that answer: "Final Answer: The final
        # answer is 1/2" reads as 1/2.
        if line_start in anchored_lines or _ANCHOR_PREFIX.fullmatch(before):
            anchored_lines.add(line_start)
            anchored.append(tail)
        elif not _QUOTING.search(before):
            loose.append(tail)
    return anchored[::-1], loose[::-1]


def _answer_tails(text: str, marker: re.Pattern[str] = _ANSWER_MARK) -> list[str]:
    """Every tail `answer_tails` finds: the anchored ones first, each group last first."""
    anchored, loose = answer_tails(text, marker)
    return anchored + loose


def find_boxed(text: str) -> list[str]:
    """Contents of every `\\boxed{...}` / `\\fbox{...}` in `text`, braces matched, in order."""
    found = []
    for match in re.finditer(r"\\(?:boxed|fbox)\s*", text):
        start = match.end()
        if start < len(text) and text[start] == "{":
            content = _braced(text, start)
            if content is not None:
                found.append(content)
        else:  # "\boxed 5": one token up to a space or "$"
            token = re.match(r"[^\s$]+", text[start:])
            if token:
                found.append(token.group(0))
    return found


# --------------------------------------------------------------------------- numeric

_NUMBER = re.compile(
    r"(?<![\w.])(-|−)?\s?\\?\$?\s?"
    r"((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d)|\.\d+)"
    r"(?:\s*/\s*(\d+)(?![\d.]))?"
)


def _parse_number(sign: str | None, digits: str, denominator: str | None) -> Fraction | None:
    try:
        value = Fraction(digits.replace(",", ""))
        if denominator is not None:
            if int(denominator) == 0:
                return None
            value /= int(denominator)
    except (ValueError, ZeroDivisionError):
        return None
    return -value if sign else value


def _numbers_written(text: str) -> list[tuple[str, Fraction]]:
    """Every number in `text` that parses: (as written, value), in order."""
    out = []
    for match in _NUMBER.finditer(text):
        value = _parse_number(match.group(1), match.group(2), match.group(3))
        if value is not None:
            out.append((match.group(0).strip(), value))
    return out


def _numbers(text: str) -> list[Fraction]:
    return [value for _, value in _numbers_written(text)]


def _number_read(text: str) -> tuple[str, Fraction, bool] | None:
    """(as written, value, strong) of the number a reply answers with: strong when an
    answer marker, "####" or \\boxed{} gave it, weak when it is only the reply's last number."""
    text = _strip_markdown(text)
    places = _answer_tails(text)
    if "####" in text:
        places.append(text.rsplit("####", 1)[1])
    places += list(reversed(find_boxed(text)))
    for place in places:
        found = _numbers_written(place)
        if found:
            return found[0][0], found[0][1], True
    found = _numbers_written(text)
    return (found[-1][0], found[-1][1], False) if found else None


def _number_with_strength(text: str) -> tuple[Fraction | None, bool]:
    """(number, strong) of `_number_read`; (None, False) when the reply has no number."""
    read = _number_read(text)
    return (read[1], read[2]) if read else (None, False)


def number_text(text: str) -> str | None:
    """The number a reply answers with (as `extract_number` finds it), as the reply writes it."""
    read = _number_read(text)
    return read[0] if read else None


def extract_number(text: str) -> Fraction | None:
    """The number a reply gives as its answer (see the module docstring), or None."""
    return _number_with_strength(text)[0]


def parse_reference_number(reference: Any) -> Fraction:
    if isinstance(reference, bool):
        raise ValueError(f"numeric reference must be a number, got {reference!r}")
    if isinstance(reference, (int, float)):
        return Fraction(str(reference))
    text = str(reference).strip()
    match = _NUMBER.fullmatch(text) or _NUMBER.fullmatch(text.lstrip("$"))
    value = _parse_number(match.group(1), match.group(2), match.group(3)) if match else None
    if value is None:
        raise ValueError(f"numeric reference is not a number: {reference!r}")
    return value


# --------------------------------------------------------------------------- choice

_LETTERS = "ABCDE"


def _letter_in(tail: str) -> str | None:
    """A choice letter opening an answer tail: "C", "(c)", "C.", "c)", "[B]", "C. Planetary..."."""
    tail = tail.strip().lstrip("*$ ")
    tail = re.sub(r"^\\(?:boxed|text|textbf|mathrm)\{", "", tail)
    match = re.match(r"([(\[]?)([A-Ea-e])([)\]}]?)", tail)
    if not match:
        return None
    opened, letter, closed = match.groups()
    rest = tail[match.end() :]
    if rest[:1].isalnum() or rest[:1] in ("'", "’", "-"):
        return None  # the start of a word: "Cats", "A's"
    if letter.isupper() or opened or closed:
        return letter.upper()
    # A bare lower-case letter counts only when nothing word-like follows it on the line:
    # "answer: c." does, "the answer is a good one" does not.
    return letter.upper() if re.fullmatch(r"[\s.,;:!]*", rest) else None


def extract_choice(text: str) -> str | None:
    """The choice letter (A-E, upper case) a reply commits to, or None."""
    text = _strip_markdown(text)
    for tail in _answer_tails(text, _CHOICE_MARK):
        letter = _letter_in(tail)
        if letter:
            return letter
    marked = re.findall(r"\(([A-E])\)|\[([A-E])\]|\\boxed\{\s*(?:\\text\{)?([A-Ea-e])\}", text)
    if marked:
        return str(next(g for g in marked[-1] if g)).upper()
    stripped = text.strip().strip("*`'\". ()[]")
    if len(stripped) == 1 and stripped.upper() in _LETTERS:
        return stripped.upper()
    last = stripped.splitlines()[-1].strip() if stripped else ""
    match = re.match(r"^([A-E])[.):]\s", last + " ")
    return match.group(1) if match else None


# --------------------------------------------------------------------------- exact


def normalize_text(text: str) -> str:
    """Case-folded, whitespace collapsed, outer quotes / markdown / final punctuation removed."""
    text = _strip_markdown(text).strip()
    text = re.sub(r"\s+", " ", text)
    text = text.strip("`'\"“”‘’ ")
    text = text.rstrip(".!;,").strip("`'\"“”‘’ ")
    return text.casefold()


# --------------------------------------------------------------------------- math

def extract_math_answer(text: str) -> str | None:
    """The LaTeX answer of a reply: its last `\\boxed{}`, else the last "answer is" tail."""
    boxed = find_boxed(text)
    if boxed:
        return boxed[-1]
    for tail in _answer_tails(_strip_markdown(text)):
        tail = tail.strip()
        dollars = re.fullmatch(r"\$+(.+?)\$+\.?(?:\s*I hope it is correct\.?)?", tail)
        if dollars:
            return dollars.group(1)
        if tail:
            return tail.rstrip(".")
    return None


def marked_answer(text: str) -> str | None:
    """The text a reply marks as its answer, cleaned for showing: its last \\boxed{}
    content, else its latest answer tail (anchored first) without markdown, quotes,
    surrounding dollars and a final period; None when it marks none."""
    boxed = find_boxed(text)
    if boxed and boxed[-1].strip():
        return boxed[-1].strip()
    for tail in _answer_tails(_strip_markdown(text)):
        value = tail.strip().strip("`'\"“”‘’ ")
        dollars = re.fullmatch(r"\$+(.+?)\$+\.?", value)
        value = dollars.group(1).strip() if dollars else value.rstrip(".").strip()
        if value:
            return value
    return None


# --------------------------------------------------------------------------- final answers


@dataclass(frozen=True)
class FinalAnswer:
    """The answer a reply commits to, read exactly as the scorer of `kind` reads it.

    `value` is canonical text (numeric: a reduced fraction "84", "3/4"; choice: "C"; math:
    `normalize_math` of the LaTeX; exact: `normalize_text`). `strong` is False when the value
    is only a fallback (the reply's last number, or the whole reply) rather than something
    the reply marks as its answer (an anchored or unquoted "Answer:" line, "####", \\boxed{},
    a choice letter).
    """

    kind: str
    value: str
    strong: bool


def _generic_answer(text: str) -> FinalAnswer | None:
    """A kind-free reading: the last \\boxed{} or answer tail, classified as a choice letter
    (alone, or opening "B. text" / "(B)"), else LaTeX (read as the math scorer reads it),
    else its first number (as the numeric scorer reads a tail), else normalised text; with
    no tail at all, the reply's last number (weak)."""
    plain = _strip_markdown(text)
    anchored, loose = answer_tails(plain)
    boxed = find_boxed(plain)
    candidates = ([boxed[-1]] if boxed else []) + anchored + loose
    for raw in candidates:
        value = raw.strip().strip("*$ ").strip()
        if not value:
            continue
        letter = re.fullmatch(r"[(\[]?([A-E])(?:[)\]]|[.:)](?:\s.*)?)?", value)
        if letter:
            return FinalAnswer("choice", letter.group(1), True)
        if re.search(r"[\\^{]", value):  # LaTeX: compare as the math scorer does
            return FinalAnswer("math", normalize_math(value), True)
        found = _numbers(value)
        if found:  # as the numeric scorer reads a tail: its first number
            return FinalAnswer("numeric", str(found[0]), True)
        return FinalAnswer("exact", normalize_text(value), True)
    found = _numbers(plain)
    return FinalAnswer("numeric", str(found[-1]), False) if found else None


def final_answer(text: str) -> FinalAnswer | None:
    """The answer `text` commits to, read kind-free (`_generic_answer`); each answer kind reads
    its own (answer_kinds/short.py, with the readers above)."""
    return _generic_answer(text)


def number_answer(text: str) -> FinalAnswer | None:
    """A reply's number as the numeric scorer reads it (strong when marked)."""
    number, strong = _number_with_strength(text)
    return FinalAnswer("numeric", str(number), strong) if number is not None else None


def choice_answer(text: str) -> FinalAnswer | None:
    letter = extract_choice(text)
    return FinalAnswer("choice", letter, True) if letter else None


def math_answer(text: str) -> FinalAnswer | None:
    latex = extract_math_answer(text)
    return FinalAnswer("math", normalize_math(latex), True) if latex is not None else None


def exact_answer(text: str) -> FinalAnswer | None:
    tails = _answer_tails(_strip_markdown(text))
    if tails and tails[0].strip():
        return FinalAnswer("exact", normalize_text(tails[0]), True)
    return FinalAnswer("exact", normalize_text(text), False) if text.strip() else None


def same_answer(a: FinalAnswer, b: FinalAnswer) -> bool:
    """Whether two final answers agree: equal values of one kind (math: `math_equal`)."""
    if {a.kind, b.kind} <= {"math", "numeric"} and "math" in (a.kind, b.kind):
        return math_equal(normalize_math(a.value), normalize_math(b.value))
    if a.kind != b.kind:
        return False
    if a.kind == "math":
        return math_equal(a.value, b.value)
    return a.value == b.value
