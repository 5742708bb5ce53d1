"""The import rules that keep the design visible in the tree, read from the source with ``ast``.

Every import counts, deferred ones inside functions and ``TYPE_CHECKING`` ones too: a
deferred import still ties two modules together. The rules:

- each part of the project imports only the parts beneath it (:data:`MAY_IMPORT`);
- no two modules import each other, directly or round a longer circle;
- Celery, kombu and redis are imported only by the farm adapters, boto3 only by S3 storage,
  onnxruntime never by the producer side;
- the benchmarks' helpers (``benchmarks/bench``) are not installed, and nothing installed imports
  them;
- no module of the product is over :data:`MOST_LINES` lines;
- each part has a folder of its own: ``ttsfarm/`` holds only its parts (``core``, ``storage``,
  ``farm``, ``audiobook``, ``cli``), the others are top-level packages.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parent.parent
PACKAGES: Final = ("ttsfarm", "synthesis", "worker", "producer", "gateway")
"""What is installed: the product."""
MOST_LINES: Final = 400

MAY_IMPORT: Final[dict[str, frozenset[str]]] = {
    # part: the parts it may import (besides itself)
    "core": frozenset(),
    "storage": frozenset({"core"}),
    "synthesis": frozenset({"core", "storage"}),
    "farm": frozenset({"core"}),
    "audiobook": frozenset({"core", "storage", "synthesis"}),
    "worker": frozenset({"core", "storage", "synthesis", "farm"}),
    "producer": frozenset({"core", "storage", "farm", "audiobook"}),
    "gateway": frozenset({"core", "storage", "farm", "producer"}),
    "cli": frozenset({"core", "storage", "synthesis", "farm", "audiobook", "worker", "producer", "gateway"}),
}
"""Lowest first: shared types (``core``) know nothing of the rest; the command line is the top."""

THIRD_PARTY_HOMES: Final = {
    "celery": ("ttsfarm.farm", "worker", "producer.client"),
    "kombu": ("ttsfarm.farm", "worker", "producer.client"),
    "redis": ("ttsfarm.farm", "worker", "producer.client"),
    "boto3": ("ttsfarm.storage.s3",),
    "botocore": ("ttsfarm.storage.s3",),
    "onnxruntime": ("synthesis",),
    "bench": (),
    "benchmarks": (),
    "moto": (),
    "fastapi": ("gateway",),
}
"""Who may import each of these libraries (a module, or every module of a package)."""


TTSFARM_PARTS: Final = ("core", "storage", "farm", "audiobook", "cli")
"""The parts inside ``ttsfarm/``, each a folder."""


def part_of(module: str) -> str:
    if module == "ttsfarm.__main__":  # ``python -m ttsfarm``: the command line
        return "cli"
    for sub in TTSFARM_PARTS:
        if module == f"ttsfarm.{sub}" or module.startswith(f"ttsfarm.{sub}."):
            return sub
    top = module.split(".")[0]
    return "core" if top == "ttsfarm" else top  # ``ttsfarm`` itself re-exports the core's errors


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported_names(path: Path, module: str) -> Iterator[str]:
    """Every module name ``path`` imports, absolute; ``from a import b`` gives ``a.b`` as well
    as ``a`` (``b`` may be a module)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def project_imports() -> dict[str, set[str]]:
    """Each project module and the project modules it imports (never itself or its parents)."""
    known = modules()
    graph = {}
    for module, path in known.items():
        targets = {name for name in imported_names(path, module) if name in known}
        graph[module] = {t for t in targets if t != module and not module.startswith(t + ".")}
    return graph


def test_every_part_imports_only_the_parts_beneath_it() -> None:
    upward = [
        f"{module} ({part_of(module)}) imports {target} ({part_of(target)})"
        for module, targets in project_imports().items()
        for target in sorted(targets)
        if part_of(target) != part_of(module) and part_of(target) not in MAY_IMPORT[part_of(module)]
    ]
    assert upward == []


def circles_in(graph: dict[str, set[str]]) -> list[str]:
    """Each import circle found by a depth-first walk, as ``a -> b -> a``."""
    found = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                found.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_no_import_circles() -> None:
    assert circles_in(project_imports()) == []


@pytest.mark.parametrize("library", sorted(THIRD_PARTY_HOMES))
def test_libraries_are_imported_only_in_their_homes(library: str) -> None:
    homes = THIRD_PARTY_HOMES[library]
    strays = sorted(
        module
        for module, path in modules().items()
        if any(name.split(".")[0] == library for name in imported_names(path, module))
        and not any(module == home or module.startswith(home + ".") for home in homes)
    )
    assert strays == []


def test_only_the_product_is_installed() -> None:
    found = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    included = found["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(included) == sorted(f"{package}*" for package in PACKAGES)


def test_each_part_of_ttsfarm_has_a_folder_of_its_own() -> None:
    """Only the package's door (``__init__``, ``__main__``) and its parts' folders in ``ttsfarm/``:
    the ground floor does not share a folder with the floors above it."""
    entries = {path.name for path in (ROOT / "ttsfarm").iterdir() if path.name != "__pycache__"}
    assert entries == {"__init__.py", "__main__.py", "py.typed", *TTSFARM_PARTS}


def test_no_module_is_over_the_most_lines() -> None:
    long = {
        module: lines
        for module, path in modules().items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES
    }
    assert long == {}


def test_the_rules_see_the_imports_they_forbid(tmp_path: Path) -> None:
    """The parser finds deferred, relative and ``from`` imports, so the tests above can fail."""
    source = tmp_path / "probe.py"
    source.write_text(
        "import os\nfrom . import sibling\nfrom .sub import thing\n"
        "def f():\n    from worker.app import make_app\n    import celery.signals\n",
        encoding="utf-8",
    )
    names = set(imported_names(source, "ttsfarm.probe"))
    assert {"os", "ttsfarm.sibling", "ttsfarm.sub.thing", "worker.app.make_app", "celery.signals"} <= names
    assert part_of("ttsfarm.cli.farm") == "cli"
    assert circles_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a -> b -> c -> a"]
    assert "cli" not in MAY_IMPORT["worker"]
