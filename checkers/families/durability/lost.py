"""Lost acknowledged writes, each judged against what Kafka promises when machines lose power.

Which replicas held an acknowledged write. The queue's producers send with acks=all, which a
leader answers only once every member of the ISR has the record and the ISR has at least
min.insync.replicas members (else NOT_ENOUGH_REPLICAS_AFTER_APPEND): so at least min ISR
replicas held it then, in their page cache; under Kafka's default flush policy none need have
fsynced it. With flush.messages=1 each of them fsynced it before it answered for it (the leader
at its append, a follower at its append, before the fetch that tells the leader it has it).

Which power losses could have taken it. A power loss drops, on each node it hits, what no fsync
made durable. It can take a write it dropped after the write was appended, so a power loss
counts for a write when its drop (between its op's invocation and completion) ends after the
send's invocation (the ack may reach the client after the drop: the leader answered first)
and begins before the loss was seen: the completion of the first poll that proves the record
gone (seen.py), else of the poll that read past the write (the queue's `lost-write`), else the
end of the run (a write in no final log).

The rules, in order (the quotes are in RULES and docs/checkers.md):
1. unclean leader elections allowed (the header, or a committed ConfigRecord): documented;
2. another fault that may destroy what a disk holds in the window (a start of an effect no
   checker knows: a corruption, a full disk): not judged here (the queue's finding stands, and
   the corruption rules judge);
3. flush.messages=1: a failure (`lost-write-despite-fsync`): nothing of it was unsynced;
4. at least min ISR of the partition's replicas lost power: documented
   (`lost-write-power-loss-documented`, tolerated);
5. fewer: with ELR on, a failure (`lost-write-too-few-power-losses`: KIP-966's MinISR-1
   tolerance); with ELR off or unknown, documented when KIP-966's "last replica standing" can
   explain it (the committed ISR, around some power loss of one of its replicas, held only
   replicas that lost power; or the history holds no ISR), else the same failure: an ISR member
   that never lost power held it throughout.

The replicas are the committed assignment (the metadata log); without one, any `replication`
of the cluster's brokers, so that at most min(power-lost brokers, replication) of them count.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from checkers.core.findings import Finding, secs
from checkers.families.durability.partitions import Partitions
from checkers.families.durability.power import DiskFault
from checkers.families.durability.settings import Settings

DOCUMENTED = "lost-write-power-loss-documented"
DESPITE_FSYNC = "lost-write-despite-fsync"
TOO_FEW = "lost-write-too-few-power-losses"
KINDS = (DOCUMENTED, DESPITE_FSYNC, TOO_FEW)

# Kafka's own words (docs/design.html, "Replication"; TopicConfig; KIP-966's motivation).
GUARANTEE = (
    "Kafka's design: \"The guarantee that Kafka offers is that a committed message will not be "
    'lost, as long as there is at least one in sync replica alive, at all times"'
)
ALL_DIE = (
    "Kafka's design: \"Note that Kafka's guarantee with respect to data loss is predicated on "
    "at least one replica remaining in sync. If all the nodes replicating a partition die, this "
    'guarantee no longer holds"'
)
NO_FSYNC = (
    "Kafka's design: \"we do not want to require the use of fsync on every write for our "
    'consistency guarantees"; flush.messages: "In general we recommend you not set this and use '
    "replication for durability and allow the operating system's background flush "
    'capabilities as it is more efficient"'
)
FLUSH_EACH = (
    'flush.messages: "This setting allows specifying an interval at which we will force an '
    "fsync of data written to the log. For example if this was set to 1 we would fsync after "
    'every message"'
)
MIN_ISR = (
    'min.insync.replicas: "When a producer sets acks to \\"all\\" (or \\"-1\\"), this '
    "configuration specifies the minimum number of replicas that must acknowledge a write for "
    'the write to be considered successful"'
)
ELR_TOLERANCE = (
    'KIP-966: "This proposal solves this \\"last replica standing\\" data loss issue in KRaft '
    'clusters, providing MinISR-1 tolerance to data loss unclean shutdown events"'
)
LAST_STANDING = (
    'KIP-966: "When the last replica in the ISR experiences an unclean shutdown and loses '
    "committed data, it will be reelected leader after starting up again, causing rejoining "
    "followers to truncate their logs and thereby removing the last copies of the committed "
    'records which the leader lost initially"'
)
UNCLEAN = (
    'unclean.leader.election.enable: "Indicates whether to enable replicas not in the ISR set '
    'to be elected as leader as a last resort, even though doing so may result in data loss"'
)
RULES = {
    DOCUMENTED: (
        "an acknowledged write lost after at least min.insync.replicas of its partition's "
        "replicas lost power under Kafka's default flush policy (or after one, without ELR, "
        "when the ISR had shrunk to the replicas that lost power) is Kafka's documented "
        f"behaviour: {ALL_DIE}; {NO_FSYNC}; {ELR_TOLERANCE}; {LAST_STANDING}"
    ),
    DESPITE_FSYNC: (
        "with flush.messages=1 every ISR member fsynced an acknowledged write before the leader "
        f"answered for it, and a power loss drops only what no fsync made durable: {FLUSH_EACH}"
        f"; {MIN_ISR}"
    ),
    TOO_FEW: (
        "an acknowledged write survives fewer than min.insync.replicas power losses of its "
        f"partition's replicas with ELR on, and any with an ISR member that never lost power: "
        f"{ELR_TOLERANCE}; {GUARANTEE}"
    ),
}
TOLERATED = (
    "Kafka's documented behaviour: without fsync, an acknowledged write lives in the page "
    "caches of the replicas that held it, and every one of them lost power (or, without ELR, "
    "the last replica standing did)"
)
# The controllers' wall clock against the harness's (the lease and ELR rules' tolerance).
TOLERANCE_MS = 2000
SHOWN = 8  # values quoted in a finding's text (all are in its data)
SAW = {"lost-write": "polls read past it", "unseen": "never polled", "data": "polled, then gone"}


@dataclass
class Writes:
    """Lost writes as columns: one row per value."""

    key: np.ndarray
    value: np.ndarray
    offset: np.ndarray  # -1: unknown
    op: np.ndarray  # the send op (its completion; its invocation when it never completed)
    acked: np.ndarray  # bool: ok (else info that certainly happened)
    invoked: np.ndarray  # run ns
    completed: np.ndarray  # run ns, -1: never (info)
    until: np.ndarray  # float run ns: seen lost by then (inf: the end of the run)
    saw: np.ndarray  # codes into SOURCES
    # The queue finding each row stands for (index into `findings`), -1: none.
    finding: np.ndarray

    def __len__(self) -> int:
        return len(self.key)


SOURCES = ("lost-write", "unseen", "data")


@dataclass(frozen=True)
class Judgement:
    kind: str | None  # None: not judged here
    why: str
    faults: tuple[DiskFault, ...]  # the power losses in the write's window
    lost_power: tuple[str, ...]  # the replicas among their nodes (or every node they hit)
    replicas: tuple[str, ...] | None


@dataclass
class Judged:
    findings: list[Finding] = field(default_factory=list)
    judged: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # rows given a kind
    replaced: set[int] = field(default_factory=set)  # the queue findings judged rows were
    unjudged: Counter[str] = field(default_factory=Counter)  # why rows were left alone
    counts: Counter[str] = field(default_factory=Counter)  # rows per kind
    # Per key, the values judged documented, and its first documented finding (an index).
    documented: dict[int, set[int]] = field(default_factory=dict)
    documented_at: dict[int, int] = field(default_factory=dict)


class Judge:
    """The rules above over one run's settings, disk faults, partitions and brokers."""

    def __init__(
        self,
        settings: Settings,
        faults: list[DiskFault],
        partitions: Partitions | None,
        brokers: list[str],
    ) -> None:
        self.settings = settings
        self.faults = sorted(faults, key=lambda f: f.start)
        self.partitions = partitions
        self.brokers = brokers

    def window(self, invoked: float, until: float) -> list[DiskFault]:
        return [f for f in self.faults if f.overlaps(invoked, until)]

    def judge(self, key: int, faults: list[DiskFault]) -> Judgement:
        s, parts = self.settings, self.partitions
        powers = tuple(f for f in faults if f.power)
        replicas = parts.replicas(key) if parts is not None else None
        lost, count = self._lost_power(powers, replicas)
        m = s.min_isr
        out = (powers, lost, replicas)
        if not powers:
            if any(f.power for f in self.faults):
                # In a run with power losses, one no power loss can explain: the family's to say.
                return Judgement(
                    TOO_FEW, "no power loss came after it was sent and before it was missed", *out
                )
            return Judgement(None, "no power loss in the run", *out)
        if s.unclean_leader_election or (parts is not None and parts.unclean):
            return Judgement(DOCUMENTED, f"unclean leader elections were allowed: {UNCLEAN}", *out)
        others = [f for f in faults if not f.power and (replicas is None or f.hit(replicas))]
        if others:
            return Judgement(
                None,
                "a fault of an effect no checker knows (a corruption, a full disk?) in its "
                f"window ({others[0].cite()})",
                *out,
            )
        if s.fsync_each:
            return Judgement(
                DESPITE_FSYNC,
                "flush.messages=1: every ISR member had fsynced it before it was acknowledged, "
                "and a power loss drops only what no fsync made durable",
                *out,
            )
        of = self._of(replicas)
        if count >= m:
            return Judgement(
                DOCUMENTED,
                f"{count} of {of} lost power (min.insync.replicas {m}), with no fsync required "
                "before the acknowledgement (Kafka's default flush policy)",
                *out,
            )
        elr = self.elr_at(powers)
        if count == 0:
            return Judgement(TOO_FEW, f"none of {of} lost power", *out)
        if elr:
            return Judgement(
                TOO_FEW,
                f"only {count} of {of} lost power, fewer than min.insync.replicas {m}, with ELR "
                "on (eligible.leader.replicas.version >= 1)",
                *out,
            )
        off = "ELR off" if elr is False else "ELR not known to be on"
        if parts is None or key not in parts.states:
            return Judgement(
                DOCUMENTED,
                f"{count} of {of} lost power, with {off}, and the history holds no committed "
                "ISR: the last replica standing cannot be ruled out",
                *out,
            )
        standing = self._last_standing(key, powers, set(lost))
        if standing is not None:
            return Judgement(
                DOCUMENTED,
                f"{count} of {of} lost power, with {off}, while the committed ISR was "
                f"{sorted(standing.isr)} ({standing.record}): the last replica standing",
                *out,
            )
        return Judgement(
            TOO_FEW,
            f"only {count} of {of} lost power, with {off}, and around each of those power losses "
            "the committed ISR held a replica that never lost power",
            *out,
        )

    def _of(self, replicas: tuple[str, ...] | None) -> str:
        if replicas is not None:
            return f"its {len(replicas)} replicas ({', '.join(replicas)})"
        return f"its {self.settings.replication} replicas (which brokers, the history does not say)"

    def _lost_power(
        self, powers: tuple[DiskFault, ...], replicas: tuple[str, ...] | None
    ) -> tuple[tuple[str, ...], int]:
        """The replicas (or, not knowing them, the brokers) that lost power, and how many of
        the partition's replicas that can be at most."""
        universe = replicas or tuple(self.brokers)
        rf = self.settings.replication
        if not universe:  # no cluster.json: the nodes the faults name; any, for one not known
            named = sorted({n for f in powers for n in (f.nodes or ())})
            whole = any(f.nodes is None for f in powers)
            return tuple(named), rf if whole else min(len(named), rf)
        hit = sorted({n for f in powers for n in f.hit(universe)})
        count = len(hit) if replicas else min(len(hit), rf)
        return tuple(hit), count

    def elr_at(self, powers: tuple[DiskFault, ...]) -> bool | None:
        """ELR on at every power loss: the header's word, else the committed feature level."""
        if self.settings.elr is not None:
            return self.settings.elr
        if self.partitions is None:
            return None
        seen = [
            self.partitions.elr_at(f.wall * 1000) if f.wall is not None else None for f in powers
        ]
        if any(x is False for x in seen):
            return False
        return True if seen and all(x is True for x in seen) else None

    def _last_standing(self, key: int, powers: tuple[DiskFault, ...], lost: set[str]) -> Any:
        """A committed state of the partition, around a power loss of one of its replicas, whose
        ISR held only replicas that lost power: KIP-966's last replica standing."""
        assert self.partitions is not None
        for f in powers:
            if f.wall is None:
                return _UNKNOWN_STATE  # its time against the controllers' is not known
            end = f.end_wall if f.end_wall is not None else math.inf
            for st in self.partitions.during(
                key, f.wall * 1000 - TOLERANCE_MS, end * 1000 + TOLERANCE_MS
            ):
                if st.isr <= lost:
                    return st
        return None


