"""The console entry point (`trinity`, `python -m trinity_cli`): run cli/'s Typer app and turn
whatever it raises into one line on stderr and an exit code (TrinityError: its message and hint;
Ctrl-C and SIGTERM: "interrupted", 130; a bad option: click's message naming it; anything else:
"unexpected ...", 1); `TRINITY_DEBUG=1` re-raises instead. The library's warnings are routed to
the same one-line form. Options that library text names by parameter (`errors.option`) are
shown as the flags that set them (`cli.option_flags`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys

from trinity_cli.cli import OPTIONAL_VALUES, app


def fill_optional_values(args: list[str]) -> list[str]:
    """`args` with the default value after each `OPTIONAL_VALUES` option given without one
    (last, or followed by another option): `--ray --budget 8` -> `--ray local --budget 8`."""
    out: list[str] = []
    for i, arg in enumerate(args):
        out.append(arg)
        if arg == "--":
            return out + args[i + 1:]
        if arg in OPTIONAL_VALUES and (i + 1 == len(args) or args[i + 1].startswith("-")):
            out.append(OPTIONAL_VALUES[arg])
    return out


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class _LibraryWarnings(logging.Handler):
    """The library's warnings (e.g. the code sandbox running without isolation), one line each."""

    def emit(self, record: logging.LogRecord) -> None:
        from trinity_cli.render import console

        console.warning(_worded(record.getMessage()))


def _flags() -> dict[str, str]:
    from trinity_cli.cli import option_flags

    return option_flags()


def _worded(text: str) -> str:
    """Library text with its option marks as this command line's flags."""
    from trinity_cli.errors import name_options, option_names

    return name_options(text, _flags()) if option_names(text) else text


def show_library_warnings() -> None:
    """Route WARNING records of `trinity_cli.*` loggers to `console.warning` (once per process)."""
    logger = logging.getLogger("trinity_cli")
    if not any(isinstance(h, _LibraryWarnings) for h in logger.handlers):
        logger.addHandler(_LibraryWarnings(logging.WARNING))


def _click_types(name: str) -> tuple[type[BaseException], ...]:
    """The exception class `name` as click defines it and as Typer does: Typer >= 0.2x
    vendors click (`typer._click`) and raises its own copies, which are not click's."""
    import importlib

    found: list[type[BaseException]] = []
    for module in ("click.exceptions", "typer._click.exceptions", "typer.exceptions"):
        try:
            cls = getattr(importlib.import_module(module), name, None)
        except ImportError:
            continue
        if isinstance(cls, type) and issubclass(cls, BaseException) and cls not in found:
            found.append(cls)
    return tuple(found)


def _usage_error(exc: BaseException) -> tuple[str, str | None, int] | None:
    """(message, hint, exit code) of a click/Typer error (a bad option value, an unknown
    option or command...), or None for anything else. The message names the option."""
    if not isinstance(exc, _click_types("ClickException")):
        return None
    message = exc.format_message()  # type: ignore[attr-defined]
    hint = None
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, _click_types("UsageError")):
        command = ctx.command_path if ctx is not None else "trinity"
        hint = f"see: {command} --help"
        if isinstance(exc, _click_types("NoArgsIsHelpError")):  # bare `trinity`: Typer showed the help
            return "", None, int(exc.exit_code)  # type: ignore[attr-defined]
    return message, hint, int(exc.exit_code)  # type: ignore[attr-defined]


def main() -> None:
    """Console entry point: run the app, turning errors into one line and an exit code."""
    debug = os.environ.get("TRINITY_DEBUG") == "1"
    from trinity_cli.errors import Interrupted, TrinityError

    # `kill` (SIGTERM) takes the same path as Ctrl-C: half-made runs are removed on the way out.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    show_library_warnings()

    try:
        # Typer turns Ctrl-C into a return value of 130 when not in standalone mode.
        code = app(args=fill_optional_values(sys.argv[1:]), prog_name="trinity", standalone_mode=False)
        if code == Interrupted.exit_code:
            raise KeyboardInterrupt
        if isinstance(code, int) and code:
            sys.exit(code)
    except TrinityError as exc:
        if debug:
            raise
        from trinity_cli.render import console

        console.error(*exc.worded(_flags()))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        if debug:
            raise
        from trinity_cli.render import console

        console.error("interrupted", _interrupted_hint(sys.argv[1:]))
        sys.exit(Interrupted.exit_code)
    except Exception as exc:  # click usage errors and the like
        if isinstance(exc, _click_types("Exit")):
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        from trinity_cli.render import console

        if isinstance(exc, _click_types("Abort")):  # Ctrl-C at a prompt
            console.error("interrupted", _interrupted_hint(sys.argv[1:]))
            sys.exit(Interrupted.exit_code)

        usage = _usage_error(exc)
        if usage is not None:
            if debug:
                raise
            message, hint, exit_code = usage
            if message:
                console.error(message, hint)
            sys.exit(exit_code)
        if debug:
            raise
        console.error(f"unexpected {type(exc).__name__}: {exc}", "run again with TRINITY_DEBUG=1 for the traceback")
        sys.exit(1)


# Commands that keep what they finished when interrupted, so running them again resumes.
RESUMABLE = {"evolve", "bench"}


def _interrupted_hint(args: list[str]) -> str:
    """What Ctrl-C left behind: only evolve and bench have anything to resume."""
    command = next((a for a in args if not a.startswith("-")), "")
    if command in RESUMABLE:
        return "nothing half-written was kept; run the command again to resume"
    return "nothing half-written was kept"
