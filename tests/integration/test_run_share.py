"""`kchaos run --workload share` on a real Kafka 4.4 cluster under kills: share consumers of one
group, explicit and implicit, record every delivery with its delivery count and every
acknowledgement with its outcome (docs/history.md, "The share workload"); records come back
(redelivered, delivery count above 1), acknowledgements of each type are answered, a late one
is refused, and the final reads read the log whole and drain the group."""

from __future__ import annotations

import json
from collections import Counter

from history.reader import read_history
from history.share import ACK_TYPES, OUTCOME_OK, read_share
from tests.integration.runs import quiet_run

NAME = "kshare"
SUBNET = "10.213.215.0/24"


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
        # One node at a time (a share-partition leader, then any), so the group stays served.
        nemesis=["kill:partition-leader", "kill:one"],
        nemesis_interval=5,
        time_limit=20,
        rate=40,
    )
    assert done.left_behind == []
    d = done.result.run_dir
    history = read_history(d)
    assert history.header["share"]["modes"] == ["explicit", "implicit", "explicit"]
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
