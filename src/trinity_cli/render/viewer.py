"""`trinity inspect --serve` and `--html` in the terminal: where the viewer listens (a
warning when beyond loopback), and what an export wrote."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from trinity_cli.events import Event, ViewerStarted
from trinity_cli.render import console


def viewer_progress(event: Event) -> None:
    """The viewer's lines: its URL once it listens."""
    if isinstance(event, ViewerStarted):
        line = Text("trinity inspect ", style="bold")
        line.append(event.url, style="bold cyan")
        line.append(f"  runs of {event.runs}; Ctrl-C stops it", style="dim")
        console.err.print(line, soft_wrap=True)
        if event.exposed:
            console.warning(f"listening on {event.host}, beyond this machine: anyone who can reach it can read "
                            "every run (questions, replies, prompts)")


def exported(result: Any) -> None:
    """After `--html DIR`: the folder on stdout, what it holds on stderr."""
    console.out.print(Text(str(result.path / "index.html")))
    console.note(f"{result.run}: {result.files} files, {result.bytes / 1e6:.1f} MB"
                 + (f", {result.items} item pages" if result.items else "")
                 + " — open index.html in a browser: no server, nothing fetched")
