"""Rules over the committed part of the controllers' metadata logs, each citing a KIP sentence."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations
from typing import Any

from checkers.core.findings import Finding
from checkers.families.metadata_log.parse import MetadataLog, Record

RULES = {
    "metadata-divergence": (
        'KIP-631: "Metadata changes need to be persisted to the __kafka_metadata log ... After '
        "that point, we are guaranteed not to lose the change as long as we uphold the Raft "
        'invariants"; KIP-500: the log "ensures that the consumers always move along a single '
        'timeline": committed offsets hold the same entry on every controller'
    ),
    "broker-epoch-regression": (
        'KIP-631: a broker "may lose subsequent conflicts if its broker epoch is stale" (broker '
        "epochs, KIP-380, only grow: a later registration of a broker id never gets a lower one)"
    ),
    "leader-epoch-regression": (
        'KIP-631 PartitionRecord/PartitionChangeRecord LeaderEpoch: "An epoch that gets '
        'incremented each time we change the ISR"; KIP-584: epoch values "will increase '
        'monotonically whenever the metadata changes"'
    ),
    "feature-level-divergence": (
        'KIP-584: "The metadata served to the client will contain an epoch value. These epoch '
        "values are integers and will increase monotonically whenever the metadata changes. At "
        'any given time, the latest epoch for the metadata returned to the client is valid": one '
        "epoch (in KRaft, the metadata offset) names one set of finalized features"
    ),
}


def _finding(kind: str, records: list[Record], text: str, **data: Any) -> Finding:
    cites = [r.cite() for r in records]
    return Finding(
        kind,
        None,
        (),
        f"{text}. Records: " + "; ".join(cites) + f". Rule: {RULES[kind]}",
        {"rule": RULES[kind], "records": cites, **data},
    )


def rejoin(a: MetadataLog, b: MetadataLog, after: int) -> int | None:
    """The first offset past `after` where both logs hold the same entry, if any."""
    for offset in sorted(o for o in a.records if o > after and o in b.records):
        if a.records[offset].same_entry(b.records[offset]):
            return offset
    return None


def divergence(
    logs: dict[str, MetadataLog], last_committed: int, notes: list[str] | None = None
) -> list[Finding]:
    """Pairs of controllers that differ at a committed offset and agree again later.

    Raft's log matching: two logs with the same entry (offset, epoch) are identical up to it.
    Differing at o and agreeing at p > o breaks it, whoever is right. A controller that differs
    from o on and never agrees again is a follower still holding a deposed leader's tail: it
    truncates when it next fetches, so that is a note, not a failure.
    """
    out: list[Finding] = []
    reported: set[int] = set()  # offsets: one finding per split, not per pair that sees it
    for a, b in combinations(sorted(logs), 2):
        la, lb = logs[a], logs[b]
        for offset in range(last_committed + 1):
            ra, rb = la.records.get(offset), lb.records.get(offset)
            if ra is None or rb is None or ra.same_entry(rb):
                continue
            again = rejoin(la, lb, offset)
            if again is None:
                if notes is not None:
                    notes.append(
                        f"metadata logs of {a} and {b} differ from committed offset {offset} "
                        "on and never agree again: one is a follower that has not caught up "
                        f"({ra.cite()} / {rb.cite()})"
                    )
                break
            if offset in reported:
                break
            reported.add(offset)
            out.append(
                _finding(
                    "metadata-divergence",
                    [ra, rb, la.records[again], lb.records[again]],
                    f"{a} and {b} hold different entries at committed offset {offset} "
                    f"(committed up to {last_committed}), {ra.type} vs {rb.type}, yet the same "
                    f"entry at offset {again}",
                    offset=offset,
                    nodes=[a, b],
                )
            )
            break
    return out


def committed_records(logs: dict[str, MetadataLog], last_committed: int) -> Iterator[Record]:
    """One copy of each committed entry, in offset order (any copy: they agree or diverge)."""
    for offset in range(last_committed + 1):
        for log in logs.values():
            if offset in log.records:
                yield log.records[offset]
                break


def broker_epochs(records: list[Record]) -> list[Finding]:
    out = []
    latest: dict[int, Record] = {}
    for r in records:
        if r.type != "REGISTER_BROKER_RECORD":
            continue
        broker, epoch = r.data.get("brokerId"), r.data.get("brokerEpoch")
        if not isinstance(broker, int) or not isinstance(epoch, int):
            continue
        before = latest.get(broker)
        if before is not None and epoch < before.data["brokerEpoch"]:
            out.append(
                _finding(
                    "broker-epoch-regression",
                    [before, r],
                    f"broker {broker} registered with epoch {before.data['brokerEpoch']} at "
                    f"offset {before.offset}, then with lower epoch {epoch} at offset {r.offset}",
                    broker=broker,
                )
            )
        if before is None or epoch >= before.data["brokerEpoch"]:
            latest[broker] = r
    return out


# PartitionChangeRecord.Leader: -2 means "leader unchanged"; anything else is a new leader (or
# none, -1), and every such change bumps the leader epoch by at least one.
NO_LEADER_CHANGE = -2


def leader_epochs(records: list[Record]) -> list[Finding]:
    """PartitionRecord epochs never fall below what earlier records already imply."""
    out = []
    # (topicId, partition) -> (least epoch the partition can have now, the records that show it)
    least: dict[tuple[str, int], tuple[int, list[Record]]] = {}
    for r in records:
        d = r.data
        key = (d.get("topicId"), d.get("partitionId"))
        if r.type == "REMOVE_TOPIC_RECORD":
            least = {k: v for k, v in least.items() if k[0] != d.get("topicId")}
            continue
        if r.type not in ("PARTITION_RECORD", "PARTITION_CHANGE_RECORD"):
            continue
        before = least.get(key)
        epoch = d.get("leaderEpoch")
        if isinstance(epoch, int):  # PartitionRecord (and any record that states it)
            if before is not None and epoch < before[0]:
                shown = before[1][-3:]
                out.append(
                    _finding(
                        "leader-epoch-regression",
                        [*shown, r],
                        f"partition {key[1]} of topic {key[0]} has leader epoch {epoch} at offset "
                        f"{r.offset}, but earlier records put it at {before[0]} or more",
                        topic_id=key[0],
                        partition=key[1],
                    )
                )
            least[key] = (max(epoch, before[0] if before else epoch), [r])
        elif before is not None and d.get("leader", NO_LEADER_CHANGE) != NO_LEADER_CHANGE:
            least[key] = (before[0] + 1, [*before[1], r])
    return out


def feature_levels(logs: dict[str, MetadataLog], last_committed: int) -> list[Finding]:
    """At each committed FEATURE_LEVEL_RECORD offset, every controller finalizes the same level."""
    out = []
    by_offset: dict[int, dict[str, Record]] = {}
    for log in logs.values():
        for offset, r in log.records.items():
            if offset <= last_committed and not r.control and r.type == "FEATURE_LEVEL_RECORD":
                by_offset.setdefault(offset, {})[log.node] = r
    for offset, held in sorted(by_offset.items()):
        levels = {(r.data.get("name"), r.data.get("featureLevel")) for r in held.values()}
        # As for divergence: only controllers whose logs agree again later are held to it.
        rejoined = any(
            rejoin(logs[a], logs[b], offset) is not None
            for a, b in combinations(sorted(held), 2)
            if held[a].data.get("featureLevel") != held[b].data.get("featureLevel")
        )
        if len(levels) > 1 and rejoined:
            out.append(
                _finding(
                    "feature-level-divergence",
                    list(held.values()),
                    f"at metadata offset {offset} (the feature epoch) controllers finalize "
                    + ", ".join(
                        f"{n}: {r.data.get('name')}={r.data.get('featureLevel')}"
                        for n, r in sorted(held.items())
                    ),
                    offset=offset,
                )
            )
    return out
