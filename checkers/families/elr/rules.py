"""KIP-966's rules over the committed partition records (replay.py), each one function and one
kind, each quoting the sentence it enforces.

An *election* is a committed PARTITION_CHANGE_RECORD whose leader is a broker other than the
partition's leader before it (replay.Change.elected): the same leader again is an epoch bump, and
-1 leaves the partition without one. Records that change the replica set, or meet a partition
mid-reassignment, are not judged as elections (a reassignment may elect from an ISR the same
record expands). Where the new leader came from, by the partition just before the record:

- the ISR;
- else the ELR;
- else the last known leader: the last known ELR holding one broker, the new leader, which
  Kafka keeps there once the ISR and ELR are empty (PartitionChangeBuilder,
  useLastKnownLeaderInBalancedRecovery);
- else none of them: an unclean election.

Which brokers the controller could elect (ReplicationControlManager's isAcceptableLeader):
registered, not fenced, not in controlled shutdown, as the records before this one leave them,
and not fenced, unregistered, registered anew or shut down by another record of the same batch
(the controller decides those and the partition changes in one operation; a fence's partition
changes come before its fence record, an unfence's after its unfence record). A broker none of
whose registrations the log holds is not judged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from checkers.core.findings import Finding
from checkers.families.elr.replay import BrokerState, Change, Replayed, batch_brokers

# Kafka's docs, Eligible Leader Replicas (4.0 and 4.1, docs/ops: "Eligible Leader Replicas");
# KIP-966 (cwiki, as found through the search tool).
DOCS_ORDER = (
    "Kafka's docs (Eligible Leader Replicas): \"During the leader election, the controller will "
    "select the leaders with the following order: If ISR is not empty, select one of them. If ELR "
    'is not empty, select one that is not fenced. Select the last known leader if it is unfenced."'
)
RULES = {
    "elr-isr-overlap": (
        "Kafka's docs (Eligible Leader Replicas): \"it makes some replicas that are not in the "
        "ISR safe to become the leader. The KRaft controller stores such replicas in the "
        'PartitionRecord field called Eligible Leader Replicas": the ELR holds replicas that are '
        "not in the ISR, so no broker is in both at once (the controller's PartitionChangeBuilder "
        'builds the ELR to "Exclude the duplicate replicas between elr and target ISR")'
    ),
    "ineligible-leader-elected": (
        DOCS_ORDER + '; KIP-631: "When a broker is fenced, it cannot process any client '
        'requests": a fenced or unregistered broker is never elected'
    ),
    "leader-election-order": DOCS_ORDER,
    "unclean-leader-election": (
        "Kafka's topic config unclean.leader.election.enable: \"Indicates whether to enable "
        "replicas not in the ISR set to be elected as leader as a last resort, even though doing "
        'so may result in data loss"; KIP-966: "We assume fsync users adopt the '
        'unclean.leader.election.enable as false": with it off, a leader comes from the ISR, '
        "the ELR or the last known leader only"
    ),
}
ISR, ELR, LAST_KNOWN, UNCLEAN = "the ISR", "the ELR", "the last known leader", "none of them"


def _finding(kind: str, change: Change, text: str, topic: str, **data: Any) -> Finding:
    cite = change.record.cite()
    return Finding(
        kind,
        None,
        (),
        f"{text}. Record: {cite}. Rule: {RULES[kind]}",
        {
            "rule": RULES[kind],
            "records": [cite],
            "topic": topic,
            "partition": change.after.partition,
            **data,
        },
    )


def _name(replayed: Replayed, change: Change) -> str:
    return replayed.topics.get(change.after.topic_id, change.after.topic_id)


def _where(replayed: Replayed, change: Change) -> str:
    return f"partition {_name(replayed, change)}-{change.after.partition}"


def overlaps(replayed: Replayed) -> list[Finding]:
    """A committed record after which a broker is in both the ISR and the ELR; one finding per
    partition (its first such record), with the count of the others."""
    out: list[Finding] = []
    seen: dict[tuple[str, int], Finding] = {}
    for c in replayed.changes:
        both = sorted(set(c.after.isr) & set(c.after.elr))
        if not both:
            continue
        key = (c.after.topic_id, c.after.partition)
        if key in seen:
            seen[key].data["more"] += 1
            continue
        f = _finding(
            "elr-isr-overlap",
            c,
            f"after committed offset {c.record.offset} ({c.record.type}) {_where(replayed, c)} "
            f"has broker(s) {both} in both its ISR and its ELR: {c.after.describe()}",
            _name(replayed, c),
            brokers=both,
            more=0,
        )
        seen[key] = f
        out.append(f)
    return out


def source(c: Change, leader: int) -> str:
    """Where an elected leader came from (module docstring)."""
    before = c.before
    assert before is not None
    if leader in before.isr:
        return ISR
    if leader in before.elr:
        return ELR
    if before.last_known_elr == (leader,):
        return LAST_KNOWN
    return UNCLEAN


def _standing(broker: BrokerState | None) -> str | None:
    """Why a known broker cannot lead as the committed records leave it; None: it can."""
    if broker is None:
        return None
    if not broker.registered:
        return "unregistered"
    if broker.fenced:
        return "fenced"
    if broker.shutting_down:
        return "in controlled shutdown"
    return None


def elections(
    replayed: Replayed,
    unclean_enabled: Callable[[str], bool],
    from_start: bool,
) -> list[Finding]:
    """`ineligible-leader-elected`, `leader-election-order` and `unclean-leader-election` over
    every election; `unclean_enabled(topic name)`: whether the topic allows unclean elections;
    `from_start`: the committed log begins at offset 0, so a broker it never registered was
    never registered."""
    out: list[Finding] = []
    for c in replayed.changes:
        leader = c.elected
        if leader is None or c.reassigning:
            continue
        assert c.before is not None
        came = source(c, leader)
        topic = _name(replayed, c)
        where = f"{_where(replayed, c)} at committed offset {c.record.offset}"
        was = f"before it: {c.before.describe()}"
        broker = c.brokers.get(leader)
        why = "fenced" if broker is not None and broker.fenced else None
        if broker is not None and not broker.registered:
            why = "unregistered"
        if broker is None and from_start and c.brokers:
            why = "never registered in the committed log"
        if why is not None:
            out.append(
                _finding(
                    "ineligible-leader-elected",
                    c,
                    f"{where} elected broker {leader}, {why} as the committed records before "
                    f"it leave it ({was})",
                    topic,
                    leader=leader,
                    standing=why,
                )
            )
        skipped = _skipped(replayed, c, came)
        if skipped:
            out.append(
                _finding(
                    "leader-election-order",
                    c,
                    f"{where} elected broker {leader} from {came} while {skipped} ({was})",
                    topic,
                    leader=leader,
                    source=came,
                )
            )
        if came == UNCLEAN and not unclean_enabled(topic):
            out.append(
                _finding(
                    "unclean-leader-election",
                    c,
                    f"{where} elected broker {leader}, in none of the ISR, the ELR and the last "
                    f"known leader ({was}), and unclean.leader.election.enable is not on for "
                    f"{topic}",
                    topic,
                    leader=leader,
                )
            )
    return out


def _skipped(replayed: Replayed, c: Change, came: str) -> str | None:
    """The earlier source that had a broker the controller could elect, in words; None."""
    assert c.before is not None
    removed = batch_brokers(replayed, c.record)

    def eligible(b: int) -> bool:
        return b in c.brokers and _standing(c.brokers[b]) is None and b not in removed

    order = [ISR, ELR, LAST_KNOWN, UNCLEAN]
    pools = {
        ISR: c.before.isr,
        ELR: c.before.elr,
        LAST_KNOWN: c.before.last_known_elr if len(c.before.last_known_elr) == 1 else (),
    }
    for earlier in order[: order.index(came)]:
        ready = [b for b in pools[earlier] if eligible(b)]
        if ready:
            return (
                f"{earlier} held broker(s) {ready}, registered, unfenced and not shutting down, "
                "and no other record of the same batch fenced, unregistered or re-registered them"
            )
    return None
