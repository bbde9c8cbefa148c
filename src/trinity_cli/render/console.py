"""The two consoles and the one-line messages: stdout carries nothing but the answer (or
JSON) and pipes cleanly; everything else goes to stderr. Other render modules print through
`console.out` / `console.err`, read when used, so whatever replaces them (a test) is what they use.
Text that comes from models, users or files (replies, answers, prompts, questions, task names,
paths) is always printed literally: as `rich.text.Text`, escaped, or with `markup=False`, never
parsed as Rich markup, so a reply holding `[bold]` or `[/]` shows as written; and neither
console turns `:name:` into an emoji (a mix such as `gsm8k:train:16` holds `:train:`).

`out` soft-wraps: a line longer than the terminal is written whole and left to the terminal
to wrap, so piped text keeps its own lines. Inside a panel or a tree that would crop every
line at the border, so those are printed with `soft_wrap=False`: their text wraps inside
them at any width, a long unbroken token (a URL) folded across lines.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

err = Console(stderr=True, highlight=False, emoji=False)
out = Console(highlight=False, soft_wrap=True, emoji=False)

ROLE_STYLE = {"thinker": "magenta", "worker": "cyan", "verifier": "yellow"}


def error(message: str, hint: str | None = None) -> None:
    line = Text("error: ", style="bold red")
    line.append(message)
    if hint:
        line.append(f" — {hint}", style="dim")
    err.print(line, soft_wrap=True)


def warning(message: str) -> None:
    """One line on stderr for something the user should know (e.g. code running unisolated)."""
    line = Text("warning: ", style="bold yellow")
    line.append(message)
    err.print(line, soft_wrap=True)


def note(message: str) -> None:
    err.print(Text(message, style="dim"), soft_wrap=True)
