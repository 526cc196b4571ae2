"""Controller membership changes (KIP-853) against what the cluster did after them.

Reads the history's process ``upgrade`` (steps/quorum_steps.py, docs/history.md): each
``remove-controller`` and ``add-controller`` completion names the replica it changed (node id
and directory id) and what the step observed (the voter set, leader and epoch the leader
described; ``at_ack``, each controller's own JMX view right after Kafka acknowledged it); a
``describe-quorum`` op after the run healed records the voter set once more. And the observer's
samples (process ``observer``): which node said it was Raft leader, in which epoch, when.

Two rules, each on acknowledged (ok) changes only: an info change may or may not have happened,
a fail one did not.

- ``removed-voter-led``: a removed voter is no longer a voter, and only voters lead. Kafka
  answers RemoveVoter once the VotersRecord is committed by the new voter set, in some epoch E;
  a leader at a later epoch was elected by that voter set. So a sample taken after the
  acknowledgement in which the removed node says ``state=leader`` in an epoch above every epoch
  known at the acknowledgement (the controllers' own views right after it, the observer's
  samples taken before it, the leader's description before it), before the node was next asked
  to be added, is a removed voter leading. A removed leader still saying leader in E itself (it
  resigns after the commit) is not.
- ``membership-change-lost``: a committed VotersRecord stays committed, and a leader's log holds
  every committed record, so a leader's description in an epoch at or above that bound holds the
  change. The last such description after the acknowledgement, before the same node was next
  asked to change (a later add of a directory other than the removed one does not undo a
  removal), must agree with it. A description from a leader in an older epoch (a deposed leader
  that has not noticed) is not judged.

The split-brain rule (checkers/families/metadata.py: at most one leader per epoch) holds across
voter-set changes as it is: a removed voter that still reports an old epoch's leader names the
leader that epoch had.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkers.core.findings import Finding, secs
from checkers.families.observer_samples import Sample
from checkers.scan.op_rows import row_value

REMOVE, ADD, DESCRIBE = "remove-controller", "add-controller", "describe-quorum"
CHANGES = (REMOVE, ADD)
# An auto-joining quorum (KIP-1186): no add request; the re-provisioned node joins by itself.
REPROVISION, AWAIT_JOIN = "reprovision-controller", "await-auto-join"
RULES = {
    "removed-voter-led": (
        'KIP-853: "A voter is any replica that can transition to the candidate state and to the '
        'leader state"; RemoveVoter is answered after the leader waits "for the VotersRecord to '
        'commit using the majority of new configuration", and a removed leader must "Resign by '
        'sending EndQuorumEpoch RPCs": a controller whose removal Kafka acknowledged leads no '
        "later epoch until it is added again"
    ),
    "membership-change-lost": (
        'KIP-853: AddVoter and RemoveVoter are answered only after the leader waits "for the '
        'VotersRecord to commit using the majority of new voters set"; a committed record is '
        "never lost (KIP-595's Raft), so every later leader's voter set holds an acknowledged "
        "change until another change undoes it"
    ),
}


@dataclass(frozen=True)
class Change:
    """An acknowledged add or remove of the replica (node_id, directory_id)."""

    f: str
    index: int  # the ok completion
    invoke_index: int
    node: str
    node_id: int
    directory_id: str
    invoke_time: int
    time: int
    bound: int | None  # the highest epoch known at the acknowledgement
    bound_from: str  # where that epoch was seen

    def cite(self) -> str:
        verb = "removal" if self.f == REMOVE else "addition"
        return (
            f"the {verb} of {self.node} (id {self.node_id}, directory {self.directory_id}) "
            f"acknowledged in op {self.index} ({secs(self.time)})"
        )


@dataclass(frozen=True)
class Observation:
    """A leader's description of the voter set, recorded in an ok completion."""

    index: int
    invoke_time: int
    time: int
    f: str
    leader: int
    epoch: int
    voters: frozenset[tuple[int, str | None]]

    def cite(self) -> str:
        return (
            f"op {self.index} ({self.f}, {secs(self.time)}): leader {self.leader} in epoch "
            f"{self.epoch} described voters {sorted(self.voters, key=lambda v: v[0])}"
        )


@dataclass(frozen=True)
class Attempt:
    """Any invocation of a change, whatever its outcome: it ends the windows it may undo."""

    f: str
    node: str
    invoke_time: int
    outcome: str
    directory_id: str | None  # when it completed ok


@dataclass
class MembershipInput:
    changes: list[Change]
    observations: list[Observation]
    attempts: list[Attempt]
    # (node, invocation time) of each re-provisioning: from then on a new replica of the node
    # exists, which under auto-join may add itself without any request.
    reprovisions: list[tuple[str, int]] = field(default_factory=list)


def _epochs(value: dict[str, Any]) -> list[tuple[int, str]]:
    out = []
    for node_id, view in (value.get("at_ack") or {}).items():
        if isinstance(view, dict) and isinstance(view.get("epoch"), int):
            out.append((view["epoch"], f"controller {node_id}'s own view right after the ack"))
    return out


