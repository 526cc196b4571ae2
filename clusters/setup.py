"""One idempotent setup: host packages, a running Docker engine, Kafka jars, the node image."""

from __future__ import annotations

from collections.abc import Callable

from clusters.disk_layer import PROGRAM, ensure_layer
from clusters.engine import ensure_engine, ensure_packages, prove_engine
from clusters.errors import ClusterError
from clusters.image import ensure_image
from clusters.kafka_dist import check_release, ensure_agents, ensure_dist


def check_versions(versions: list[str]) -> None:
    """Refuses, without a network, a version setup could not fetch (not a version, or older
    than kchaos supports), named by setup's option: before any package or daemon is touched."""
    for requested in versions:
        try:
            check_release(requested)
        except ClusterError as exc:
            raise ClusterError(f"--version: {exc}") from None


def run_setup(versions: list[str], say: Callable[[str], None] = print) -> None:
    check_versions(versions)
    ensure_packages(say=say)
    client = ensure_engine(say=say)
    say(f"Docker engine {client.version().get('Version', '?')} answers")
    for jar in ensure_agents():
        say(f"JVM agent {jar.name} in {jar.parent}")
    for requested in versions:
        dist = ensure_dist(requested)
        say(f"Kafka {dist.version} assembled from Maven Central in {dist.home}")
    say(f"disk layer {ensure_layer(say=say) / PROGRAM}")
    tag = ensure_image(client, say=say)
    prove_engine(client, tag)
    say(f"node image {tag} runs containers")
