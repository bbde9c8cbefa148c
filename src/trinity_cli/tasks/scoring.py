"""Scorers: grade a model's reply against a task item's reference.

Every scorer is `score(output_text, reference) -> float` and returns 1.0 or 0.0. They never
raise on odd model output (an unparseable reply scores 0.0); a malformed *reference* is a
bug in the task data and raises `ValueError`.

References, by scorer:

    numeric   a number or its text: 18, "1,234", "-0.5", "3/4"
    math      LaTeX text of the answer, as inside \\boxed{}: "\\frac{\\pi}{2}", "(2,\\infty)"
    choice    a letter "A".."E"
    exact     a string, compared after normalisation (case, spaces, outer punctuation)
    code      {"tests": str, "prelude": str = "", "entry_point": str | None, "timeout_s": float = 10}

How answers are read from a reply:

    numeric   the number after the last "Answer:" / "answer is" marker, else after "####",
              else in the last \\boxed{}, else the last number in the reply. Commas between
              digit groups, "$", units after the number and a trailing period are ignored;
              numbers compare as exact rationals, so 84.0 == 84 and 0.5 == 1/2.
    math      the last \\boxed{...} (braces matched), else the text after the last "answer
              is" / "Answer:". Both sides are normalised (spacing commands, \\left/\\right,
              \\dfrac, text units, degrees, "x =" prefixes, trailing zeros); if the strings
              still differ and both are plain algebra, sympy decides (see `_sympy_equal`).
    choice    the letter after the last "Answer:" / "answer is" / "option", else a letter in
              parentheses or bold, else a reply that is just a letter.
    code      the first fenced code block that defines the entry point (else the first
              fenced block, else the whole reply) runs with the tests in `sandbox.run_python`;
              it passes when the process exits 0 *after* the tests ran (a sentinel printed
              after the tests guards against `exit(0)` in the solution). A reference with
              "sandbox": "strict" refuses to run without isolation (SandboxUnavailable).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from trinity_cli.errors import ConfigError, did_you_mean

Scorer = Callable[[str, Any], float]

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


def _braced(text: str, open_at: int) -> str | None:
    """The text inside the brace group opening at `text[open_at] == "{"`, or None if unclosed.

    Escaped braces (`\\{`, `\\}`: set notation) do not count.
    """
    depth, i = 0, open_at
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
        i += 1
    return None


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


def _numbers(text: str) -> list[Fraction]:
    out = []
    for match in _NUMBER.finditer(text):
        value = _parse_number(match.group(1), match.group(2), match.group(3))
        if value is not None:
            out.append(value)
    return out


def _number_with_strength(text: str) -> tuple[Fraction | None, bool]:
    """(number, strong): strong when an answer marker, "####" or \\boxed{} gave it, weak when
    it is only the reply's last number."""
    text = _strip_markdown(text)
    for tail in _answer_tails(text):
        found = _numbers(tail)
        if found:
            return found[0], True
    if "####" in text:
        found = _numbers(text.rsplit("####", 1)[1])
        if found:
            return found[0], True
    for boxed in reversed(find_boxed(text)):
        found = _numbers(boxed)
        if found:
            return found[0], True
    found = _numbers(text)
    return (found[-1], False) if found else (None, False)


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


def score_numeric(output: str, reference: Any) -> float:
    expected = parse_reference_number(reference)
    got = extract_number(output)
    return 1.0 if got is not None and got == expected else 0.0


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


def score_choice(output: str, reference: Any) -> float:
    expected = str(reference).strip().upper()
    if len(expected) != 1 or expected not in _LETTERS:
        raise ValueError(f"choice reference must be a letter A-E, got {reference!r}")
    return 1.0 if extract_choice(output) == expected else 0.0


# --------------------------------------------------------------------------- exact


def normalize_text(text: str) -> str:
    """Case-folded, whitespace collapsed, outer quotes / markdown / final punctuation removed."""
    text = _strip_markdown(text).strip()
    text = re.sub(r"\s+", " ", text)
    text = text.strip("`'\"“”‘’ ")
    text = text.rstrip(".!;,").strip("`'\"“”‘’ ")
    return text.casefold()


def score_exact(output: str, reference: Any) -> float:
    tails = _answer_tails(_strip_markdown(output))
    candidate = tails[0] if tails and tails[0].strip() else output
    return 1.0 if normalize_text(candidate) == normalize_text(str(reference)) else 0.0


# --------------------------------------------------------------------------- math

_UNIT_COMMANDS = r"\\(?:text|textrm|textnormal|textbf|mbox|mathrm|operatorname)"


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