def membership_input(rows: list[dict[str, Any]], samples: list[Sample]) -> MembershipInput:
    """From the op rows of the process ``upgrade`` (every column) and the observer's samples."""
    invokes = {r["index"]: r for r in rows if r["type"] == "invoke"}
    changes, observations, attempts = [], [], []
    reprovisions: list[tuple[str, int]] = []
    for r in rows:
        if r["type"] == "invoke":
            continue
        inv = invokes.get(r.get("invoke_index"))
        start = inv["time"] if inv else r["time"]
        value = row_value(r)
        value = value if isinstance(value, dict) else {}
        if r["f"] in (*CHANGES, AWAIT_JOIN):
            ok = r["type"] == "ok"
            directory = value.get("directory_id") if ok else None
            attempts.append(Attempt(r["f"], r.get("node") or "", start, r["type"], directory))
        if r["f"] == REPROVISION:
            reprovisions.append((r.get("node") or "", start))
        if r["type"] != "ok":
            continue
        voters, leader, epoch = value.get("voters"), value.get("leader"), value.get("epoch")
        if isinstance(voters, list) and isinstance(leader, int) and isinstance(epoch, int):
            key = frozenset((int(v[0]), v[1]) for v in voters if isinstance(v, list) and v)
            observations.append(
                Observation(r["index"], start, r["time"], r["f"], leader, epoch, key)
            )
        if r["f"] in CHANGES and isinstance(value.get("node_id"), int):
            if not isinstance(value.get("directory_id"), str):
                continue
            known = _epochs(value)
            before = value.get("before") or {}
            if isinstance(before.get("epoch"), int):
                known.append((before["epoch"], "the leader's description before the change"))
            known += [
                (s.raft("epoch"), f"observer sample {s.cite()}")
                for s in samples
                if s.invoke_time <= r["time"] and isinstance(s.raft("epoch"), int)
            ]
            if not _epochs(value) and isinstance(epoch, int):
                # No controller answered right after the ack: the leader's description after it
                # is the next best bound (higher, so fewer samples are judged).
                known.append((epoch, "the leader's description after the ack"))
            bound, bound_from = max(known) if known else (None, "nothing")
            changes.append(
                Change(
                    r["f"],
                    r["index"],
                    r.get("invoke_index") or r["index"],
                    r.get("node") or "",
                    value["node_id"],
                    value["directory_id"],
                    start,
                    r["time"],
                    bound,
                    bound_from,
                )
            )
    return MembershipInput(changes, observations, attempts, reprovisions)


def check_membership(data: MembershipInput, samples: list[Sample]) -> list[Finding]:
    findings = _removed_voters_led(data, samples) + _changes_lost(data)
    return sorted(findings, key=Finding.sort_key)


def _window_end(change: Change, attempts: list[Attempt]) -> int | None:
    """When the next invocation that may undo ``change`` began (None: none did)."""
    for a in sorted(attempts, key=lambda a: a.invoke_time):
        if a.invoke_time <= change.time or a.node != change.node or a.f == change.f:
            continue
        if (
            change.f == REMOVE
            and a.outcome == "ok"
            and a.directory_id not in (None, change.directory_id)
        ):
            continue  # another replica of the same node: the removed one stays removed
        return a.invoke_time
    return None


def _removed_voters_led(data: MembershipInput, samples: list[Sample]) -> list[Finding]:
    out = []
    for c in data.changes:
        if c.f != REMOVE or c.bound is None:
            continue
        # "before it was next asked to be added": any later add of the node, whatever replica.
        adds = [a.invoke_time for a in data.attempts if a.f == ADD and a.node == c.node]
        # Under auto-join the node asks by itself, as soon as it runs as a new replica: from its
        # re-provisioning on (or, with none recorded, from the wait for its join).
        joins = [
            a.invoke_time
            for a in data.attempts
            if a.f == AWAIT_JOIN and a.node == c.node and a.invoke_time > c.time
        ]
        if joins:
            first = min(joins)
            wiped = [t for n, t in data.reprovisions if n == c.node and c.time < t <= first]
            adds += wiped or [first]
        end = min((t for t in adds if t > c.time), default=None)
        for s in samples:
            epoch = s.raft("epoch")
            if (
                s.node == c.node
                and s.invoke_time > c.time
                and (end is None or s.time < end)
                and s.raft("state") == "leader"
                and isinstance(epoch, int)
                and epoch > c.bound
            ):
                out.append(
                    Finding(
                        "removed-voter-led",
                        None,
                        (c.index, s.index),
                        f"{c.node} said state=leader in epoch {epoch} in {s.cite()}, after "
                        f"{c.cite()}; every epoch known at that acknowledgement was at most "
                        f"{c.bound} ({c.bound_from})"
                        + (f", and it was not asked to be added before {secs(end)}" if end else "")
                        + f". Rule: {RULES['removed-voter-led']}",
                        {
                            "rule": RULES["removed-voter-led"],
                            "node": c.node,
                            "epoch": epoch,
                            "bound": c.bound,
                        },
                    )
                )
                break  # one finding per removal: its first such sample proves it
    return out


def _changes_lost(data: MembershipInput) -> list[Finding]:
    out = []
    for c in data.changes:
        end = _window_end(c, data.attempts)
        later = [
            o
            for o in data.observations
            if o.invoke_time > c.time
            and (end is None or o.invoke_time < end)
            and (c.bound is None or o.epoch >= c.bound)
        ]
        if not later:
            continue
        last = max(later, key=lambda o: (o.time, o.index))
        key = (c.node_id, c.directory_id)
        held = key in last.voters
        if held == (c.f == ADD):
            continue
        says = "still holds" if c.f == REMOVE else "does not hold"
        out.append(
            Finding(
                "membership-change-lost",
                None,
                (c.index, last.index),
                f"the last description of the voter set after {c.cite()}, {last.cite()}, "
                f"{says} ({c.node_id}, {c.directory_id}); no later change of {c.node} was "
                "invoked before it, and its epoch is at least "
                f"{c.bound} ({c.bound_from}). Rule: {RULES['membership-change-lost']}",
                {
                    "rule": RULES["membership-change-lost"],
                    "node": c.node,
                    "change": c.f,
                    "replica": [c.node_id, c.directory_id],
                },
            )
        )
    return out
