"""Dynamic controller quorums (clusters/quorum.py): rendering, formatting, and reading what
kafka-metadata-quorum says."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from clusters.config import CONF_DIR, WIPE_MARKER, render_node, server_properties
from clusters.errors import ClusterError
from clusters.kafka_dist import KafkaDist
from clusters.quorum import (
    check_quorum,
    directory_id,
    format_options,
    initial_controllers,
    membership_outcome,
    parse_status,
)
from clusters.topology import build_topology

DIST = KafkaDist(
    "3.9.2",
    Path("/nonexistent"),
    {"kafka": "kafka.Kafka", "storage": "kafka.tools.StorageTool", "zookeeper": "z"},
)
CID = "MkU3OEVBNTcwNTJENDM2Qk"


def test_a_dynamic_quorum_is_found_through_bootstrap_servers_not_voters():
    topo = build_topology("kraft", quorum="dynamic", subnet="10.9.0.0/24")
    for node in topo.nodes:
        props = server_properties(topo, node, "fast")
        assert "controller.quorum.voters" not in props
        assert props["controller.quorum.bootstrap.servers"] == (
            "10.9.0.11:9093,10.9.0.12:9093,10.9.0.13:9093"
        )


def test_a_static_quorum_renders_as_before():
    topo = build_topology("kraft-combined")
    props = server_properties(topo, topo.nodes[0], "fast")
    assert "controller.quorum.bootstrap.servers" not in props
    assert list(props)[:3] == ["process.roles", "node.id", "controller.quorum.voters"]


def test_controllers_format_with_the_initial_voters_and_brokers_without():
    topo = build_topology("kraft", quorum="dynamic", subnet="10.9.0.0/24")
    c1, b1 = topo.node("c1"), topo.node("b1")
    voters = initial_controllers(topo, CID)
    assert voters.split(",")[0] == f"1@10.9.0.11:9093:{directory_id(CID, 1)}"
    assert format_options(topo, c1, CID, dynamic=True) == ["--initial-controllers", voters]
    assert format_options(topo, b1, CID, dynamic=True) == ["--no-initial-controllers"]
    assert format_options(topo, c1, CID, dynamic=True, fresh=True) == ["--no-initial-controllers"]
    static = build_topology("kraft")
    assert format_options(static, static.node("c1"), CID, dynamic=False) == []
    entry = render_node(topo, c1, DIST, "fast", CID).files[f"{CONF_DIR}/entrypoint.sh"]
    assert f"--initial-controllers {voters}" in entry and WIPE_MARKER not in entry


def test_a_reprovisioned_controller_wipes_once_then_joins_without_initial_voters():
    topo = build_topology("kraft", quorum="dynamic")
    cfg = render_node(topo, topo.node("c2"), DIST, "fast", CID, dynamic=True, fresh=True)
    entry = cfg.files[f"{CONF_DIR}/entrypoint.sh"]
    wipe, mkdir = entry.index(f"rm -rf /var/lib/kafka/data {WIPE_MARKER}"), entry.index("mkdir -p")
    assert wipe < mkdir < entry.index("--no-initial-controllers")
    assert f"if [ -f {WIPE_MARKER} ]" in entry


def test_directory_ids_are_stable_kafka_uuids():
    ids = {directory_id(CID, n) for n in range(1, 200)}
    assert len(ids) == 199 and directory_id(CID, 1) == directory_id(CID, 1)
    assert directory_id("other", 1) != directory_id(CID, 1)
    for d in ids:
        raw = base64.urlsafe_b64decode(d + "==")
        assert len(d) == 22 and len(raw) == 16 and any(raw[:8]) and not d.startswith("-")


@pytest.mark.parametrize(
    ("quorum", "topology", "releases", "says"),
    [
        ("dynamic", "kraft", ["3.8"], "needs Kafka 3.9 or newer"),
        ("dynamic", "kraft", ["3.9", "3.8.1"], "the run uses 3.8.1"),
        ("dynamic", "zk", ["3.9"], "needs a KRaft topology"),
        ("dynamic", "migration", ["3.9"], "needs a KRaft topology"),
        ("static-to-dynamic", "kraft", ["4.0"], "needs Kafka 4.1 or newer"),
        ("static-to-dynamic", "kraft", ["4.1", "4.3"], "cannot be combined"),
        ("joint", "kraft", ["4.1"], "unknown quorum"),
        ("dynamic-auto-join", "kraft", ["4.1"], "needs Kafka 4.2 or newer"),
        ("dynamic-auto-join", "kraft-combined", ["4.4"], "needs the kraft topology"),
    ],
)
def test_quorums_kafka_cannot_have_are_refused_in_one_sentence(quorum, topology, releases, says):
    with pytest.raises(ClusterError, match=says):
        check_quorum(quorum, topology, releases)


def test_quorums_kafka_can_have_pass():
    check_quorum("dynamic", "kraft-combined", ["3.9", "4.1"])
    check_quorum("static-to-dynamic", "kraft", ["4.1.2"])
    check_quorum("static", "zk", ["3.3"])
    check_quorum("dynamic-auto-join", "kraft", ["4.3.1", "4.4.0"])


STATUS = """[2026-11-24 07:54:21,803] INFO Kafka version: 3.9.2 (org.apache.kafka.common.utils.AppInfoParser)
ClusterId:              fMCL8kv1SWm87L_Md-I2hg
LeaderId:               2
LeaderEpoch:            4
HighWatermark:          82
MaxFollowerLag:         0
MaxFollowerLagTimeMs:   0
CurrentVoters:          [{"id": 1, "directoryId": "qMmcoDlResQrnunjVY0EtA", "endpoints": ["CONTROLLER://10.213.13.11:9093"]}, {"id": 3, "directoryId": "uGm086Yp4TcTo3CghM1CIQ", "endpoints": ["CONTROLLER://10.213.13.13:9093"]}, {"id": 2, "directoryId": "lo5JMOVaIDSdoOnSI0HC2w", "endpoints": ["CONTROLLER://10.213.13.12:9093"]}]
CurrentObservers:       [{"id": 4, "directoryId": "APgAsHEPsZP55u2BVc2hFA"}, {"id": 5, "directoryId": null}]
[2026-11-24 07:54:21,827] INFO Metrics scheduler closed (org.apache.kafka.common.metrics.Metrics)
"""  # noqa: E501


def test_describe_status_is_read_among_the_tools_logging():
    s = parse_status(STATUS)
    assert s is not None
    assert (s.leader, s.epoch, s.high_watermark) == (2, 4, 82)
    assert s.voter_ids() == [1, 2, 3] and s.directory_of(3) == "uGm086Yp4TcTo3CghM1CIQ"
    assert s.observers == ((4, "APgAsHEPsZP55u2BVc2hFA"), (5, None))
    assert parse_status("Timed out waiting for a node assignment") is None


def test_an_acknowledged_change_is_ok_and_says_only_the_tools_answer():
    out = "[x] INFO noise\nRemoved  KRaft controller 3 with directory id uGm0\n[y] INFO closed\n"
    o = membership_outcome("remove", 0, out, "")
    assert (o.kind, o.said, o.directory_id) == (
        "ok",
        "Removed  KRaft controller 3 with directory id uGm0",
        "uGm0",
    )
    added = "Added controller 3 with directory id h8W and endpoints: CONTROLLER://10.0.0.13:9093"
    assert membership_outcome("add", 0, added, "").kind == "ok"
    assert membership_outcome("add", 1, added, "").kind == "unknown"


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        ("VoterNotFoundException: Cannot remove voter X", "refused"),
        ("DuplicateVoterException: X is already part of the set of voters", "refused"),
        ("UnsupportedVersionException: Cluster doesn't support adding voter", "refused"),
        ("Aborted add voter operation for X since it is lagging behind", "busy"),
        ("Request timed out waiting for leader to handle previous voter change request", "busy"),
        ("Timed out waiting for a node assignment. Call: addRaftVoter", "unknown"),
        ("NotLeaderOrFollowerException: For requests intended only for the leader", "unknown"),
        ("RequestTimedOutException: The request timed out.", "unknown"),
        ("usage: kafka-metadata-quorum [-h]\nkafka-metadata-quorum: error: x", "refused"),
        ("", "unknown"),
    ],
)  # fmt: skip
def test_only_refusals_decided_before_anything_is_appended_are_definite(stderr, kind):
    assert membership_outcome("add", 1, "", stderr).kind == kind
