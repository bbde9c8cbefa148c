"""The static export (`trinity inspect RUN --html DIR`): the viewer's pages of one run as a
folder that opens from disk with no server and no network.

    DIR/index.html, viewer.js, viewer.css   the viewer (assets/), marked as a static export
    DIR/data/KEY.js                          each page (viewer/pages.py's keys), as
                                             `TRINITY_PUT("KEY", {...});` (a browser runs a
                                             file:// script where it refuses fetch())
    DIR/files/RUN/*.png                      the run's charts

`trinity inspect A --compare B --html DIR` writes the comparison instead (export_compare):
the two runs' pages, the compare page and the pages of the items whose result changed.

The runs list holds the one run, and the keys of every page the folder holds ("pages"): the
viewer loads data/KEY.js for those keys alone, so no URL (`index.html#/../../x`) makes it run
a script from anywhere else. A bench run's items and an evolve run's generations each get
their own file, so opening the folder reads the run's page alone and an item is read when
opened. Every page is scrubbed as the server's are (shape.scrub).

An export never deletes a file it did not write. It lists every file it writes in
DIR/export-manifest.json (`MANIFEST`: {"format": 1, "files": [relative paths]}), and DIR may be:
absent or empty (the folder is written beside it and renamed into place), or an earlier export
(its manifest read): the new files are written beside it, then moved in one by one over the
files the manifest lists, and the listed files the new export does not write are removed,
while every file the manifest does not list (a user's notes, a folder) stays as it was. The
manifest is written first as the union of the old files and the new, so an export stopped
midway still names every file that is its own. Any other non-empty folder (an export written
before manifests too), a file the new export would write over that the manifest does not
list, and a manifest naming a path outside DIR are refused in one line, before anything in
DIR changes.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from trinity_cli import paths
from trinity_cli.errors import ConfigError, option
from trinity_cli.runs.store import RunStore
from trinity_cli.viewer import pages, shape
from trinity_cli.viewer.opened import OpenedRun

ASSETS = ("index.html", "viewer.js", "viewer.css")
MANIFEST = "export-manifest.json"
MANIFEST_FORMAT = 1
STATIC_MODE = '<meta name="trinity-mode" content="static">'
SERVED_MODE = '<meta name="trinity-mode" content="served">'


def asset(name: str) -> bytes:
    """A file of the viewer (assets/), as shipped in the package."""
    return (resources.files("trinity_cli.viewer") / "assets" / name).read_bytes()


def index_html(mode: str) -> bytes:
    """index.html for `mode` "served" or "static"."""
    text = asset("index.html").decode()
    return (text if mode == "served" else text.replace(SERVED_MODE, STATIC_MODE)).encode()


def data_script(key: str, page: Any) -> bytes:
    """A page as the script that hands it to the viewer (TRINITY_PUT)."""
    body = json.dumps(page, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # U+2028/2029 end a line in older JavaScript; escaped, they are the same string.
    body = body.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f"TRINITY_PUT({json.dumps(key)},{body});\n".encode()


@dataclass
class Exported:
    run: str
    path: Path
    files: int
    bytes: int
    items: int  # pages of items (bench items, or generations' items)


def _keys(run: OpenedRun) -> list[str]:
    """The pages of `run` the export holds besides the runs list."""
    keys = [f"run/{run.id}"]
    if run.kind == "bench":
        keys += [f"run/{run.id}/item/{i}" for i in range(len(run.summary.get("items") or []))]
    elif run.evolve.meta_file.is_file():
        for g in run.generation_numbers():
            keys.append(f"run/{run.id}/gen/{g}")
            grid = pages.page(f"run/{run.id}/gen/{g}", run.store, lambda _: run)["grid"]
            keys += [f"{grid['item']}{row['i']}" for row in grid["rows"]]
    return keys


def _check_target(out: Path) -> set[str] | None:
    """The files an earlier export at `out` wrote (its manifest), or None when `out` is absent
    or an empty folder; anything else is refused (module docstring)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{option('html')} {out}: it is a file", "name a folder to write the pages into")
    if not out.is_dir() or not any(out.iterdir()):
        return None
    owned = _manifest(out)
    if owned is None:
        raise ConfigError(f"{option('html')} {out}: the folder holds other files and no {MANIFEST} of an "
                          "earlier export", "name a new or empty folder (an export with its manifest there is "
                                            "replaced, files you added kept)")
    return owned


def _manifest(out: Path) -> set[str] | None:
    """The files `out`'s manifest lists, or None when it has none that this version reads: no
    file, not JSON, another format, or a path that is not plainly inside `out`."""
    try:
        found = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    files = found.get("files") if isinstance(found, dict) and found.get("format") == MANIFEST_FORMAT else None
    if not isinstance(files, list) or not all(isinstance(f, str) and _inside(f) for f in files):
        return None
    return set(files)


def _inside(rel: str) -> bool:
    """Whether `rel` is a plain relative path below the folder (no `..`, not absolute, not the
    manifest itself)."""
    path = PurePosixPath(rel)
    return (bool(rel) and not path.is_absolute() and "\\" not in rel and rel != MANIFEST
            and all(part not in ("", ".", "..") for part in rel.split("/")))


def _manifest_bytes(files: set[str]) -> bytes:
    return (json.dumps({"format": MANIFEST_FORMAT, "files": sorted(files)}, indent=1) + "\n").encode()


