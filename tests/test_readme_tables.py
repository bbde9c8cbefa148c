"""Every results table in README.md and docs/results.md is replayed from the repository's
recordings: a number the code does not reproduce fails here.

A replayed table is marked by a comment before its command block:

    <!-- replay: recordings/readme -->
    ```bash
    trinity bench --tasks ...            (or: trinity matrix ...)
    ```

Every Markdown table after that block, up to the next command block, is checked against the
command's output, run in a fresh TRINITY_HOME that imported the recording, in replay-only
mode (TRINITY_REPLAY_ONLY=1: a call the recording does not hold fails the command; no model
is loaded for a pool call). A README table may show a selection of the output's rows: each
README row must equal, cell for cell, the output row with the same first cell, under the
same header. Every table of the README's results section, and every table of docs/results.md,
must be covered by a marker.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS_PAGE = ROOT / "docs" / "results.md"
MARKER = re.compile(r"<!-- replay: (\S+) -->")
RESULTS = "## Results"

Table = tuple[list[str], list[list[str]]]  # header cells, row cells


@dataclass
class Replayed:
    recording: str
    command: str
    tables: list[Table]
    line: int


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def tables_in(lines: list[str]) -> list[Table]:
    """The Markdown tables in `lines` (header, separator, rows)."""
    out: list[Table] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[\s\-:|]+\|\s*$", lines[i + 1]):
            header, rows = _cells(lines[i]), []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            out.append((header, rows))
        else:
            i += 1
    return out


def replayed_blocks(text: str, sections: bool = True) -> list[Replayed]:
    """A page's replay markers, each with its command and the tables it covers (up to the next
    command block or marker, and with `sections` the next `## ` heading too: the README's
    results section ends there; docs/results.md is one results section, its `## ` headings
    inside it)."""
    lines = text.splitlines()
    blocks: list[Replayed] = []
    i = 0
    while i < len(lines):
        match = MARKER.search(lines[i])
        if not match:
            i += 1
            continue
        start = i
        assert lines[i + 1].strip() == "```bash", f"README line {i + 2}: a replay marker must precede a ```bash block"
        j = i + 2
        command: list[str] = []
        while lines[j].strip() != "```":
            command.append(lines[j].rstrip().rstrip("\\").strip())
            j += 1
        k = j + 1
        while (k < len(lines) and lines[k].strip() != "```bash" and not MARKER.search(lines[k])
               and not (sections and lines[k].startswith("## "))):
            k += 1
        blocks.append(Replayed(match.group(1), " ".join(command), tables_in(lines[j + 1:k]), start + 1))
        i = k
    return blocks


def _leading(row: list[str], other: list[str]) -> int:
    """How many leading cells two rows share."""
    n = 0
    while n < min(len(row), len(other)) and row[n] == other[n]:
        n += 1
    return n


def compare(expected: Table, produced: list[Table]) -> list[str]:
    """What differs between a README table and the command's output (empty: it agrees). A
    README row agrees when the output's table with the same header holds it, cell for cell;
    otherwise it is compared with the output row that shares the most leading cells with it
    (several rows may share a first cell: a head against several systems, per task)."""
    header, rows = expected
    same = [t for t in produced if t[0] == header]
    if not same:
        return [f"no table with the header {' | '.join(header)} in the output"]
    out_rows = same[0][1]
    problems = []
    for row in rows:
        if row in out_rows:
            continue
        candidates = [r for r in out_rows if r[0] == row[0]]
        if not candidates:
            problems.append(f"row {row[0]!r}: not in the output")
            continue

        got = max(candidates, key=lambda other, row=row: _leading(row, other))
        diffs = [f"{h}: README {a!r}, replayed {b!r}" for h, a, b in zip(header, row, got, strict=False) if a != b]
        problems.append(f"row {row[0]!r}: " + "; ".join(diffs))
    return problems


def test_every_results_table_is_replayed() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index(RESULTS):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    page = RESULTS_PAGE.read_text(encoding="utf-8")
    for name, part in (("README.md", section), ("docs/results.md", page)):
        all_tables = tables_in(part.splitlines())
        covered = [t for block in replayed_blocks(part, sections=name == "README.md") for t in block.tables]
        assert all_tables and len(covered) == len(all_tables), f"a results table of {name} has no replay marker"
    for block in [*replayed_blocks(text), *replayed_blocks(page, sections=False)]:
        assert (ROOT / block.recording / "calls.jsonl.gz").is_file(), f"line {block.line}: no {block.recording}"


def test_compare_catches_an_edited_number() -> None:
    produced = tables_in(["| system | accuracy |", "|---|---|", "| a | 44.4% |", "| b | 51.1% |"])
    assert compare((["system", "accuracy"], [["b", "51.1%"]]), produced) == []
    assert compare((["system", "accuracy"], [["b", "52.1%"]]), produced) == [
        "row 'b': accuracy: README '52.1%', replayed '51.1%'"]
    assert compare((["system", "acc"], [["b", "51.1%"]]), produced)[0].startswith("no table")
    # Rows sharing a first cell (a head against several systems) are told apart by the rest.
    paired = tables_in(["| system | against | p |", "|---|---|---|", "| h | a | 0.05 |", "| h | b | 1.0 |"])
    assert compare((["system", "against", "p"], [["h", "a", "0.05"], ["h", "b", "1.0"]]), paired) == []
    assert compare((["system", "against", "p"], [["h", "b", "0.5"]]), paired) == [
        "row 'h': p: README '0.5', replayed '1.0'"]


def test_every_marker_is_found_when_blocks_follow_each_other() -> None:
    text = "\n".join(["## Results", "<!-- replay: r -->", "```bash", "one", "```", "| a | b |", "|---|---|",
                      "| x | 1 |", "", "<!-- replay: r -->", "```bash", "two", "```", "| c | d |", "|---|---|",
                      "| y | 2 |"])
    blocks = replayed_blocks(text)
    assert [(b.command, len(b.tables)) for b in blocks] == [("one", 1), ("two", 1)]


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)


@pytest.mark.slow
@pytest.mark.parametrize("block", [
    *(pytest.param(b, id=f"README-line{b.line}") for b in replayed_blocks(README.read_text(encoding="utf-8"))),
    *(pytest.param(b, id=f"results-line{b.line}")
      for b in replayed_blocks(RESULTS_PAGE.read_text(encoding="utf-8"), sections=False))])
def test_readme_table_replays_from_its_recording(block: Replayed, tmp_path: Path) -> None:
    env = {**os.environ, "TRINITY_HOME": str(tmp_path / "home"), "TRINITY_REPLAY_ONLY": "1", "COLUMNS": "400"}
    imported = _run([sys.executable, "-m", "trinity_cli", "recordings", "import", str(ROOT / block.recording)], env)
    assert imported.returncode == 0, imported.stderr
    argv = shlex.split(block.command)
    if argv[0] == "trinity":
        argv = [sys.executable, "-m", "trinity_cli", *argv[1:]]
    elif argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    result = _run(argv, env)
    assert result.returncode == 0, result.stderr[-3000:]
    produced = tables_in(result.stdout.splitlines())
    problems = [p for table in block.tables for p in compare(table, produced)]
    assert problems == [], f"README line {block.line} ({block.command}):\n" + "\n".join(problems)
