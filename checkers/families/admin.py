"""The admin workload's history: topics whose fate the brokers' final views contradict.

The argument is KRaft's single metadata timeline (KIP-500: "the log ensures that the consumers
always move along a single timeline"): a broker's metadata image is a prefix of the committed
log. A topic whose create was acknowledged before topic U's create was invoked sits at a lower
offset than U, so a view that lists U must list it too, unless it may have been deleted. The
same holds for an acknowledged delete. A view without such a later topic proves nothing (the
broker may lag), so nothing is reported for it: lagging is not losing.

Topic names are unique in a run (workloads/admin.py), so a name identifies one create.
ZooKeeper-mode brokers learn metadata from UpdateMetadata requests, not a log, so the prefix
rules are applied to KRaft clusters only; the other rules hold in both modes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from checkers.core.findings import Finding, secs
from checkers.families.observer_samples import MetadataInput

RULES = {
    "lost-topic": (
        'KIP-500: the metadata log "ensures that the consumers always move along a single '
        'timeline"; KIP-631: once a change is committed "we are guaranteed not to lose the change"'
    ),
    "lost-topic-deletion": (
        'KIP-500: the metadata log "ensures that the consumers always move along a single '
        'timeline"; a committed TopicRecord removal cannot be undone by replay'
    ),
    "failed-create-visible": (
        "a CreateTopics error other than a timeout or TOPIC_ALREADY_EXISTS means the controller "
        "refused the request: nothing was written (KIP-631: changes take effect only through "
        "the metadata log)"
    ),
    "phantom-topic": "a topic exists only if some CreateTopics request created it",
    "cluster-id-divergence": (
        'KIP-631: "The cluster ID is ... stored in meta.properties" and never changes: every '
        "broker of one cluster reports the same one"
    ),
}
# Histories written before the admin client made this error `info` recorded it as `fail`.
RETRIED_CREATE = (
    "librdkafka resends a CreateTopics whose answer did not arrive; INVALID_REPLICATION_FACTOR "
    "depends on how many brokers are registered at the time, so it can answer a retry whose "
    "first attempt created the topic"
)
NAME = re.compile(r"^(?P<prefix>[A-Za-z0-9._]+)-\d+-\d+$")


@dataclass(frozen=True)
class AdminOp:
    f: str
    type: str  # ok, fail, info; "info" also for an invocation that never completed
    index: int  # the completion (or the invocation when there is none)
    process: str
    node: str | None
    invoke_time: int
    time: int | None  # completion time; None when it never completed
    value: Any
    error: str | None

    def cite(self) -> str:
        where = f" on {self.node}" if self.node else ""
        return (
            f"op {self.index} ({self.f} {self.type}{where}, process {self.process}, "
            f"{secs(self.invoke_time)}-{secs(self.time)})"
        )


ADMIN_FS = ("create-topic", "delete-topic", "alter-config", "describe-cluster", "list-topics")


def admin_ops(rows: list[dict[str, Any]]) -> list[AdminOp]:
    """Admin operations, one per invocation, from op rows (columnar, with value_json)."""
    invokes = {r["index"]: r for r in rows if r["type"] == "invoke" and r["f"] in ADMIN_FS}
    done: set[int] = set()
    out = []
    for r in rows:
        if r["type"] == "invoke" or r["f"] not in ADMIN_FS:
            continue
        inv = invokes.get(r.get("invoke_index"))
        if inv is None:
            continue
        done.add(inv["index"])
        out.append(_op(inv, r))
    out += [_op(inv, None) for i, inv in invokes.items() if i not in done]
    return sorted(out, key=lambda o: o.index)


def _value(row: dict[str, Any] | None) -> Any:
    text = (row or {}).get("value_json")
    return json.loads(text) if text else None


def _op(inv: dict[str, Any], done: dict[str, Any] | None) -> AdminOp:
    value = _value(done) if done is not None and done["type"] == "ok" else None
    return AdminOp(
        f=inv["f"],
        type=done["type"] if done is not None else "info",
        index=done["index"] if done is not None else inv["index"],
        process=str(inv["process"]),
        node=(done or inv).get("node"),
        invoke_time=inv["time"],
        time=done["time"] if done is not None else None,
        value=value if value is not None else _value(inv),
        error=(done or {}).get("error"),
    )


def _broker(view: AdminOp) -> str | None:
    """The broker whose metadata answered (librdkafka may ask another than the one named)."""
    return view.value.get("answered_by") or view.node


def _topic(op: AdminOp) -> str | None:
    return op.value.get("topic") if isinstance(op.value, dict) else None


def check_admin(ops: list[AdminOp], kraft: bool | None) -> tuple[list[Finding], list[str]]:
    """Findings and notes. `kraft`: the cluster's mode (None: unknown, prefix rules skipped)."""
    notes: list[str] = []
    if not ops:
        return [], notes
    creates = {t: op for op in ops if op.f == "create-topic" and (t := _topic(op))}
    deletes: dict[str, list[AdminOp]] = {}
    for op in ops:
        if op.f == "delete-topic" and (t := _topic(op)):
            deletes.setdefault(t, []).append(op)
    views = [op for op in ops if op.f == "list-topics" and op.type == "ok"]
    findings = _failed_creates(creates, ops, views)
    findings += _phantoms(creates, views)
    findings += _cluster_ids(ops)
    if kraft:
        findings += _prefix_rules(creates, deletes, views)
    elif views:
        notes.append(
            "admin: lost topics and lost deletions judged on KRaft clusters only (ZooKeeper-mode "
            "brokers' metadata caches are not prefixes of one log)"
            if kraft is False
            else "admin: cluster mode unknown (no cluster.json, no raft samples): lost topics "
            "and lost deletions not judged"
        )
    if not views:
        notes.append("admin: no broker answered list-topics at the end: topic fates not judged")
    else:
        notes.append(
            f"admin: {len(views)} final topic lists judged against {len(creates)} creates and "
            f"{sum(map(len, deletes.values()))} deletes"
        )
    return sorted(findings, key=Finding.sort_key), notes


