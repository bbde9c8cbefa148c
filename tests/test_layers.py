"""The import graph flows one way: every `trinity_cli` import in the package goes to a
module listed above the importer in docs/ARCHITECTURE.md's layer list, or to its own
package (lazy imports inside functions count too), and no two modules import each other;
heavy libraries stay in their modules; and every module opens with a docstring stating its job."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "trinity_cli"


def layers() -> list[str]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = text.split("<!-- layers:", 1)[1].split("```", 2)[1]
    return [line.split()[0].removesuffix(".py").removesuffix("/") for line in block.strip().splitlines()]


def layer_of(module: str, order: list[str]) -> int:
    """Index of the top-level module or package `module` ("trinity_cli.x.y") belongs to."""
    top = module.split(".")[1] if module.count(".") else "__init__"
    return order.index(top)


def module_name(path: Path, package: Path = PACKAGE) -> str:
    rel = path.relative_to(package.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[str]:
    """Every trinity_cli module `path` imports, anywhere in the file (lazy imports too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "trinity_cli":
                found += [f"trinity_cli.{a.name}" for a in node.names]
            elif node.module.startswith("trinity_cli."):
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("trinity_cli.")]
    return found


def test_every_module_is_in_the_layer_list_and_every_entry_exists() -> None:
    order = layers()
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and any(p.glob("*.py")))}
    assert sorted(tops) == sorted(order)


def violations(path: Path, me: str, order: list[str]) -> list[str]:
    mine = layer_of(me, order)
    return [f"{me} imports {target} (listed below it)"
            for target in imports(path) if layer_of(target, order) > mine]


def test_imports_flow_one_way() -> None:
    order = layers()
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py" and path.parent == PACKAGE:
            continue
        wrong += violations(path, module_name(path), order)
    assert wrong == []


def test_checker_catches_upward_and_lazy_imports(tmp_path: Path) -> None:
    order = layers()
    fake = tmp_path / "pool.py"
    fake.write_text("from trinity_cli import errors\n"
                    "def f():\n    from trinity_cli.runs.store import RunStore\n    import trinity_cli.cli\n")
    assert violations(fake, "trinity_cli.pool.pool", order) == [
        "trinity_cli.pool.pool imports trinity_cli.runs.store (listed below it)",
        "trinity_cli.pool.pool imports trinity_cli.cli (listed below it)",
    ]
    assert layer_of("trinity_cli.backends.llamacpp", order) == order.index("backends")


def modules_imported(path: Path, package: Path = PACKAGE) -> set[str]:
    """`imports(path)`, with each module named in `from trinity_cli.PKG import NAME` (a module of
    the package, not an attribute) counted as imported too."""
    found = set(imports(path))
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("trinity_cli"):
            folder = package.parent.joinpath(*node.module.split("."))
            found |= {f"{node.module}.{a.name}" for a in node.names if (folder / f"{a.name}.py").is_file()}
    return found


def circles(paths: list[Path], package: Path = PACKAGE) -> list[str]:
    """Each pair of modules among `paths` (in `package`) that import each other, lazily or not."""
    graph = {module_name(path, package): modules_imported(path, package) for path in paths}
    return sorted({" <-> ".join(sorted((a, b))) for a, targets in graph.items() for b in targets
                   if b != a and a in graph.get(b, ())})


def test_no_two_modules_import_each_other() -> None:
    """Inside a package too, where the layer list allows either direction: one of two modules
    that need each other holds what both need, or is passed it."""
    assert circles(sorted(PACKAGE.rglob("*.py"))) == []


def test_the_circle_checker_catches_a_lazy_import_back(tmp_path: Path) -> None:
    backends = tmp_path / "src" / "trinity_cli" / "backends"
    backends.mkdir(parents=True)
    (backends / "a.py").write_text("from trinity_cli.backends import b\n")
    (backends / "b.py").write_text("def f():\n    from trinity_cli.backends.a import X\n")
    (backends / "c.py").write_text("from trinity_cli.backends.b import f\n")
    assert circles(sorted(backends.glob("*.py")), backends.parent) == [
        "trinity_cli.backends.a <-> trinity_cli.backends.b"]


# Heavy or presentation libraries, and the only files that may import them (path prefixes
# inside src/trinity_cli), so `trinity --help` stays instant and presentation stays in one place.
OWNERS = {
    "llama_cpp": ("backends/llamacpp.py",),
    "xllamacpp": ("backends/llamaserver.py",),
    "torch": ("coordinator/",),
    "transformers": ("coordinator/",),
    "tokenizers": ("coordinator/",),
    "cma": ("evolve/strategy.py",),
    "ray": ("evaluators/ray_actors.py", "evaluators/ray_cluster.py"),
    "matplotlib": ("runs/charts.py",),
    "fastapi": ("serve", "viewer/web.py"),
    "starlette": ("serve", "viewer/web.py"),
    "sse_starlette": ("serve",),
    "uvicorn": ("serve", "viewer/web.py"),
    "rich": ("render/",),
    "typer": ("cli/",),
}


def third_party(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
    return found


def test_heavy_and_presentation_libraries_stay_in_their_modules() -> None:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for lib in third_party(path) & OWNERS.keys():
            if not rel.startswith(OWNERS[lib]):
                wrong.append(f"{rel} imports {lib}")
    assert wrong == []


def undocumented(paths: list[Path]) -> list[str]:
    """The modules among `paths` whose opening docstring, the statement of their one job, is empty."""
    return [path.relative_to(path.parents[1]).as_posix() for path in paths
            if not (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "").strip()]


def test_every_module_opens_with_a_docstring_stating_its_job() -> None:
    assert undocumented(sorted(PACKAGE.rglob("*.py"))) == []


def test_docstring_checker_catches_a_module_without_one(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    bare, blank, good = (tmp_path / "pkg" / name for name in ("bare.py", "blank.py", "good.py"))
    bare.write_text("# a comment is not a docstring\nimport os\n")
    blank.write_text('"""   """\n')
    good.write_text('"""Do one thing."""\n')
    assert undocumented([bare, blank, good]) == ["pkg/bare.py", "pkg/blank.py"]
