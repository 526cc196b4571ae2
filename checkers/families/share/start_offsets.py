"""The share-partition start offset (SPSO) never moves backward (docs/checkers.md, "Share
groups").

KIP-932: the SPSO is the earliest offset of a share-partition's in-flight window: records below
it are all Acknowledged or Archived, and it moves forward as they reach those terminal states
("SPSO moves past record"); only an administrator's reset (AlterShareGroupOffsets, on an empty
group) moves it elsewhere, and the share workload makes none. Seen on Kafka 4.4.0 and allowed:
a start offset that stays behind (records above it acknowledged, `lag` 0): the rule is about
going back, not about keeping up.

`share-start-offset-regressed` (a failure): two ok `share-offsets` ops, the second invoked after
the first completed, whose answers give one partition a lower start offset the second time.
Partitions without a start offset in either answer (null: no state yet) are not compared.
"""

from __future__ import annotations

from checkers.core.findings import Finding, secs
from checkers.families.share.run import ShareRun

KIND = "share-start-offset-regressed"
RULE = (
    "a share-partition's start offset never moves backward: records below it are Acknowledged "
    "or Archived, terminal states (KIP-932); no reset was made"
)


def check_start_offsets(run: ShareRun) -> tuple[list[Finding], dict[str, int]]:
    findings: list[Finding] = []
    answers = sorted(run.offsets, key=lambda o: o.index)
    compared = 0
    for later in answers:
        for key, start in sorted(later.start.items()):
            if start is None:
                continue
            earlier = [
                o for o in answers if o.completed < later.invoked and o.start.get(key) is not None
            ]
            if not earlier:
                continue
            compared += 1
            top = max(earlier, key=lambda o: (o.start[key], -o.index))
            if start < top.start[key]:
                findings.append(
                    Finding(
                        KIND,
                        key,
                        (top.index, later.index),
                        f"partition {key}: the share-partition start offset was {top.start[key]} "
                        f"in op {top.index} (completed at {secs(top.completed)}) and "
                        f"{start} in op {later.index} (invoked at {secs(later.invoked)})",
                        {"before": top.start[key], "after": start},
                    )
                )
    return findings, {"share_start_offsets_compared": compared}
