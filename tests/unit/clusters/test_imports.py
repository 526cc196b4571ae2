"""clusters/ imports in one direction: status, readiness and collection never import back the
orchestration that calls them."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import clusters

ROOT = Path(clusters.__file__).parent


def import_graph() -> nx.DiGraph:
    """Every import between clusters' own modules, at module level and inside functions."""
    modules = {f"clusters.{f.stem}": f for f in ROOT.glob("*.py") if f.stem != "__init__"}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph.add_edges_from((name, t) for t in targets if t in modules and t != name)
    return graph


def test_clusters_has_no_import_circles():
    graph = import_graph()
    assert [sorted(c) for c in nx.simple_cycles(graph)] == []


def test_status_readiness_and_collection_never_reach_docker_orchestration():
    graph = import_graph()
    for caller in ("clusters.status", "clusters.readiness", "clusters.collect"):
        reached = nx.descendants(graph, caller)
        assert not reached & {"clusters.docker_lifecycle", "clusters.docker_labels"}, caller


def _imports_docker(module: str) -> bool:
    path = ROOT / f"{module.removeprefix('clusters.')}.py"
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        if any(n == "docker" or n.startswith("docker.") for n in names):
            return True
    return False


def test_the_ssh_path_never_reaches_docker():
    """A cluster on SSH hosts is brought up, faulted and collected with no Docker call: only
    the test hosts (clusters/ssh_hosts.py, `kchaos hosts`) are made with Docker."""
    graph = import_graph()
    for caller in ("clusters.ssh_cluster", "clusters.ssh_node", "clusters.ssh_session"):
        reached = {caller, *nx.descendants(graph, caller)}
        assert "clusters.ssh_hosts" not in reached, caller
        assert [m for m in sorted(reached) if _imports_docker(m)] == [], caller