@dataclass(frozen=True)
class _State:
    isr: frozenset[str] = frozenset()
    record: str = "no wall clock on the power loss: its ISR not known"


_UNKNOWN_STATE = _State()


def judge_writes(judge: Judge, writes: Writes, topic: str) -> Judged:
    """Every row judged once per (key, window) and worded once per (key, judgement): one finding
    per key and judgement, naming every value in its data."""
    out = Judged(judged=np.zeros(len(writes), bool))
    if not len(writes):
        return out
    ends = np.array(sorted(x.end for x in judge.faults), dtype=float)
    starts = np.array(sorted(x.start for x in judge.faults), dtype=float)
    # A window (invoked, until) meets the faults whose end is after `invoked` and whose start is
    # before `until`: which those are depends only on the two ranks.
    a = np.searchsorted(ends, writes.invoked.astype(float), side="right")
    b = np.searchsorted(starts, writes.until, side="left")
    sig = np.stack([writes.key, a, b], axis=1)
    uniq, first, which = np.unique(sig, axis=0, return_index=True, return_inverse=True)
    which = which.reshape(-1)
    by = np.argsort(which, kind="stable")
    cuts = np.searchsorted(which[by], np.arange(1, len(uniq)))
    groups: dict[tuple[int, str, str, tuple[int, ...]], tuple[Judgement, list[np.ndarray]]] = {}
    for u, rows in enumerate(np.split(by, cuts)):
        key, r = int(uniq[u][0]), int(first[u])
        j = judge.judge(key, judge.window(float(writes.invoked[r]), float(writes.until[r])))
        if j.kind is None:
            out.unjudged[j.why] += len(rows)
            continue
        out.judged[rows] = True
        out.counts[j.kind] += len(rows)
        gk = (key, j.kind, j.why, tuple(x.op for x in j.faults))
        groups.setdefault(gk, (j, []))[1].append(rows)
    for (key, *_), (j, parts) in sorted(groups.items(), key=lambda kv: kv[0][:2]):
        rows = np.sort(np.concatenate(parts))
        if j.kind == DOCUMENTED:
            out.documented.setdefault(key, set()).update(writes.value[rows].tolist())
            out.documented_at.setdefault(key, len(out.findings))
        out.findings.append(_finding(key, j, writes, rows.tolist(), topic))
        out.replaced.update(int(x) for x in writes.finding[rows].tolist() if x >= 0)
    return out


