"""Throwaway packages for the plugin tests: a distribution written to a folder and installed by
pip as `pip install .` installs it, into a folder of its own that a test puts on the path
(`PYTHONPATH` of a `trinity` subprocess), so trinity finds its entry points as it finds an
installed package's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def pip_install(source: Path, site: Path) -> Path:
    """The project at `source` (a pyproject.toml and its modules) installed into `site`."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                           "--no-build-isolation", "--target", str(site), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return site


def install_package(tmp_path: Path, name: str, modules: dict[str, str],
                    entry_points: dict[str, dict[str, str]]) -> Path:
    """The distribution `name` made of `modules` (module name -> its code) with `entry_points`
    (group -> {entry name: "module:attr"}), installed into a folder of its own; returns it."""
    source = tmp_path / f"src-{name}"
    source.mkdir()
    for module, code in modules.items():
        (source / f"{module}.py").write_text(code)
    groups = "".join(f'\n[project.entry-points."{group}"]\n' + "".join(f'{entry} = "{target}"\n'
                                                                    for entry, target in entries.items())
                     for group, entries in entry_points.items())
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "0.1.0"\n\n'
        f"[tool.setuptools]\npy-modules = {sorted(modules)!r}\n".replace("'", '"') + groups)
    return pip_install(source, tmp_path / f"site-{name}")


def trinity(tmp_path: Path, sites: list[Path], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`trinity ARGS` in a subprocess that sees the packages in `sites`, its home under `tmp_path`."""
    path = os.pathsep.join([*map(str, sites), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "TRINITY_HOME": str(tmp_path / "home"), "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-m", "trinity_cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
