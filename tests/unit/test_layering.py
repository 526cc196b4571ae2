"""The layering contract (docs/architecture.md), read from the code's own imports.

history/ imports nothing of ours; checkers/ only history/ (and never a library that talks to
Docker or Kafka); clusters/ only history/; nemesis/, steps/ and workloads/ only clusters/ and
history/; harness/ anything. No two modules import each other round a circle, and no module imports
another's `_private` name. Imports inside functions count: a circle through a late import is a
circle still.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("history", "checkers", "clusters", "nemesis", "steps", "workloads", "harness")
ALLOWED = {
    "history": set(),
    "checkers": {"history"},
    "clusters": {"history"},
    "nemesis": {"clusters", "history"},
    # Planned steps: migration, upgrades, feature and quorum steps (steps/registry.py).
    "steps": {"clusters", "history"},
    "workloads": {"clusters", "history"},
    "harness": {"checkers", "clusters", "nemesis", "steps", "workloads", "history"},
}
# Libraries that talk to Docker, Kafka, ZooKeeper or hosts: never in a checker.
TALKERS = {"docker", "confluent_kafka", "kazoo", "paramiko", "requests"}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = f
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, str | None]]:
    """(module imported, name imported from it or None), relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            out += [(base, a.name) for a in node.names]
    return out


def _ours(target: str) -> str | None:
    """The module of ours `target` names (a module, or a name inside one), None if foreign."""
    while target:
        if target in MODULES:
            return target
        target = target.rpartition(".")[0]
    return None


def _graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for name, path in MODULES.items():
        g.add_node(name)
        for module, item in _imports(name, path):
            for target in (f"{module}.{item}" if item else module, module):
                dep = _ours(target)
                # A package's __init__ re-exporting its children is not a design circle.
                if dep and dep != name and not name.startswith(dep + "."):
                    g.add_edge(name, dep)
                    break
    return g


def test_every_folder_imports_only_the_layers_below_it():
    wrong = [
        f"{a} imports {b}"
        for a, b in _graph().edges
        if b.split(".")[0] != a.split(".")[0] and b.split(".")[0] not in ALLOWED[a.split(".")[0]]
    ]
    assert wrong == []


def test_checkers_import_nothing_that_talks_to_docker_or_kafka():
    wrong = [
        f"{name} imports {module}"
        for name, path in MODULES.items()
        if name.startswith("checkers")
        for module, _ in _imports(name, path)
        if module.split(".")[0] in TALKERS
    ]
    assert wrong == []


def test_no_import_circles():
    circles = [sorted(c) for c in nx.strongly_connected_components(_graph()) if len(c) > 1]
    assert circles == []


def test_no_private_names_cross_modules():
    wrong = [
        f"{name} imports {module}.{item}"
        for name, path in MODULES.items()
        for module, item in _imports(name, path)
        if item
        and item.startswith("_")
        and not item.startswith("__")
        and module in MODULES
        and module != name
    ]
    assert wrong == []


@pytest.mark.parametrize("package", PACKAGES)
def test_the_contract_sees_every_package(package):
    """A contract that reads no code cannot fail: each package has modules and imports."""
    assert any(n.split(".")[0] == package for n in MODULES)
    assert any(a.split(".")[0] == package for a, _ in _graph().edges)