# Queue and data-log findings that a documented loss explains when they quote its values: Kafka
# gave the lost records' offsets to later writes, and consumers and producers met the log
# shorter (a data log then holds another value at the lost write's acknowledged offset).
CONSEQUENCES = (
    "acked-offset-holds-other-write",
    "inconsistent-offsets",
    "nonmonotonic-send",
    "producer-nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
)


def follows_from(f: Finding, lost: set[int]) -> bool:
    """Whether queue or data-log finding `f` is what a documented loss of the values `lost` (its
    key's) does to the log: the offset of a lost record holding a later one (all its values but
    one lost), or a producer's or consumer's order meeting a lost record's reused offset."""
    values = f.data.get("values", [f.data.get("value")])
    if f.kind not in CONSEQUENCES or not isinstance(values, list):
        return False
    if f.kind == "inconsistent-offsets":
        return len(set(values) - lost) <= 1
    return any(v in lost for v in values)


def with_consequences(f: Finding, explained: list[Finding]) -> Finding:
    """A documented finding that also stands for the queue findings its loss explains."""
    kinds = Counter(x.kind for x in explained)
    said = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    quoted = "; ".join(f"op(s) {', '.join(map(str, x.ops[:4]))} ({x.kind})" for x in explained[:4])
    return replace(
        f,
        explanation=f.explanation
        + f". The loss also explains {said} finding(s) of the queue and data-log checks on this "
        "key "
        f"({quoted}): Kafka gave the lost records' offsets to later writes",
        data={**f.data, "consequences": [{"kind": x.kind, "ops": list(x.ops)} for x in explained]},
    )


