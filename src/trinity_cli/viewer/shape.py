"""What every page of the viewer shares: tables as plain dicts, transcripts trimmed to what a
page shows, a run's episodes grouped by item, and the scrub every page passes through before
it leaves the process (no secret, no home directory: `scrub`).

Everything here is plain data in, plain data out: no web framework, no file written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.messages import ROLES
from trinity_cli.paths import shown_path
from trinity_cli.runs.reports import TableView

ROLE_NAMES = [r.value for r in ROLES]

# Turn fields a page does not show: the reply's log-probability summary (numbers for the reader).
_TURN_LEFT_OUT = {"logprob_stats"}


def table(view: TableView, title: str | None = None) -> dict[str, Any]:
    """A TableView as the page draws it: {"title", "header", "rows", "kinds", "numeric_from", "system"}."""
    out = asdict(view)
    if title is not None:
        out["title"] = title
    return out


def turn(data: Mapping[str, Any]) -> dict[str, Any]:
    """A turn (Turn.to_dict) as a page shows it: its None fields and log-probabilities left out."""
    return {k: v for k, v in data.items() if v is not None and k not in _TURN_LEFT_OUT}


def transcript(data: Mapping[str, Any]) -> dict[str, Any]:
    """A transcript (Transcript.to_dict) with its turns trimmed (`turn`)."""
    out = {k: v for k, v in data.items() if v is not None and k != "turns"}
    out["turns"] = [turn(t) for t in data.get("turns") or []]
    return out


def item_key(task: str, item: str) -> str:
    """How bench.json's per_item names an item: "task/id"."""
    return f"{task}/{item}"


def question(transcript_data: Mapping[str, Any] | None) -> str:
    """The question of an episode (its transcript's task), "" when none was kept."""
    return str((transcript_data or {}).get("task") or "")


def group_by_item(episodes: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Episodes (each with "task" and "item") by item key, each item's in the order given."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for ep in episodes:
        out.setdefault(item_key(ep["task"], str(ep["item"])), []).append(ep)
    return out


def shown(path: Any) -> Any:
    """A path a run recorded, as a page shows it (paths.shown_path: relative to the home or
    the recording, never this machine's home directory); anything else as it is."""
    return shown_path(path) if isinstance(path, str) and path else path


# -- the scrub -----------------------------------------------------------------------------
# Environment variables whose values a page must never show, by name.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
REDACTED = "[redacted]"


def scrub_pairs(environ: Mapping[str, str] | None = None, home: Path | None = None) -> list[tuple[str, str]]:
    """(text, replacement) pairs `scrub` applies, longest first: the value of every
    environment variable whose name looks like a secret (API keys, tokens, passwords), this
    TRINITY_HOME (as "TRINITY_HOME") and the user's home directory (as "~")."""
    environ = os.environ if environ is None else environ
    pairs = [(value, REDACTED) for name, value in environ.items() if _SECRET_NAME.search(name) and len(value) >= 4]
    trinity_home = home or paths.home()
    for form in {str(trinity_home), str(trinity_home.resolve())}:
        if len(form) > 1:
            pairs.append((form, "TRINITY_HOME"))
    user_home = environ.get("HOME") or os.path.expanduser("~")
    if user_home and len(user_home) > 1:
        pairs.append((user_home.rstrip("/"), "~"))
    return sorted(set(pairs), key=lambda p: -len(p[0]))


def _clean(text: str, pairs: Sequence[tuple[str, str]]) -> str:
    for value, replacement in pairs:
        if value in text:
            text = text.replace(value, replacement)
    return text


def scrub(obj: Any, pairs: Sequence[tuple[str, str]]) -> Any:
    """`obj` (a page: dicts, lists, strings, numbers) with every string, keys included,
    cleaned of the `scrub_pairs` texts."""
    if isinstance(obj, str):
        return _clean(obj, pairs)
    if isinstance(obj, dict):
        return {_clean(str(k), pairs): scrub(v, pairs) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub(v, pairs) for v in obj]
    return obj