def _fix_fracs(s: str) -> str:
    """\\frac12 -> \\frac{1}{2}, \\frac{a}b -> \\frac{a}{b}, \\sqrt2 -> \\sqrt{2}."""
    s = re.sub(r"\\sqrt\s*([0-9a-zA-Z])", r"\\sqrt{\1}", s)
    s = re.sub(r"\\frac\s*([0-9a-zA-Z])\s*([0-9a-zA-Z])", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*([0-9a-zA-Z])\s*\{", r"\\frac{\1}{", s)
    out, i = [], 0
    while i < len(s):
        if s.startswith("\\frac{", i):
            inner = _braced(s, i + 5)
            end = i + 5 + (len(inner) + 2 if inner is not None else 0)
            if inner is not None and end < len(s) and s[end] not in "{" and s[end].isalnum():
                out.append(f"\\frac{{{inner}}}{{{s[end]}}}")
                i = end + 1
                continue
        out.append(s[i])
        i += 1
    return "".join(out)


def normalize_math(answer: str) -> str:
    """A canonical text form of a LaTeX answer, for string comparison."""
    s = answer.strip()
    s = s.replace("\\$", "").replace("$", "")
    s = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg)(?![a-zA-Z])", "", s)
    s = re.sub(r"(?<!\\)\\[!,;: ]", " ", s).replace("~", " ")  # spacing, not the "\\\\" row break
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\displaystyle", "")
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|°", "", s)
    s = s.replace("\\%", "").replace("%", "")
    # A whole answer in \text{} is a word answer ("\text{east}"); \text{} after a value is a unit.
    whole = re.fullmatch(_UNIT_COMMANDS + r"\{([^{}]*)\}", s.strip())
    if whole:
        s = whole.group(1)
    else:
        s = re.sub(r"(?<=\S)\s*" + _UNIT_COMMANDS + r"\{[^{}]*\}(?:\s*\^\s*\{?\d\}?)?", "", s)
        s = re.sub(_UNIT_COMMANDS + r"\{([^{}]*)\}", r"\1", s)
    # Plain unit words after a number: "5 cm", "\frac{270}{7} degrees".
    s = re.sub(r"(?<=[\d}])\s+[a-zA-Z]{2,}(?:\s+[a-zA-Z]{2,})*\s*(?:\^\s*\d)?\s*$", "", s)
    s = s.strip().rstrip(".").strip()
    lhs = re.fullmatch(r"\s*[a-zA-Z]\s*(?:=|\\in(?![a-zA-Z]))\s*([^=]+)", s)
    if lhs:  # "x = 5" -> "5", "x \in [-2,7]" -> "[-2,7]"
        s = lhs.group(1)
    braces = re.fullmatch(r"\s*\\\{(.*)\\\}\s*", s)
    if braces:  # a set "\{1, 2\}" compares as an unordered list
        s = braces.group(1)
    s = _fix_fracs(s)
    s = re.sub(r"\s+", "", s)
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):
        s = s.replace(",", "")
    s = re.sub(r"(?<![\d.])\.(\d)", r"0.\1", s)
    s = re.sub(r"(\d+\.\d*?)0+(?!\d)", r"\1", s)
    s = re.sub(r"(\d)\.(?!\d)", r"\1", s)
    simple = re.fullmatch(r"(-?)(\d+)/(\d+)", s)
    if simple:
        s = f"{simple.group(1)}\\frac{{{simple.group(2)}}}{{{simple.group(3)}}}"
    if re.fullmatch(r"[A-Za-z]{2,}", s):  # a word answer: "East" == "east"
        s = s.casefold()
    return s


def _split_top_level(s: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in s:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


_BRACKETS = re.compile(r"^([(\[])(.*)([)\]])$")


_MATRIX = re.compile(r"\\begin\{([pbvB]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}")


def _matrix_cells(s: str) -> list[list[str]] | None:
    match = _MATRIX.fullmatch(s)
    if not match:
        return None
    return [row.split("&") for row in match.group(2).split("\\\\") if row]


def _math_equal(a: str, b: str) -> bool:
    if a == b:
        return True
    ca, cb = _matrix_cells(a), _matrix_cells(b)
    if ca is not None or cb is not None:
        if ca is None or cb is None or [len(r) for r in ca] != [len(r) for r in cb]:
            return False
        return all(
            _math_equal(x, y) for ra, rb in zip(ca, cb, strict=True) for x, y in zip(ra, rb, strict=True)
        )
    ma, mb = _BRACKETS.match(a), _BRACKETS.match(b)
    if ma and mb:
        if (ma.group(1), ma.group(3)) != (mb.group(1), mb.group(3)):
            return False
        xs, ys = _split_top_level(ma.group(2)), _split_top_level(mb.group(2))
        if len(xs) > 1 or len(ys) > 1:
            return len(xs) == len(ys) and all(_math_equal(x, y) for x, y in zip(xs, ys, strict=True))
    xs, ys = _split_top_level(a), _split_top_level(b)
    if len(xs) > 1 or len(ys) > 1:  # "1,2,3": a list of solutions, in any order
        if len(xs) != len(ys):
            return False
        unmatched = list(ys)
        for x in xs:
            hit = next((y for y in unmatched if _math_equal(x, y)), None)
            if hit is None:
                return False
            unmatched.remove(hit)
        return True
    return _sympy_equal(a, b)


_EXPONENT = re.compile(r"-?\d{1,3}(?![\d.])|[a-zA-Z](?![a-zA-Z(])|\([^()*]{1,12}\)")


def _to_plain(latex: str) -> str | None:
    """Normalised LaTeX -> a plain expression sympy can parse, or None if it is not plain algebra."""
    s = latex
    for _ in range(20):
        m = re.search(r"\\frac\{", s)
        if not m:
            break
        num = _braced(s, m.end() - 1)
        if num is None:
            return None
        den_at = m.end() + len(num) + 1
        if den_at >= len(s) or s[den_at] != "{":
            return None
        den = _braced(s, den_at)
        if den is None:
            return None
        s = s[: m.start()] + f"(({num})/({den}))" + s[den_at + len(den) + 2 :]
    s = re.sub(r"\\sqrt\[(\d)\]\{", r"root{\1}{", s)
    s = s.replace("\\sqrt", "sqrt")
    s = s.replace("\\cdot", "*").replace("\\times", "*").replace("\\div", "/").replace("\\pi", "pi")
    s = re.sub(r"root\{(\d)\}\{", r"root(\1,", s)
    s = s.replace("{", "(").replace("}", ")").replace("^", "**")
    if "\\" in s or not re.fullmatch(r"[0-9a-zA-Z+\-*/().,\s]*", s) or len(s) > 80:
        return None
    if any(len(word) > 1 and word not in ("sqrt", "pi", "root") for word in re.findall(r"[a-zA-Z]+", s)):
        return None
    # Refuse power towers and long exponents: sympy would try to build the number.
    for m in re.finditer(r"\*\*", s):
        exponent = _EXPONENT.match(s, m.end())
        if not exponent or s.startswith("**", exponent.end()):
            return None
    if any(len(d) > 30 for d in re.findall(r"\d+", s)):
        return None
    return s


def _sympy_equal(a: str, b: str) -> bool:
    """Whether two plain-algebra answers are equal according to sympy.

    Only expressions built from numbers, single-letter variables, + - * / ^, sqrt and pi
    are parsed (with a private namespace and no builtins); anything else is left to the
    string comparison. sympy is imported only when two answers get this far.
    """
    pa, pb = _to_plain(a), _to_plain(b)
    if pa is None or pb is None:
        return False
    try:
        import sympy
        from sympy.parsing.sympy_parser import (
            implicit_multiplication_application,
            parse_expr,
            standard_transformations,
        )
    except ImportError:
        return False
    names: dict[str, Any] = {
        "__builtins__": {},
        "Integer": sympy.Integer,
        "Float": sympy.Float,
        "Rational": sympy.Rational,
        "Symbol": sympy.Symbol,
        "sqrt": sympy.sqrt,
        "root": sympy.root,
        "pi": sympy.pi,
    }
    local = {c: sympy.Symbol(c) for c in "abcdefghjklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    local["i"] = sympy.I
    transformations = (*standard_transformations, implicit_multiplication_application)
    try:
        ea = parse_expr(pa, local_dict=dict(local), global_dict=dict(names), transformations=transformations)
        eb = parse_expr(pb, local_dict=dict(local), global_dict=dict(names), transformations=transformations)
        if isinstance(ea, tuple) or isinstance(eb, tuple):
            return False
        diff = sympy.simplify(ea - eb)
        if diff == 0:
            return True
        if not diff.free_symbols:
            value = complex(sympy.N(diff))
            scale = max(1.0, abs(complex(sympy.N(eb))))
            return abs(value) <= 1e-9 * scale
    except Exception:  # noqa: BLE001 - any parse or evaluation failure means "not shown equal"
        return False
    return False


def score_math(output: str, reference: Any) -> float:
    got = extract_math_answer(output)
    if got is None:
        return 0.0
    return 1.0 if _math_equal(normalize_math(got), normalize_math(str(reference))) else 0.0


# --------------------------------------------------------------------------- code

_CODE_START = re.compile(r"^(?:def|class|import|from|async\s+def|@)\s*\w", re.MULTILINE)
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(text: str, entry_point: str | None = None) -> str:
    """The program in a reply: a fenced block (preferring one defining `entry_point`) or the reply."""
    blocks: list[tuple[str, str]] = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    blocks = [(lang, body) for lang, body in blocks if lang in ("", "python", "py", "python3")]
    if not blocks:
        # No fences: drop any prose before the first line that starts code.
        lines = text.strip("\n").splitlines()
        start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), 0)
        return "\n".join(lines[start:])
    if entry_point:
        defining = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", re.MULTILINE)
        for _, body in blocks:
            if defining.search(body):
                return body
    for _, body in blocks:
        if _CODE_START.search(body):
            return body
    return blocks[0][1]


def build_program(output: str, reference: dict[str, Any], sentinel: str) -> str:
    """The source run for a code item: prelude, the reply's code, the tests, then the sentinel."""
    entry_point = reference.get("entry_point")
    prelude = reference.get("prelude") or ""
    code = extract_code(output, entry_point)
    defines = entry_point and re.search(
        rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE
    )
    if prelude and entry_point and not defines and code.startswith((" ", "\t")):
        body = prelude + code  # the reply completes the prelude's function body
    else:
        body = prelude + ("\n\n" if prelude else "") + code
    return f"{body}\n\n{reference['tests']}\n\nprint({sentinel!r})\n"


def score_code(output: str, reference: Any) -> float:
    if not isinstance(reference, dict) or not isinstance(reference.get("tests"), str):
        raise ValueError("code reference must be a dict with a 'tests' string")
    from trinity_cli.tasks.sandbox import run_python

    sentinel = f"trinity-tests-done-{secrets.token_hex(8)}"
    program = build_program(output, reference, sentinel)
    result = run_python(program, timeout_s=float(reference.get("timeout_s", 10)),
                        strict=reference.get("sandbox") == "strict")
    return 1.0 if result.passed and sentinel in result.stdout else 0.0


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


# How a task's text asks for its answer, for replies whose task has no scorer (`ask`).
_KIND_HINTS = (
    ("code", re.compile(r"```python|\bpython (?:code|function)\b|\bwrite a (?:python )?function\b", re.I)),
    ("choice", re.compile(r"answer:\s*<letter>|\n\s*\(?[B-E][.)]\s", re.I)),
    ("math", re.compile(r"\\boxed")),
    ("numeric", re.compile(r"answer:\s*<number>", re.I)),
)


def guess_kind(task: str) -> str | None:
    """The scorer kind a task's own wording asks for ("code", "choice", "math", "numeric"), or
    None when it does not say: then answers are compared by `final_answer(text, None)`."""
    for kind, pattern in _KIND_HINTS:
        if pattern.search(task):
            return kind
    return None


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


def final_answer(text: str, kind: str | None = None) -> FinalAnswer | None:
    """The answer `text` commits to, as the `kind` scorer reads it; None when it gives none
    (and always for "code": programs are compared by running them, not by reading)."""
    if kind is None:
        return _generic_answer(text)
    if kind == "numeric":
        number, strong = _number_with_strength(text)
        return FinalAnswer(kind, str(number), strong) if number is not None else None
    if kind == "choice":
        letter = extract_choice(text)
        return FinalAnswer(kind, letter, True) if letter else None
    if kind == "math":
        latex = extract_math_answer(text)
        return FinalAnswer(kind, normalize_math(latex), True) if latex is not None else None
    if kind == "exact":
        tails = _answer_tails(_strip_markdown(text))
        if tails and tails[0].strip():
            return FinalAnswer(kind, normalize_text(tails[0]), True)
        return FinalAnswer(kind, normalize_text(text), False) if text.strip() else None
    return None


def same_answer(a: FinalAnswer, b: FinalAnswer) -> bool:
    """Whether two final answers agree: equal values of one kind (math: `_math_equal`)."""
    if {a.kind, b.kind} <= {"math", "numeric"} and "math" in (a.kind, b.kind):
        return _math_equal(normalize_math(a.value), normalize_math(b.value))
    if a.kind != b.kind:
        return False
    if a.kind == "math":
        return _math_equal(a.value, b.value)
    return a.value == b.value


# --------------------------------------------------------------------------- registry

SCORERS: dict[str, Scorer] = {
    "numeric": score_numeric,
    "math": score_math,
    "choice": score_choice,
    "exact": score_exact,
    "code": score_code,
}


def get_scorer(name: str) -> Scorer:
    try:
        return SCORERS[name]
    except KeyError:
        raise ConfigError(f"unknown scorer {name!r}", hint=did_you_mean(name, SCORERS)) from None
