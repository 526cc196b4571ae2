"""A broker that applied metadata the quorum never committed.

The observer's `metadata_offset` is broker-metadata-metrics `last-applied-record-offset`: the
last offset contained in the newest image the broker's MetadataLoader published
(`MetadataProvenance.lastContainedOffset`), an inclusive offset. The Raft high watermark is
exclusive: offsets below it are committed. So applied offset X is covered by high watermark H
when X < H.

X is proven never committed only by the decoded logs: a committed entry was stored on a
majority of the voters, and a voter never drops a committed entry (it truncates only entries
that conflict with a newer leader, which committed ones never do; a snapshot replaces its log
only with a later end). So when more voters than a minority end their logs at or below X at the
end of the run, no majority ever held X. A data-loss fault voids that argument: not judged then.
"""

from __future__ import annotations

from typing import Any

from checkers.core.findings import Finding
from checkers.families.metadata_log.parse import MetadataLog
from checkers.families.observer_samples import MetadataInput, Sample

RULE = (
    'KIP-631: "Metadata changes need to be persisted to the __kafka_metadata log before we apply '
    'them on the other nodes in the cluster"; "the active controller must not make this future '
    "state 'visible' to the rest of the cluster until it has been made persistent\""
)
KIND = "applied-uncommitted-metadata"


def covered_offset(data: MetadataInput, last_committed: int) -> int:
    """The highest offset anything proves committed: the logs' bound, or a high watermark."""
    marks = [s.raft("high_watermark") for s in data.samples]
    highest = max((m for m in marks if isinstance(m, int)), default=0)
    return max(last_committed, highest - 1)


def beyond(data: MetadataInput, last_committed: int) -> list[Sample]:
    """Samples of brokers that applied an offset nothing proves committed."""
    covered = covered_offset(data, last_committed)
    return [
        s
        for s in data.samples
        if isinstance(x := s.value.get("metadata_offset"), int) and x > covered
    ]


def unjudged_note(data: MetadataInput, why: str) -> list[str]:
    """The note for a run whose applied offsets cannot be held against committed logs."""
    suspects = beyond(data, -1)
    if not suspects:
        return []
    top = max(suspects, key=lambda s: s.value["metadata_offset"])
    return [
        f"{len(suspects)} broker samples applied metadata beyond every reported high watermark "
        f"(highest: {top.node} applied offset {top.value['metadata_offset']} in {top.cite()}); "
        f"not judged: {why}"
    ]


def applied_beyond_commit(
    data: MetadataInput,
    voter_logs: dict[str, MetadataLog],
    voters: list[str],
    last_committed: int,
) -> tuple[list[Finding], list[str]]:
    """Findings for brokers that applied an offset no majority of `voters` ever held."""
    suspects = beyond(data, last_committed)
    if not suspects:
        return [], []
    if not voters:
        return [], unjudged_note(data, "cluster.json names no controllers, so no majority")
    if any(d.data_loss for d in data.disruptions):
        return [], unjudged_note(data, "a data-loss fault may have erased committed entries")
    need = len(voters) // 2 + 1
    findings: list[Finding] = []
    notes: list[str] = []
    by_node: dict[str, list[Sample]] = {}
    for s in suspects:
        by_node.setdefault(s.node, []).append(s)
    for node, samples in sorted(by_node.items()):
        proven = []
        for s in samples:
            x = s.value["metadata_offset"]
            lacking = _lacking(voter_logs, voters, x)
            if len(lacking) > len(voters) - need:
                proven.append((s, lacking))
        if not proven:
            top = max(samples, key=lambda s: s.value["metadata_offset"])
            notes.append(
                f"{node} applied offset {top.value['metadata_offset']} in {top.cite()}, beyond "
                f"every reported high watermark and the logs' committed bound {last_committed}, "
                f"but the voters' logs do not prove it was never committed (no majority of "
                f"the {len(voters)} voters ends below it): not judged"
            )
            continue
        s, lacking = proven[0]
        findings.append(_finding(s, lacking, voter_logs, len(voters), len(proven)))
    return findings, notes


def _lacking(logs: dict[str, MetadataLog], voters: list[str], x: int) -> list[str]:
    """Voters whose complete log ends at or below offset x (a missing or cut file proves
    nothing)."""
    return [v for v in voters if v in logs and logs[v].complete and logs[v].end_offset <= x]


def _finding(
    s: Sample, lacking: list[str], logs: dict[str, MetadataLog], voters: int, count: int
) -> Finding:
    x = s.value["metadata_offset"]
    ends = []
    for v in lacking:
        log = logs[v]
        last = log.records.get(log.last_offset)
        ends.append(
            f"metadata/{v}.txt ends at offset {log.end_offset - 1}"
            + (f" ({last.cite()})" if last is not None else "")
        )
    more = f" ({count} such samples of {s.node})" if count > 1 else ""
    data: dict[str, Any] = {
        "rule": RULE,
        "node": s.node,
        "applied_offset": x,
        "voters_lacking": lacking,
        "voter_ends": {v: logs[v].end_offset - 1 for v in lacking},
    }
    return Finding(
        KIND,
        None,
        (s.index,),
        f"{s.node} reported last-applied-record-offset {x} in {s.cite()}{more}, but offset {x} "
        f"was never committed: {len(lacking)} of {voters} voters never held it at the end of "
        f"the run ({'; '.join(ends)}), and no sample reported a high watermark above {x}. "
        f"Rule: {RULE}",
        data,
    )
