"""Bad environments end in one clear message, never a traceback."""

import os
import subprocess
import sys

import pytest

from clusters import kafka_dist
from clusters.errors import ClusterError


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )


def test_docker_not_running_is_one_clear_error():
    result = run_cli("cluster", "status", DOCKER_HOST="unix:///nonexistent/docker.sock")
    assert result.returncode == 254
    assert "Docker is not running" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_unreachable_maven_central_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path))
    # Port 9 on loopback refuses connections: Maven Central "down" without leaving the machine.
    monkeypatch.setattr(kafka_dist, "MAVEN_REPO", "http://127.0.0.1:9/maven2")
    with pytest.raises(ClusterError, match="Maven Central is not reachable"):
        kafka_dist.resolve_offline_first("3.9")


def test_cached_distributions_resolve_without_maven(tmp_path, monkeypatch):
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path))
    monkeypatch.setattr(kafka_dist, "MAVEN_REPO", "http://127.0.0.1:9/maven2")
    home = tmp_path / "kafka" / "3.9.1"
    home.mkdir(parents=True)
    (home / "dist.json").write_text('{"version": "3.9.1", "classes": {}}')
    assert kafka_dist.resolve_offline_first("3.9") == "3.9.1"


def test_unknown_topology_is_refused_by_the_cli():
    result = run_cli("cluster", "up", "--topology", "raft")
    assert result.returncode == 254 and "Invalid value for '--topology'" in result.stderr