def _finding(key: int, j: Judgement, w: Writes, rows: list[int], topic: str) -> Finding:
    assert j.kind is not None
    order = sorted(rows, key=lambda r: (int(w.op[r]), int(w.value[r])))
    shown = "; ".join(_send(w, r) for r in order[:SHOWN])
    more = f" and {len(order) - SHOWN} more" if len(order) > SHOWN else ""
    saw = Counter(SOURCES[int(w.saw[r])] for r in order)
    how = ", ".join(f"{n} {SAW[s]}" for s, n in sorted(saw.items()))
    evidence = [
        e for f in j.faults for n in j.lost_power if (e := f.partition_evidence(n, topic, key))
    ]
    said = (
        f"{len(order)} acknowledged write(s) to key {key} ({topic}-{key}) were lost ({how}): "
        f"{shown}{more}. After they were sent, "
        + ", ".join(f.cite() for f in j.faults)
        + (f" took power from {', '.join(j.lost_power)}" if j.lost_power else " hit no replica")
        + (f" ({'; '.join(evidence)})" if evidence else "")
        + f": {j.why}. "
        + {DOCUMENTED: TOLERATED, DESPITE_FSYNC: FLUSH_EACH, TOO_FEW: GUARANTEE}[j.kind]
    )
    ops = sorted({int(w.op[r]) for r in order[:SHOWN]} | {f.op for f in j.faults})
    return Finding(
        j.kind,
        key,
        tuple(ops),
        said,
        {
            "count": len(order),
            "values": [int(w.value[r]) for r in order],
            "sends": [int(w.op[r]) for r in order],
            "offsets": [int(w.offset[r]) if w.offset[r] >= 0 else None for r in order],
            "seen": dict(saw),
            "faults": [f.op for f in j.faults],
            "lost_power": list(j.lost_power),
            "replicas": list(j.replicas) if j.replicas is not None else None,
            "why": j.why,
        },
        tolerated=TOLERATED if j.kind == DOCUMENTED else None,
    )


def _send(w: Writes, r: int) -> str:
    at = f"offset {int(w.offset[r])}" if w.offset[r] >= 0 else "an unknown offset"
    if w.acked[r]:
        when = (
            f"acknowledged at {at} at {secs(int(w.completed[r]))}"
            if w.completed[r] >= 0
            else (f"acknowledged at {at}")
        )
    else:
        when = f"timed out (info) at {at}, but another of its sends was polled"
    return f"value {int(w.value[r])} (op {int(w.op[r])}, sent at {secs(int(w.invoked[r]))}, {when})"
