"""The examples a code question shows in its own text: `assert` lines and `>>>` doctest
lines, as Python asserts (HumanEval items' `examples`; what `ask` and `serve` run on code
answers: turns/settle.py)."""

from __future__ import annotations

import ast
import re

# An assert at a line's start, or inside a line ("Your code should pass: assert f(1) == 2").
_ASSERT_LINE = re.compile(r"(?:^|(?<=[\s:`]))(assert\s[^\n`]+)", re.MULTILINE)
_DOCTEST = re.compile(r"^\s*>>>\s?(.+)\n\s*([^\s>].*)$", re.MULTILINE)
# "f(1, 2) == 3", "f(1, 2) ➞ 3", "f(1, 2) => 3", "f(1, 2) -> 3" alone on a line.
_CALL_LINE = re.compile(r"^\s*([A-Za-z_]\w*\(.*\))\s*(?:==|➞|=>|->)\s*(.+?)\s*$", re.MULTILINE)


def examples_in_text(text: str) -> str | None:
    """The examples a question shows (for `ask` and `serve`): its `assert` lines, each
    `>>> call` followed by an expected-output line, and each line `call(...) == value` (or
    `➞`, `=>`, `->` for `==`), as `assert call == expected`; None when
    it shows none. Lines that do not parse as Python are left out."""
    found = [m.group(1).strip() for m in _ASSERT_LINE.finditer(text)]
    found += [f"assert {call.strip()} == {expected.strip()}" for call, expected in _DOCTEST.findall(text)]
    found += [f"assert {call.strip()} == {expected.strip()}" for call, expected in _CALL_LINE.findall(text)]
    kept = []
    for line in found:
        try:
            ast.parse(line)
        except SyntaxError:
            continue
        if line not in kept:
            kept.append(line)
    return "\n".join(kept) or None

