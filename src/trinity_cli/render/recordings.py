"""What `trinity recordings export / import / show` print: plain lines on stderr, so the
commands pipe nothing but what was asked for; `--json` output is the CLI's."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from trinity_cli.render import console


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB" if n >= 1 << 20 else f"{n / 1024:.1f} KB"


def exported(result: Any) -> None:
    """An ExportResult: what was written where, and what could not travel."""
    line = Text(f"{result.added} new of {result.entries} entries written to ", style="bold")
    line.append(str(result.path))
    if result.added:  # what this export adds to the repository
        line.append(f" ({_size(result.bytes)}, {result.bytes / result.added:,.0f} bytes per new entry; "
                    f"the recording now holds {result.total:,})")
    console.err.print(line, soft_wrap=True)
    if result.runs:
        console.note("runs carried: " + ", ".join(result.runs))
    if result.missing:
        console.warning(f"{result.missing} calls a run's journal names are no longer in this home's caches")
    if result.no_request:
        console.warning(f"{result.no_request} cache entries were written before requests were kept: they cannot "
                        "travel (their calls are made again elsewhere)")


def imported(result: Any, dry: bool = False) -> None:
    """An ImportResult: counts, which pool the calls apply to, refusals and conflicts."""
    head = Text(f"{result.path}: {result.entries} entries", style="bold")
    if not dry:
        added, held = sum(result.added.values()), sum(result.held.values())
        head.append(f"; {added} imported, {held} already here")
        if result.conflicts:
            head.append(f", {len(result.conflicts)} in conflict", style="red")
    console.err.print(head, soft_wrap=True)
    for pool, calls in sorted(result.applies.items()):
        members = ", ".join(result.members.get(pool, []))
        console.err.print(Text(f"  pool {pool}: {calls} calls apply as installed ({members})"), soft_wrap=True)
    for why, n in sorted(result.other.items()):
        console.err.print(Text(f"  {n} calls apply to no installed pool: {why}"), soft_wrap=True)
    for backbone, n in sorted(result.backbones.items()):
        console.err.print(Text(f"  {n} coordinator hidden states: {backbone}"), soft_wrap=True)
    if result.sandbox:
        console.err.print(Text(f"  {result.sandbox} sandbox runs of model-written code"), soft_wrap=True)
    for refused in result.refused:
        console.warning(f"refused line {refused.line} ({refused.key[:19]}...): {refused.why}")
    for key in result.conflicts:
        console.warning(f"{key[:19]}... is held here with a different reply: kept this home's")
    for carried in result.runs:
        console.note(_carried(carried))


def _carried(carried: Any) -> str:
    words = {
        "copied": "copied",
        "updated": "replaced this home's copy (the recording's had gone further)",
        "same": "already here",
        "kept": "kept this home's copy (it had gone as far or further)",
        "renamed": f"another run holds that name here: copied as {carried.as_run}",
    }
    return f"run {carried.run}: {words[carried.outcome]}"
