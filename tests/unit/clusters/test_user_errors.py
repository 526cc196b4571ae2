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


def _offline_with_a_newer_release_listed(tmp_path, monkeypatch, cached: tuple[str, ...]) -> None:
    """Maven Central out of reach; its list (cached earlier) names 4.4.0, never fetched here."""
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path))
    monkeypatch.setattr(kafka_dist, "MAVEN_REPO", "http://127.0.0.1:9/maven2")
    listing = "".join(f"<version>{v}</version>" for v in ("3.9.2", "4.3.1", "4.4.0"))
    (tmp_path / "kafka").mkdir()
    (tmp_path / "kafka" / "maven-metadata.xml").write_text(
        f"<metadata><versioning><versions>{listing}</versions></versioning></metadata>"
    )
    for version in cached:
        (tmp_path / "kafka" / version).mkdir()
        (tmp_path / "kafka" / version / "dist.json").write_text(
            f'{{"version": "{version}", "classes": {{}}}}'
        )


def test_offline_a_line_means_its_newest_cached_release(tmp_path, monkeypatch):
    _offline_with_a_newer_release_listed(tmp_path, monkeypatch, ("3.9.2", "4.3.1"))
    assert kafka_dist.resolve_offline_first("4") == "4.3.1"
    assert kafka_dist.resolve_offline_first("4.3") == "4.3.1"


def test_offline_a_release_never_fetched_is_one_clear_error(tmp_path, monkeypatch):
    _offline_with_a_newer_release_listed(tmp_path, monkeypatch, ("3.9.2", "4.3.1"))
    for requested in ("4.4", "4.4.0"):
        with pytest.raises(
            ClusterError,
            match=r"Kafka 4\.4\.0 is not in this host's cache and Maven Central is not "
            r"reachable .*cached: 3\.9\.2, 4\.3\.1",
        ):
            kafka_dist.resolve_offline_first(requested)


def test_offline_a_cached_newest_release_needs_nothing(tmp_path, monkeypatch):
    _offline_with_a_newer_release_listed(tmp_path, monkeypatch, ("4.3.1", "4.4.0"))
    assert kafka_dist.resolve_offline_first("4") == "4.4.0"
    assert kafka_dist.resolve_offline_first("4.4.0") == "4.4.0"


def test_unknown_topology_is_refused_by_the_cli():
    result = run_cli("cluster", "up", "--topology", "raft")
    assert result.returncode == 254 and "--topology: 'raft' is not one of" in result.stderr
