"""`trinity recordings`: export, import and show recordings (recordings/transfer.py), as a
Typer sub-app that cli/__init__.py adds to `trinity`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from trinity_cli.recordings.transfer import ImportResult


recordings_app = typer.Typer(
    help="Carry model calls (and runs) from one TRINITY_HOME to another: export, import, show.",
    no_args_is_help=True,
)
RecordingArg = Annotated[str, typer.Argument(
    help="A recording folder (it holds calls.jsonl.gz and runs/), or a .gz recording file.")]


@recordings_app.command("export")
def recordings_export(
    runs: Annotated[list[str] | None, typer.Argument(help="Runs whose calls to export (run-N or N).")] = None,
    to: Annotated[str, typer.Option("--to", help="The recording folder (created if needed) or .gz file.")] = "",
    all_calls: Annotated[bool, typer.Option("--all", help="Every call in this home's caches.")] = False,
    calls_only: Annotated[bool, typer.Option(
        "--calls-only", help="Do not copy the runs' directories (checkpoints, reports) into the folder.")] = False,
) -> None:
    """Append the calls of RUNS (or --all) to a recording; the runs travel with it."""
    from pathlib import Path

    from trinity_cli.errors import ConfigError
    from trinity_cli.recordings import transfer
    from trinity_cli.render import recordings as shown

    if not to:
        raise ConfigError("say where to write the recording", "add --to FOLDER (or --to FILE.gz)")
    if bool(runs) == all_calls:
        raise ConfigError("name the runs to export, or give --all (not both)",
                          "trinity recordings export run-3 --to DIR, or --all --to DIR")
    result = transfer.export(Path(to), None if all_calls else list(runs or []), carry_runs=not calls_only)
    shown.exported(result)


@recordings_app.command("import")
def recordings_import(
    recording: RecordingArg,
    json_out: Annotated[bool, typer.Option("--json", help="The import's counts as JSON on stdout.")] = False,
) -> None:
    """Import a recording's calls into this home's caches (and its runs into runs/)."""
    from pathlib import Path

    from trinity_cli.recordings import transfer

    _show_import(transfer.import_recording(Path(recording)), json_out)


@recordings_app.command("show")
def recordings_show(
    recording: RecordingArg,
    json_out: Annotated[bool, typer.Option("--json", help="The counts as JSON on stdout.")] = False,
) -> None:
    """What a recording holds and which installed pool its calls apply to; imports nothing."""
    from pathlib import Path

    from trinity_cli.recordings import transfer

    _show_import(transfer.describe_file(Path(recording)), json_out, dry=True)


def _show_import(result: ImportResult, json_out: bool, dry: bool = False) -> None:
    """An import's (or, `dry`, a show's) counts on stderr, and with --json on stdout."""
    from dataclasses import asdict

    from trinity_cli.render import recordings as shown

    shown.imported(result, dry=dry)
    if json_out:
        data = asdict(result)
        data["path"] = str(data["path"])
        typer.echo(json.dumps(data, indent=2))
