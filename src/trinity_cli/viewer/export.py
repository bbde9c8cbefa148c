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
opened. Every page is scrubbed as the server's are (shape.scrub). The folder is written
beside DIR and renamed into place; DIR may be absent, empty, or an earlier export.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from trinity_cli import paths
from trinity_cli.errors import ConfigError, option
from trinity_cli.runs.store import RunStore
from trinity_cli.viewer import pages, shape
from trinity_cli.viewer.opened import OpenedRun

ASSETS = ("index.html", "viewer.js", "viewer.css")
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


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{option('html')} {out}: it is a file", "name a folder to write the pages into")
    if out.is_dir() and any(out.iterdir()) and b"trinity-viewer" not in _read(out / "index.html"):
        raise ConfigError(f"{option('html')} {out}: the folder holds other files",
                          "name a new or empty folder (an earlier export there is replaced)")


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def export_run(run_id: str, out: Path, store: RunStore | None = None) -> Exported:
    """Write run `run_id`'s pages into the folder `out` (module docstring)."""
    store = store or RunStore()
    run = OpenedRun(store, run_id)
    _check_target(out)
    keys = _keys(run)
    return _write(out, store, [run], keys, {run.id: run}, sum(1 for k in keys if "/item/" in k))


def export_compare(a_id: str, b_id: str, out: Path, store: RunStore | None = None) -> Exported:
    """Write the comparison of runs `a_id` and `b_id` into the folder `out`: the runs list of
    the two, each run's page, the compare page and (bench runs) the page of every item whose
    result changed; an item of one run alone is not in it."""
    store = store or RunStore()
    a, b = OpenedRun(store, a_id), OpenedRun(store, b_id)
    _check_target(out)
    opened = {a.id: a, b.id: b}
    key = f"compare/{a.id}/{b.id}"
    first = pages.page(key, store, opened.__getitem__)  # NotFound for runs that cannot be compared
    keys = [f"run/{a.id}", f"run/{b.id}", key]
    if first["kind"] == "compare":
        keys += [f"{first['grid']['item']}{row['i']}" for row in first["grid"]["rows"]]
    return _write(out, store, [a, b], keys, opened, sum(1 for k in keys if "/item/" in k),
                  name=f"{a.id} against {b.id}", compare=key, made={key: first})


def _write(out: Path, store: RunStore, runs: list[OpenedRun], keys: list[str], opened: dict[str, OpenedRun],
           items: int, name: str | None = None, compare: str | None = None,
           made: dict[str, Any] | None = None) -> Exported:
    """The folder `out` holding the viewer, the runs list of `runs` (with the key of their
    comparison, `compare`, when it is one), the pages at `keys` (those in `made` as already
    computed, the others from the runs in `opened`) and the runs' charts, written beside it and
    renamed in."""
    pairs = shape.scrub_pairs()
    ids = [run.id for run in runs]
    entries = sorted((e for e in pages.runs_page(store)["runs"] if e["id"] in ids), key=lambda e: ids.index(e["id"]))
    count, size = 0, 0
    with paths.atomic_output(out, directory=True) as tmp:
        tmp.chmod(0o755)  # a temporary folder is the owner's alone; the export is for sharing
        def write(rel: str, data: bytes) -> None:
            nonlocal count, size
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            count, size = count + 1, size + len(data)

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
                (tmp / "files" / run.id).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(run.path / chart, tmp / "files" / run.id / chart)
                count, size = count + 1, size + (run.path / chart).stat().st_size
    return Exported(name or runs[0].id, out, count, size, items)
