"""The jars of a Kafka release for tests that read them (class files, hook lookup), fetched from
Maven Central as setup does when this machine has not cached that release: a test that skipped
on a fresh machine tested nothing there."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusters.errors import ClusterError
from clusters.kafka_dist import ensure_dist


def kafka_libs(version: str) -> Path:
    """The release's ``libs`` directory in the host cache; fails the test, naming why, when it
    cannot be fetched."""
    try:
        return ensure_dist(version).home / "libs"
    except ClusterError as exc:
        pytest.fail(f"Kafka {version}'s jars could not be fetched: {exc}")
