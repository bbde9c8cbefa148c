"""Errors a user can act on.

Every error the library raises for a user-facing reason is a `TrinityError`: a one-line
message saying what is wrong plus a hint saying what to do. Only `entry.py` turns them into
exit codes; `TRINITY_DEBUG=1` makes it re-raise them with the traceback.

Library text names an option by its parameter name, marked with `option("input_dims")`; read
as a library error the mark shows as `input_dims` (backticks), and the command line's entry point
shows the flag that sets it (`--input-dims`) through `name_options(text, flags)`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

# Control characters a message never holds otherwise, so a mark cannot be mistaken for text.
_MARK = re.compile("\x1e([a-z][a-z0-9_]*)\x1f")


def option(name: str) -> str:
    """The mark of the option whose parameter is `name` (e.g. "input_dims"), for error and
    warning text; `name_options` turns it into words."""
    return f"\x1e{name}\x1f"


def option_names(text: str) -> list[str]:
    """The parameter names marked in `text`, in order."""
    return _MARK.findall(text)


def name_options(text: str, flags: Mapping[str, str] | None = None) -> str:
    """`text` with each `option(name)` mark replaced by `flags[name]` (the command line passes
    its flags), or by the name in backticks when `flags` does not have it."""
    return _MARK.sub(lambda m: (flags or {}).get(m.group(1), f"`{m.group(1)}`"), text)


class TrinityError(Exception):
    """Base class: `message` says what is wrong, `hint` what to do about it; both may hold
    `option()` marks, shown as parameter names here and as flags by `worded(flags)`."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.raw_message = message
        self.raw_hint = hint

    @property
    def message(self) -> str:
        return name_options(self.raw_message)

    @property
    def hint(self) -> str | None:
        return None if self.raw_hint is None else name_options(self.raw_hint)

    def worded(self, flags: Mapping[str, str]) -> tuple[str, str | None]:
        """(message, hint) with options named by `flags` (parameter name -> flag)."""
        hint = None if self.raw_hint is None else name_options(self.raw_hint, flags)
        return name_options(self.raw_message, flags), hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(TrinityError):
    """A pool file, head file or option is invalid."""


class AssetError(TrinityError):
    """A model or data file is missing, truncated or fails its checksum."""


class BackendError(TrinityError):
    """A pool model could not answer."""


class BackendUnavailable(BackendError):
    """The server could not be reached (refused connection, timeout, 5xx after retries)."""


class AuthError(BackendError):
    """The API rejected the key, or the key's environment variable is unset."""


class ModelNotFound(BackendError):
    """The server does not know the requested model."""


class ContextOverflow(BackendError):
    """The prompt does not fit the model's context window, even after truncation."""


class MemberFailed(BackendError):
    """A pool member's call raised; the pool names the member, its kind and the error
    (pool/pool.py). In an episode it is that turn's failure, recorded on the turn
    (episode/turn.py); a command reports it only when no member answered at all."""

    def __init__(self, member: str, kind: str, reason: str, hint: str | None = None) -> None:
        super().__init__(f"member {member!r} (kind {kind}) failed: {reason}", hint)
        self.member, self.kind, self.reason = member, kind, reason


class HeadMismatch(TrinityError):
    """A head file does not fit the pool or backbone it is used with."""


class NotFound(TrinityError):
    """A run, head or pool name that does not exist."""


class SandboxUnavailable(TrinityError):
    """Model-written code must run isolated (strict sandbox) and bubblewrap cannot do it here."""


class DamagedState(TrinityError):
    """A file trinity keeps (a run record, every checkpoint of a run) cannot be read."""


class RunBusy(TrinityError):
    """Another process holds the run's lock: it is evolving (or benching) that run now."""


class DiskFull(TrinityError):
    """A write failed for lack of space (or a file-size limit); nothing half-written remains."""


class NotRecorded(TrinityError):
    """Replay-only mode (TRINITY_REPLAY_ONLY): a call no imported recording holds."""


class SpendingCapReached(TrinityError):
    """A command reached its cap on model calls or dollars (pool/pool.py, `Spending`)."""


class RecordingError(TrinityError):
    """A recording file cannot be read or written (not a recording, damaged, wrong version)."""


class Interrupted(TrinityError):
    """The user pressed Ctrl-C; nothing half-written was kept."""

    exit_code = 130


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """A hint naming the closest matches of `name` among `choices`, or listing them all."""
    options = sorted(choices)
    close = difflib.get_close_matches(name, options, n=3, cutoff=0.5)
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    return "choose from: " + ", ".join(options) if options else "none are defined"
