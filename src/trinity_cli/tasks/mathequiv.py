"""When two LaTeX answers are the same: normalisation (spacing commands, \\left/\\right,
\\dfrac, text units, degrees, "x =" prefixes, trailing zeros), then structure (tuples,
intervals, matrices, unordered solution lists), then sympy for plain algebra. Used by the
math scorer and by answer comparison (tasks/answers.py)."""

from __future__ import annotations

import re
from typing import Any


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


_UNIT_COMMANDS = r"\\(?:text|textrm|textnormal|textbf|mbox|mathrm|operatorname)"


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


def math_equal(a: str, b: str) -> bool:
    """Whether two normalised LaTeX answers (see `normalize_math`) are the same."""
    if a == b:
        return True
    ca, cb = _matrix_cells(a), _matrix_cells(b)
    if ca is not None or cb is not None:
        if ca is None or cb is None or [len(r) for r in ca] != [len(r) for r in cb]:
            return False
        return all(
            math_equal(x, y) for ra, rb in zip(ca, cb, strict=True) for x, y in zip(ra, rb, strict=True)
        )
    ma, mb = _BRACKETS.match(a), _BRACKETS.match(b)
    if ma and mb:
        if (ma.group(1), ma.group(3)) != (mb.group(1), mb.group(3)):
            return False
        xs, ys = _split_top_level(ma.group(2)), _split_top_level(mb.group(2))
        if len(xs) > 1 or len(ys) > 1:
            return len(xs) == len(ys) and all(math_equal(x, y) for x, y in zip(xs, ys, strict=True))
    xs, ys = _split_top_level(a), _split_top_level(b)
    if len(xs) > 1 or len(ys) > 1:  # "1,2,3": a list of solutions, in any order
        if len(xs) != len(ys):
            return False
        unmatched = list(ys)
        for x in xs:
            hit = next((y for y in unmatched if math_equal(x, y)), None)
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
