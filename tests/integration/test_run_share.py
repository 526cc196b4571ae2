"""`kchaos run --workload share` on a real Kafka 4.4 cluster under kills: share consumers of one
group, explicit and implicit, record every delivery with its delivery count and every
acknowledgement with its outcome (docs/history.md, "The share workload"); records come back
(redelivered, delivery count above 1), acknowledgements of each type are answered, a late one
is refused, and the final reads read the log whole and drain the group. The producers are
pipelined (recorded in the JVM), and one kill is aimed at a share coordinator, whose
__share_group_state partition is checked against where Kafka wrote the state
(kafka-dump-log --share-group-state-decoder, docs/nemesis.md "Share-group targets")."""

from __future__ import annotations

import json
import re
from collections import Counter

from history.reader import read_history
from history.share import ACK_TYPES, OUTCOME_OK, read_share
from nemesis.targets import share_state_partition
from tests.integration.runs import quiet_run

NAME = "kshare"
SUBNET = "10.213.215.0/24"
STATE = "/var/lib/kafka/data/__share_group_state-{}"
DUMP = (
    'java -cp "/opt/kafka/dists/4.4.0/libs/*" org.apache.kafka.tools.DumpLogSegments '
    '--share-group-state-decoder --print-data-log --files "$(ls {}/*.log | paste -sd, -)"'
)
KEY = re.compile(
    r'key: \{"type":"\d+","data":\{"groupId":"([^"]+)","topicId":"([^"]+)",'
    r'"partition":(\d+)\}'
)


def _state_keys(dc) -> dict[int, set[tuple[str, str, int]]]:
    """Each __share_group_state partition's share-partition keys, as Kafka's own tool reads
    them from n1's log (every state partition has a replica on each of the three nodes)."""
    node = dc.nodes()["n1"]
    out = {}
    for p in range(5):
        got = node.exec(["sh", "-c", DUMP.format(STATE.format(p))], timeout=120)
        out[p] = {(g, t, int(n)) for g, t, n in KEY.findall(got.stdout)}
    return out


def test_share_consumers_record_deliveries_and_acknowledgements_under_kills(
    docker_client, tmp_path
):
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        11,
        tmp_path,
        workload="share",
        version="4.4.0",
        concurrency=5,
        share_consumers=3,
        # More of the rare draws than the defaults, so that a short run has each.
        share_acks="accept=50,release=15,reject=10,renew=10,none=15",
        # One node at a time (a share coordinator, then any), so the group stays served.
        nemesis=["kill@share-coordinator", "kill:one"],
        nemesis_interval=5,
        time_limit=20,
        rate=40,
        send_mode="async",
        in_flight=4,
        keep_cluster=True,
        inspect=_state_keys,
    )
    d = done.result.run_dir
    history = read_history(d)
    assert history.header["share"]["modes"] == ["explicit", "implicit", "explicit"]
    assert history.header["send_recorder"] == "jvm"
    # The coordinator the kill aimed at: the state partition Kafka wrote that share-partition's
    # state into, and every state record is where the same function puts it.
    [aimed] = [
        o["value"]["resolved_by"]
        for o in history.ops
        if o["f"] == "start-kill"
        and o["type"] == "ok"
        and o["value"]["kind"] == "share-coordinator"
    ]
    group, topic_id, part = aimed["key"].rsplit(":", 2)
    placed = {k: p for p, keys in done.inspected.items() for k in keys}
    assert placed[(group, topic_id, int(part))] == aimed["partition"], (aimed, placed)
    assert all(share_state_partition(g, t, n, 5) == p for (g, t, n), p in placed.items())
    share = read_share(history.ops)
    # Redeliveries happened (released, expired or left by a killed leader).
    counts = Counter(x.count for x in share.deliveries)
    assert max(counts) > 1, counts

    # Each type was sent and answered ok at least once; a held record's late acceptance
    # is answered too (InvalidRecordStateException once its lock expired).
    def answer(a):
        """The first outcome the acknowledging process heard of the record after sending."""
        return next(
            (
                o.outcome
                for o in share.outcomes
                if (o.process, o.key, o.offset) == (a.process, a.key, a.offset)
                and o.index >= a.index
            ),
            None,
        )

    sent_ok = {a.type for a in share.acks if answer(a) == OUTCOME_OK}
    assert sent_ok == set(ACK_TYPES), Counter(a.type for a in share.acks)
    assert share.held
    refusals = Counter(o.outcome.split(":")[0] for o in share.outcomes if o.outcome != OUTCOME_OK)
    assert refusals["InvalidRecordStateException"] > 0, refusals
    # The final reads: the log read whole, the group drained, its start offsets asked.
    run = json.loads((d / "run.json").read_text())
    final = run["final_reads"]
    assert final["complete"] is True, final
    assert final["share"]["ended"] == "quiet" and final["share"]["start_offsets"], final
    assert [o.index for o in share.offsets] and all(o.start for o in share.offsets)
    results = json.loads((d / "results.json").read_text())
    assert results["status"] == "valid", results
    assert done.result.exit_code == 0