def export_run(run_id: str, out: Path, store: RunStore | None = None) -> Exported:
    """Write run `run_id`'s pages into the folder `out` (module docstring)."""
    store = store or RunStore()
    run = OpenedRun(store, run_id)
    owned = _check_target(out)
    keys = _keys(run)
    return _write(out, owned, store, [run], keys, {run.id: run}, sum(1 for k in keys if "/item/" in k))


def export_compare(a_id: str, b_id: str, out: Path, store: RunStore | None = None) -> Exported:
    """Write the comparison of runs `a_id` and `b_id` into the folder `out`: the runs list of
    the two, each run's page, the compare page and (bench runs) the page of every item whose
    result changed; an item of one run alone is not in it."""
    store = store or RunStore()
    a, b = OpenedRun(store, a_id), OpenedRun(store, b_id)
    owned = _check_target(out)
    opened = {a.id: a, b.id: b}
    key = f"compare/{a.id}/{b.id}"
    first = pages.page(key, store, opened.__getitem__)  # NotFound for runs that cannot be compared
    keys = [f"run/{a.id}", f"run/{b.id}", key]
    if first["kind"] == "compare":
        keys += [f"{first['grid']['item']}{row['i']}" for row in first["grid"]["rows"]]
    return _write(out, owned, store, [a, b], keys, opened, sum(1 for k in keys if "/item/" in k),
                  name=f"{a.id} against {b.id}", compare=key, made={key: first})


def _write(out: Path, owned: set[str] | None, store: RunStore, runs: list[OpenedRun], keys: list[str],
           opened: dict[str, OpenedRun], items: int, name: str | None = None, compare: str | None = None,
           made: dict[str, Any] | None = None) -> Exported:
    """The folder `out` holding the viewer, the runs list of `runs` (with the key of their
    comparison, `compare`, when it is one), the pages at `keys` (those in `made` as already
    computed, the others from the runs in `opened`), the runs' charts and the manifest,
    written beside it and then renamed in (`owned` None: `out` absent or empty) or moved in
    over the files of the earlier export `owned` lists (module docstring)."""
    pairs = shape.scrub_pairs()
    ids = [run.id for run in runs]
    entries = sorted((e for e in pages.runs_page(store)["runs"] if e["id"] in ids), key=lambda e: ids.index(e["id"]))
    written: list[str] = []
    size = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    tmp.chmod(0o755)  # a temporary folder is the owner's alone; the export is for sharing

    def write(rel: str, data: bytes) -> None:
        nonlocal size
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written.append(rel)
        size += len(data)

    try:
        write("index.html", index_html("static"))
        for asset_name in ASSETS[1:]:
            write(asset_name, asset(asset_name))
        listed = {"kind": "runs", "runs": entries, "pages": ["runs", *keys],
                  **({"compare": compare} if compare else {})}
        write("data/runs.js", data_script("runs", shape.scrub(listed, pairs)))
        for key in keys:
            page = (made or {}).get(key) or pages.page(key, store, opened.__getitem__)
            write(f"data/{key}.js", data_script(key, shape.scrub(page, pairs)))
        for run in runs:
            for chart in run.charts():
                write(f"files/{run.id}/{chart}", (run.path / chart).read_bytes())
        manifest = _manifest_bytes(set(written))
        (tmp / MANIFEST).write_bytes(manifest)
        if owned is None:
            if out.is_dir():
                out.rmdir()  # empty, as _check_target found it; one that is not any more is kept
            os.replace(tmp, out)
        else:
            _move_in(tmp, out, owned, set(written))
    except OSError as exc:
        if paths.is_no_space(exc):
            raise paths.no_space(out, exc, size) from None
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # our files alone: what was not moved in
    return Exported(name or runs[0].id, out, len(written) + 1, size + len(manifest), items)


def _move_in(new: Path, out: Path, owned: set[str], files: set[str]) -> None:
    """Move the export written in `new` into `out`, an earlier export whose manifest lists
    `owned`: every file of `files` over its old copy, then the files of `owned` it no longer
    writes removed (and the folders they leave empty); a file of `files` at a path `owned` does
    not list is refused before `out` changes. `new` is left empty for the caller to remove."""
    def in_the_way(rel: str) -> bool:
        target = out / rel
        if rel in owned:
            return target.is_dir() and not target.is_symlink()
        return target.exists() or target.is_symlink()

    theirs = sorted(rel for rel in files if in_the_way(rel))
    theirs += sorted(str(parent.relative_to(out)) for rel in files for parent in (out / rel).parents
                     if parent != out and out in parent.parents and parent.exists() and not parent.is_dir())
    if theirs:
        raise ConfigError(f"{option('html')} {out}: {theirs[0]} is in the way, and the earlier export did not "
                          f"write it ({MANIFEST} does not list it as such)", "move it away, or name a new or "
                                                                            "empty folder")
    paths.atomic_write_bytes(out / MANIFEST, _manifest_bytes(owned | files))  # a stop midway still knows its own
    for rel in sorted(files):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(new / rel, out / rel)
    for rel in sorted(owned - files, reverse=True):
        target = out / rel
        if target.is_symlink() or target.is_file():
            target.unlink()
        for parent in target.parents:  # the folders it leaves empty; one that holds anything stays
            if parent == out:
                break
            try:
                parent.rmdir()
            except OSError:
                break
    os.replace(new / MANIFEST, out / MANIFEST)