def _finding(kind: str, ops: list[AdminOp], text: str, **data: Any) -> Finding:
    cited = "; ".join(op.cite() for op in ops)
    return Finding(
        kind,
        None,
        tuple(op.index for op in ops),
        f"{text}. Ops: {cited}. Rule: {RULES[kind]}",
        {"rule": RULES[kind], **data},
    )


def _later_created(creates: dict[str, AdminOp], after: int, view: set[str]) -> AdminOp | None:
    """The earliest-invoked topic in the view whose create began after `after` and took effect."""
    later = [
        c for t, c in creates.items() if t in view and c.invoke_time > after and c.type != "fail"
    ]
    return min(later, key=lambda c: c.invoke_time, default=None)


def _prefix_rules(
    creates: dict[str, AdminOp], deletes: dict[str, list[AdminOp]], views: list[AdminOp]
) -> list[Finding]:
    out = []
    for topic, create in sorted(creates.items()):
        if create.type != "ok" or create.time is None:
            continue
        topic_deletes = deletes.get(topic, [])
        deleted_ok = [d for d in topic_deletes if d.type == "ok" and d.time is not None]
        maybe_deleted = [d for d in topic_deletes if d.type != "fail"]
        for view in views:
            listed = set(view.value.get("topics") or [])
            if topic not in listed and not maybe_deleted:
                later = _later_created(creates, create.time, listed)
                if later is not None:
                    out.append(
                        _finding(
                            "lost-topic",
                            [create, later, view],
                            f"{_broker(view)} lists {_topic(later)}, created after {topic}'s "
                            f"create was acknowledged, but not {topic}, which nobody asked to "
                            "delete",
                            topic=topic,
                            broker=_broker(view),
                        )
                    )
            if topic in listed and deleted_ok:
                gone = min(deleted_ok, key=lambda d: d.time or 0)
                assert gone.time is not None
                later = _later_created(creates, gone.time, listed)
                if later is not None:
                    out.append(
                        _finding(
                            "lost-topic-deletion",
                            [gone, later, view],
                            f"{_broker(view)} lists {_topic(later)}, created after {topic}'s "
                            f"delete was acknowledged, and still lists {topic}",
                            topic=topic,
                            broker=_broker(view),
                        )
                    )
    return out


def _failed_creates(
    creates: dict[str, AdminOp], ops: list[AdminOp], views: list[AdminOp]
) -> list[Finding]:
    out = []
    for topic, create in sorted(creates.items()):
        if create.type != "fail":
            continue
        seen = [v for v in views if topic in set(v.value.get("topics") or [])]
        used = [
            op
            for op in ops
            if op.type == "ok" and op.f in ("delete-topic", "alter-config") and _topic(op) == topic
        ]
        if seen or used:
            proof = (seen + used)[0]
            who = _broker(proof) if proof in seen else proof.node
            how = "lists it" if proof in seen else f"then answered {proof.f} ok on it"
            found = _finding(
                "failed-create-visible",
                [create, proof],
                f"creating {topic} failed with {create.error!r}, yet {who} {how}",
                topic=topic,
            )
            if "INVALID_REPLICATION_FACTOR" in (create.error or ""):
                found = replace(found, tolerated=RETRIED_CREATE)
            out.append(found)
    return out


def _phantoms(creates: dict[str, AdminOp], views: list[AdminOp]) -> list[Finding]:
    prefixes = {m["prefix"] for t in creates if (m := NAME.match(t))}
    out = []
    for view in views:
        for topic in sorted(view.value.get("topics") or []):
            m = NAME.match(topic)
            if m and m["prefix"] in prefixes and topic not in creates:
                out.append(
                    _finding(
                        "phantom-topic",
                        [view],
                        f"{_broker(view)} lists {topic}, a name of this run that no create-topic "
                        "operation ever asked for",
                        topic=topic,
                    )
                )
    return out


def _cluster_ids(ops: list[AdminOp]) -> list[Finding]:
    answers: dict[str, AdminOp] = {}
    for op in ops:
        if op.f == "describe-cluster" and op.type == "ok" and isinstance(op.value, dict):
            answers.setdefault(str(op.value.get("cluster_id")), op)
    if len(answers) < 2:
        return []
    firsts = sorted(answers.values(), key=lambda o: o.index)
    ids = ", ".join(f"{o.node}: {o.value.get('cluster_id')}" for o in firsts)
    return [
        _finding("cluster-id-divergence", firsts, f"brokers report different cluster ids ({ids})")
    ]


def kraft_mode(cluster: dict[str, Any], observed: MetadataInput) -> bool | None:
    """The cluster's mode: `cluster` (cluster.json)'s topology, else whether any node reported
    Raft state."""
    topology = cluster.get("topology")
    if topology == "migration":
        return None  # ZooKeeper mode, then KRaft: neither mode's prefix rules hold all run long
    if isinstance(topology, str):
        return topology != "zk"
    if any(s.raft("state") for s in observed.samples):
        return True
    return None
