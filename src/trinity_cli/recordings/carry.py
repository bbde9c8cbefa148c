"""Run directories that travel with a recording: `runs/run-N/` inside the recording folder
holds a copy of the run's files (every file but its lock), so an evolve run stopped on one
machine resumes on another (`trinity evolve --resume run-N` after the import) and a bench
run's report can be read there.

Export replaces the folder's copy of a run whole (written beside it, then renamed). A bulky
text file (`.json`, `.jsonl`, `.log` or `.md` of at least `PACK_AT` bytes: a generation's
transcripts, a bench's episodes and journal; never `evolve.json` or `run.json`, which import
reads) is stored gzipped as `<name>.gz`, with no timestamp in its header, so exporting an
unchanged file again writes the same bytes and git stores nothing new. Import writes it back
under its own name; a run exported before files were packed is read as it is.
Import brings a run into this home's `runs/`:
- absent here: copied;
- here with the same files: nothing to do;
- here as the same evolve run (the same `evolve.json`): the copy that has gone further wins
  (a finished run, else the later checkpoint generation); this home's run is replaced only
  when the recording's is further, under the run's lock (a run being evolved is refused);
- anything else (another run under that name): copied under the next free run number.
"""

from __future__ import annotations

import filecmp
import gzip
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from trinity_cli import paths
from trinity_cli.runs.run_files import EvolveRun
from trinity_cli.runs.store import RunLock, RunStore

RUNS = "runs"
_SKIP = {".lock"}
PACK_AT = 64 * 1024  # bytes: smaller files are carried as they are
_PACKED_SUFFIXES = {".json", ".jsonl", ".log", ".md"}
_NEVER_PACKED = {EvolveRun.META, "run.json"}  # import reads these in the recording itself


@dataclass
class Carried:
    run: str  # the run's name in the recording
    outcome: str  # "copied", "updated", "same", "kept" (this home's is further), "renamed"
    as_run: str  # its name in this home


def _files(run_dir: Path) -> list[Path]:
    return sorted(p.relative_to(run_dir) for p in run_dir.rglob("*") if p.is_file() and p.name not in _SKIP)


def _packs(run_dir: Path, rel: Path) -> bool:
    return (rel.suffix in _PACKED_SUFFIXES and rel.name not in _NEVER_PACKED
            and (run_dir / rel).stat().st_size >= PACK_AT)


def _logical(rel: Path) -> Path:
    """The name in a run directory of the carried file `rel` (a packed file loses its `.gz`)."""
    return rel.with_suffix("") if rel.suffix == ".gz" else rel


def _content(run_dir: Path, rel: Path) -> bytes:
    data = (run_dir / rel).read_bytes()
    return gzip.decompress(data) if rel.suffix == ".gz" else data


def _copy(source: Path, dest: Path, pack: bool) -> None:
    """Copy `source`'s files into `dest`, replacing it whole (a temporary folder renamed):
    into a recording (`pack`) with its bulky files gzipped, out of one with them unpacked."""
    temp = dest.with_name(dest.name + ".incoming")
    shutil.rmtree(temp, ignore_errors=True)
    for rel in _files(source):
        data: bytes | None = None  # None: the file is copied as it is
        out = rel
        if pack and _packs(source, rel):
            out, data = rel.with_name(rel.name + ".gz"), gzip.compress((source / rel).read_bytes(), 9, mtime=0)
        elif not pack and rel.suffix == ".gz":
            out, data = _logical(rel), _content(source, rel)
        (temp / out).parent.mkdir(parents=True, exist_ok=True)
        if data is None:
            shutil.copy2(source / rel, temp / out)
        else:
            (temp / out).write_bytes(data)
            shutil.copystat(source / rel, temp / out)
    temp.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        old = paths.set_aside(dest)
        temp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        temp.rename(dest)


def export_runs(run_ids: list[str], target: Path, store: RunStore | None = None) -> list[str]:
    """Copy the named runs into `target/runs/` (module docstring); returns their names."""
    store = store or RunStore()
    names = []
    for run_id in run_ids:
        run_id = f"run-{run_id}" if run_id.isdigit() else run_id
        source = store.root / run_id
        if not source.is_dir():
            store.path(run_id)  # raises NotFound with the close matches
        (target / RUNS).mkdir(parents=True, exist_ok=True)
        _copy(source, target / RUNS / run_id, pack=True)
        names.append(run_id)
    return names


def _same_files(carried: Path, here: Path) -> bool:
    """Whether the recording's copy `carried` holds exactly the files of the run `here`."""
    files = {_logical(rel): rel for rel in _files(carried)}
    if sorted(files) != _files(here):
        return False
    return all(_content(carried, rel) == (here / name).read_bytes() for name, rel in files.items())


def _progress(run_dir: Path) -> float:
    """How far an evolve run has gone: inf when finished, else its checkpoint's generation."""
    if (run_dir / "run.json").is_file():
        return float("inf")
    state = EvolveRun(run_dir).load_checkpoint()
    return -1.0 if state is None else float(state["generation"])


def _same_evolve(a: Path, b: Path) -> bool:
    meta_a, meta_b = a / EvolveRun.META, b / EvolveRun.META
    return meta_a.is_file() and meta_b.is_file() and filecmp.cmp(meta_a, meta_b, shallow=False)


def import_runs(target: Path, store: RunStore | None = None) -> list[Carried]:
    """Bring the runs of the recording folder `target` into this home (module docstring)."""
    store = store or RunStore()
    folder = target / RUNS
    if not folder.is_dir():
        return []
    out = []
    # numeric order (run-2 before run-10), so renamed copies keep the order they were made in
    found = [p for p in folder.iterdir() if p.is_dir() and not p.name.endswith(".incoming")]
    for source in sorted(found, key=lambda p: (int(m.group(1)) if (m := re.match(r"run-(\d+)$", p.name)) else 1 << 62,
                                               p.name)):
        dest = store.root / source.name
        if not dest.exists():
            _copy(source, dest, pack=False)
            out.append(Carried(source.name, "copied", dest.name))
        elif _same_files(source, dest):
            out.append(Carried(source.name, "same", dest.name))
        elif _same_evolve(source, dest):
            with RunLock(dest):
                if _progress(source) > _progress(dest):
                    _copy(source, dest, pack=False)
                    out.append(Carried(source.name, "updated", dest.name))
                else:
                    out.append(Carried(source.name, "kept", dest.name))
        else:
            fresh = store.allocate()
            _copy(source, fresh, pack=False)
            out.append(Carried(source.name, "renamed", fresh.name))
    return out
