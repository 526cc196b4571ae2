"""One poll's records of a partition come in increasing offset order (docs/checkers.md, "Share
groups").

KafkaShareConsumer's javadoc: "The consumer guarantees that the records returned in the
ConsumerRecords object for a specific topic-partition are in order of increasing offset." Across
polls there is no order: KIP-932, records "can be delivered out of order to a consumer, in
particular when redeliveries occur", and "There are no guarantees about the ordering of offsets
between different batches".

`share-poll-offsets-not-increasing` (a failure): one ok `share-poll` whose records of one
partition, in the order `poll()` returned them, have an offset at or below the one before it
(Kafka 4.4.0 was seen to return offsets 0-13 of a partition twice in one poll, delivery counts 1
and 2, after that partition's leader was killed: two delivery attempts, the first ended by the
leader change, given to the application at once). One finding per poll and partition.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

from checkers.core.findings import Finding
from checkers.families.share.run import ShareRun
from history.share import Delivery

KIND = "share-poll-offsets-not-increasing"
RULE = (
    "the records one poll returns of a partition are in increasing offset order "
    "(KafkaShareConsumer: 'The consumer guarantees that the records returned in the "
    "ConsumerRecords object for a specific topic-partition are in order of increasing offset')"
)


def check_ordering(run: ShareRun) -> tuple[list[Finding], dict[str, int]]:
    polls: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
    for d in run.share.deliveries:  # in the order poll() returned them (history/share.py)
        polls[(d.index, d.key)].append(d)
    findings = []
    for (index, key), ds in sorted(polls.items()):
        back = [(p, d) for p, d in pairwise(ds) if d.offset <= p.offset]
        if not back:
            continue
        p, d = back[0]
        findings.append(
            Finding(
                KIND,
                key,
                (index,),
                f"partition {key}: the poll of process {d.process} (op {index}) returned offset "
                f"{d.offset} (delivery count {d.count}) after offset {p.offset} (delivery count "
                f"{p.count}); {len(back)} such steps back among its {len(ds)} records of the "
                "partition",
                {
                    "offsets": [x.offset for x in ds],
                    "counts": [x.count for x in ds],
                    "process": d.process,
                },
            )
        )
    return findings, {}
