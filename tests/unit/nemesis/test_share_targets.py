"""The share-group selectors: share-leader from the share workload's partition leaders,
share-coordinator from Kafka's own mapping of a share-partition to a __share_group_state
partition (ShareCoordinatorService.partitionFor over SharePartitionKey.asCoordinatorKey)."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters.topology import build_topology
from nemesis import targets as t
from nemesis.api import FaultContext
from nemesis.errors import NemesisError

COMBINED = build_topology("kraft-combined", cluster="x")
GROUP = "kchaos-r1-share"
TOPIC_ID = "AQIDBAUGBwgJCgsMDQ4PEA"  # Uuid(0x0102030405060708, 0x090a0b0c0d0e0f10).toString()

# (group, topic id, partition, String.hashCode of the key, Utils.abs(hashCode) % 5), printed by
# the JDK on this machine for the key "group:topicId:partition" (java H 5 <key>).
JAVA = [
    (GROUP, TOPIC_ID, 0, 1002240446, 1),
    (GROUP, TOPIC_ID, 3, 1002240449, 4),
    ("kchaos-20261128-140000-share", "x-Y_zQ0aTfO8T3c2wG7l9A", 2, -600441015, 0),
    ("g", "AAAAAAAAAAAAAAAAAAAAAA", 0, -92982199, 4),
]


@pytest.mark.parametrize(("group", "topic_id", "part", "hash_code", "of5"), JAVA)
def test_the_state_partition_matches_the_jdk(group, topic_id, part, hash_code, of5):
    key = t.share_coordinator_key(group, topic_id, part)
    assert key == f"{group}:{topic_id}:{part}"
    assert t.java_string_hash(key) == hash_code
    assert t.share_state_partition(group, topic_id, part, 5) == of5


@settings(max_examples=200)
@given(st.text(max_size=30), st.integers(0, 999), st.integers(1, 60))
def test_the_state_partition_is_always_one_of_the_state_topic(group, part, partitions):
    assert 0 <= t.share_state_partition(group, TOPIC_ID, part, partitions) < partitions


def _state(leaders: dict[int, int], partitions: int = 4) -> t.ShareState:
    return t.ShareState(TOPIC_ID, partitions, leaders)


def test_share_coordinator_is_the_leader_of_the_share_partitions_state_partition():
    leaders = {p: 1 + p % 3 for p in range(5)}
    hints = {"topic": "kchaos-share", "share_group": GROUP}
    seen = {}
    for seed in range(40):
        found = t.share_coordinator(
            COMBINED, hints, random.Random(seed), lambda _topo, _topic: _state(leaders)
        )
        ev = found.evidence
        part = int(ev["share_partition"].rsplit("-", 1)[1])
        assert ev["key"] == f"{GROUP}:{TOPIC_ID}:{part}"
        assert ev["partition"] == t.share_state_partition(GROUP, TOPIC_ID, part, 5)
        assert ev["partitions"] == 5
        assert found.targets == [f"n{leaders[ev['partition']]}"] == [ev["leader"]]
        seen[part] = ev["partition"]
    assert set(seen) == {0, 1, 2, 3}  # the seed picks among every share-partition
    assert seen[0] == 1 and seen[3] == 4  # as the JDK computed above


def test_share_coordinator_refuses_without_a_group_or_a_leader():
    with pytest.raises(NemesisError, match=r"needs a share group \(--workload share\)"):
        t.share_coordinator(COMBINED, {"topic": "q"}, random.Random(0), lambda *_: _state({0: 1}))
    hints = {"topic": "kchaos-share", "share_group": GROUP}
    with pytest.raises(NemesisError, match=r"__share_group_state-1 \(of kchaos-r1-share:.*:0\)"):
        t.share_coordinator(
            COMBINED,
            hints,
            random.Random(0),
            lambda *_: t.ShareState(TOPIC_ID, 1, {p: (-1 if p == 1 else 1) for p in range(5)}),
        )
    with pytest.raises(NemesisError, match="__share_group_state has no partitions"):
        t.share_coordinator(COMBINED, hints, random.Random(0), lambda *_: _state({}))


def test_share_leader_names_the_leader_of_a_share_partition_drawn_by_seed():
    hints = {
        "topic": "kchaos-share",
        "share_group": GROUP,
        "partition_leaders": {0: 1, 1: None, 2: 3},
    }
    picks = {}
    for seed in range(40):
        found = t.share_leader(COMBINED, hints, {}, random.Random(seed))
        picks[found.evidence["share_partition"]] = found.targets
        assert found.evidence["group"] == GROUP
    assert picks == {"kchaos-share-0": ["n1"], "kchaos-share-2": ["n3"]}
    again = [t.share_leader(COMBINED, hints, {}, random.Random(5)).record() for _ in range(2)]
    assert again[0] == again[1]


def test_share_leader_refuses_without_a_group_or_any_leader():
    with pytest.raises(NemesisError, match="target share-leader needs a share group"):
        t.share_leader(COMBINED, {"partition_leaders": {0: 1}}, {}, random.Random(0))
    hints = {"topic": "kchaos-share", "share_group": GROUP, "partition_leaders": {0: None}}
    with pytest.raises(NemesisError, match="no partition of kchaos-share has a known leader"):
        t.share_leader(COMBINED, hints, {}, random.Random(0))


def test_resolve_dispatches_the_share_selectors():
    hints = {"topic": "kchaos-share", "share_group": GROUP, "partition_leaders": {0: 2}}
    ctx = FaultContext(topology=COMBINED, nodes={}, hints=hints)
    assert t.resolve(ctx, "share-leader", random.Random(0)).targets == ["n2"]
    queue = FaultContext(topology=COMBINED, nodes={}, hints={"partition_leaders": {0: 2}})
    with pytest.raises(NemesisError, match="needs a share group"):
        t.resolve(queue, "share-coordinator", random.Random(0))
    assert t.could_name("share-coordinator", COMBINED) == [n.name for n in COMBINED.brokers]


def test_the_topic_id_is_written_as_kafkas_uuid_to_string_not_confluents():
    # Uuid(-0x0102030405060708, -5): confluent_kafka prints "/v38+/r5+Pj/////////+w"; Kafka's
    # Uuid.toString (Base64.getUrlEncoder().withoutPadding()) the URL-safe alphabet.
    assert t.kafka_uuid(-0x0102030405060708, -5) == "_v38-_r5-Pj_________-w"
    assert t.kafka_uuid(0x0102030405060708, 0x090A0B0C0D0E0F10) == TOPIC_ID


# Where Kafka 4.4.0 put each share-partition's state in a real run (seed 3101): the
# __share_group_state partition whose log holds its ShareSnapshot/ShareUpdate records, as
# `kafka-dump-log --share-group-state-decoder` printed them (5 state partitions).
RUN = "kchaos-share-20261128T134947-3101-share"
PLACED = [
    (RUN, "xGh6D7k_SZ6aakzZbV3t3w", 0, 1),
    (RUN, "xGh6D7k_SZ6aakzZbV3t3w", 1, 2),
    (RUN, "xGh6D7k_SZ6aakzZbV3t3w", 2, 3),
    (RUN, "xGh6D7k_SZ6aakzZbV3t3w", 3, 4),
    (f"{RUN}-warmup", "pc_1a2e0SQiH4sZ_GhRcNQ", 0, 4),
]


@pytest.mark.parametrize(("group", "topic_id", "part", "state_part"), PLACED)
def test_the_state_partition_is_where_kafka_wrote_the_state(group, topic_id, part, state_part):
    assert t.share_state_partition(group, topic_id, part, 5) == state_part
