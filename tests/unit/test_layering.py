"""The layering contract (docs/architecture.md), read from the code's own imports.

history/ imports nothing of ours; checkers/ only history/ (and never a library that talks to
Docker or Kafka); clusters/ only history/; nemesis/, steps/ and workloads/ only clusters/ and
history/; harness/ anything but a node kind's insides (Docker's or SSH's modules and libraries:
it holds the ``ClusterHandle`` clusters/handles.py opens). No two modules import each other
round a circle, and no module imports another's `_private` name. Imports inside functions
count: a circle through a late import is a circle still.
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
# A node kind's insides, which harness/ reaches only through clusters/handles.py's handles:
# the kinds' libraries, and their modules (by prefix: a new kind's ``clusters.k8s_*`` is added
# here with it).
NODE_KIND_LIBRARIES = {"docker", "paramiko"}
NODE_KIND_MODULES = ("clusters.docker_", "clusters.ssh_", "clusters.engine")


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


def _names_a_node_kind(module: str, item: str | None) -> bool:
    if module.split(".")[0] in NODE_KIND_LIBRARIES:
        return True
    # `from clusters import engine` names the module by its item.
    targets = [module, *([f"{module}.{item}"] if item else [])]
    return any(t.startswith(NODE_KIND_MODULES) for t in targets)


def test_harness_imports_no_node_kind():
    """Docker or SSH is chosen once, by clusters/handles.py; the harness asks the handle what it
    can do, never which kind it is (imports inside functions count)."""
    wrong = [
        f"{name} imports {module}" + (f".{item}" if item else "")
        for name, path in MODULES.items()
        if name.startswith("harness")
        for module, item in _imports(name, path)
        if _names_a_node_kind(module, item)
    ]
    assert wrong == []


def test_the_node_kind_rule_sees_what_it_forbids():
    """The rule reads every import form it is meant to refuse (a rule that matches nothing
    cannot fail)."""
    assert _names_a_node_kind("docker.errors", None)
    assert _names_a_node_kind("paramiko", None)
    assert _names_a_node_kind("clusters.docker_cluster", "DockerCluster")
    assert _names_a_node_kind("clusters.ssh_hosts", "TEST_USER")
    assert _names_a_node_kind("clusters", "engine")
    assert _names_a_node_kind("clusters.engine", "client")
    assert not _names_a_node_kind("clusters.handles", "open_cluster")
    assert not _names_a_node_kind("clusters.cluster", "ClusterInfo")
    assert any(
        _names_a_node_kind(m, i)
        for name, path in MODULES.items()
        if name == "clusters.handles"
        for m, i in _imports(name, path)
    ), "clusters/handles.py opens the kinds: the rule must see its imports"


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


# checkers/ inside: the families sit below the entries (api, cli, registry, table_check) that
# bind them into a check, and the reports read results and history, never a family's insides.
CHECKER_ENTRIES = ("checkers.api", "checkers.cli", "checkers.registry", "checkers.table_check")
CHECKER_REPORTS = ("checkers.report", "checkers.analyze")


def _under(module: str, roots: tuple[str, ...]) -> bool:
    return any(module == r or module.startswith(r + ".") for r in roots)


def test_checker_families_import_no_entry_or_report_and_reports_no_family():
    wrong = [
        f"{a} imports {b}"
        for a, b in _graph().edges
        if (_under(a, ("checkers.families",)) and _under(b, (*CHECKER_ENTRIES, *CHECKER_REPORTS)))
        or (_under(a, CHECKER_REPORTS) and _under(b, ("checkers.families", "checkers.registry")))
    ]
    assert wrong == []


# harness/ inside (harness/__init__.py): its root (spec, plan, console, exit_codes, signals) is
# what the rooms share and imports none of them; a run imports no command and no campaign; a
# campaign runs each cell as a `kchaos run` process, so it imports no run and no command (nor
# does a shrink, which replays each candidate so); the
# commands (cli/) may import any room.
HARNESS_ROOMS = ("cli", "run", "campaign", "shrink")
HARNESS_MAY_IMPORT = {
    "root": {"root"},
    "run": {"root", "run"},
    "campaign": {"root", "campaign"},
    # A shrink replays each candidate as a `kchaos run` process, as a campaign runs a cell.
    "shrink": {"root", "shrink"},
    "cli": {"root", "run", "campaign", "shrink", "cli"},
}


def _harness_room(module: str) -> str | None:
    """The room of harness/ a module of ours is in ("root" for harness/'s own files), or None
    outside harness/."""
    parts = module.split(".")
    if parts[0] != "harness":
        return None
    # A room's package (its __init__, as harness.cli, the command group) is in the room.
    return parts[1] if len(parts) > 1 and parts[1] in HARNESS_ROOMS else "root"


def test_harness_rooms_import_only_the_rooms_they_may():
    wrong = [
        f"{a} imports {b}"
        for a, b in _graph().edges
        if (ra := _harness_room(a))
        and (rb := _harness_room(b))
        and rb not in HARNESS_MAY_IMPORT[ra]
    ]
    assert wrong == []


def test_the_harness_rule_sees_every_room():
    """Each room has modules and the rule reads the edges between them (a rule that matches no
    module cannot fail)."""
    rooms = {_harness_room(m) for m in MODULES if m.startswith("harness")}
    assert rooms == {"root", *HARNESS_ROOMS}
    crossing = {(_harness_room(a), _harness_room(b)) for a, b in _graph().edges}
    assert {("cli", "run"), ("cli", "campaign"), ("run", "root"), ("campaign", "root")} <= crossing
