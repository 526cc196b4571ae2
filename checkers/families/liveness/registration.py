"""Brokers and controllers that did not come back after the last heal, from the committed
metadata log (metadata_log/committed.py) in the controllers' wall clock, which the harness's
ops share (metadata_log/liveness.py).

`broker-fenced-after-heal`. Every fault ended by the time the last heal (or stop) completed at
H. A broker whose committed state (metadata_log/liveness.py BrokerStates: registered and
unfenced, fenced, in controlled shutdown, unregistered) is other than unfenced from
max(H, its last change) for longer than `Bounds.after_heal_s`, to the end of the committed
records the history covers, while the observer's samples of its node answered after the
bound (its JVM was up), did not get its lease back. KIP-631: a registered broker that
heartbeats goes from registered+fenced to registered+active (BROKER_RULE).

`controller-unregistered`. KIP-919 (Kafka 3.7+): each controller registers itself
(RegisterControllerRecord) when its JVM starts. A controller whose JVM started at S (the
observer's `started_ms`) with no committed registration of its id after S, longer than the
bound after max(H, S), has its registration missing. Judged only where the log holds some
controller registration (the metadata.version has them) and no upgrade or migration step ran
(those restart and re-provision controllers on purpose).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from checkers.core.findings import Finding
from checkers.families.metadata_log.liveness import (
    UNFENCED,
    BrokerStates,
    Nodes,
    Sample,
)
from checkers.families.metadata_log.parse import Record
from checkers.scan.fault_windows import utc
from checkers.scan.node_logs import LINE, node_log, wall_of

# What a controller's own log says when its registration request never left: KAFKA-20247. In
# the releases' bytecode, 3.7.2 to 4.1.2's onTimeout does not reset pendingRpc, so every later
# attempt is skipped ("waiting for the previous RPC to complete") and the controller never
# registers; 4.2.2 and 4.3.1 reset it in a RequestTimeoutEvent, 4.4.0's Java manager too.
REGISTRATION_TIMEOUT = "ControllerRegistrationManager"
TIMED_OUT = "timed out before sending the request"
STUCK = (
    "KAFKA-20247: after that timeout the registration manager does not reset its pending-RPC "
    "flag, so it skips every later attempt ('waiting for the previous RPC to complete') and "
    "the controller never registers again"
)

BROKER_RULE = (
    'KIP-631: "Once a broker has completed log recovery and registered with the controller, '
    "its next goal is to transition from registered+fenced to registered+active. It can do "
    'this by sending a broker heartbeat request to the active controller"; so once every fault '
    "is healed a live broker is registered and unfenced again"
)
CONTROLLER_RULE = (
    "KIP-919 (Kafka 3.7+): each controller registers itself with the active controller when it "
    "starts (a ControllerRegistrationRequest, committed as a RegisterControllerRecord carrying "
    "the new incarnation id), so a restarted controller is registered again"
)
REGISTER_CONTROLLER = "REGISTER_CONTROLLER_RECORD"


@dataclass
class AfterHeal:
    findings: list[Finding]
    notes: list[str]
    judged: bool


def _answered_after(samples: list[Sample], node: str, t: float) -> list[Sample]:
    return [s for s in samples if s.node == node and s.type == "ok" and s.start >= t]


def after_heal(
    committed: list[Record],
    nodes: Nodes,
    samples: list[Sample],
    healed: float | None,
    history_end: float,
    bound: float,
    planned_steps: bool,
) -> AfterHeal:
    """`healed`: the wall time the last fault-ending op completed (None: no fault ended);
    `history_end`: the history's last wall time; records after it are not read (the harness
    may be stopping nodes by then)."""
    out = AfterHeal([], [], False)
    if healed is None:
        return out
    records = [r for r in committed if r.create_ms / 1000 <= history_end]
    if not records:
        return out
    end = max(r.create_ms for r in records) / 1000
    if end - healed <= bound:
        out.notes.append(
            f"liveness: the committed metadata records end {end - healed:.1f} s after the last "
            f"heal ({utc(healed)}), within the {bound:g} s bound: brokers and controllers after "
            "the heal not judged (a run with --liveness fail observes the cluster that long)"
        )
        return out
    out.judged = True
    out.findings += _brokers(records, nodes, samples, healed, end, bound, out.notes)
    if planned_steps:
        out.notes.append(
            "liveness: controller registrations not judged: upgrade or migration steps ran"
        )
    else:
        out.findings += _controllers(records, nodes, samples, healed, end, bound, out.notes)
    return out


def with_log_evidence(findings: list[Finding], run_dir: str | Path | None) -> list[Finding]:
    """Each `controller-unregistered` finding with its node's last registration timeout line
    (the controller's own account of why it never registered), where its log has one."""
    if run_dir is None:
        return findings
    out = []
    for f in findings:
        node = f.data.get("node") if f.kind == "controller-unregistered" else None
        started = float(f.data.get("started", -math.inf))
        line = _timed_out_line(run_dir, node, started) if isinstance(node, str) else None
        if line is None:
            out.append(f)
            continue
        cited, n, text = line
        said = f" The controller's log, {cited}:{n}: {text}; {STUCK}."
        out.append(replace(f, explanation=f.explanation + said, data={**f.data, "log": line}))
    return out


def _timed_out_line(run_dir: str | Path, node: str, started: float) -> tuple[str, int, str] | None:
    """The node's last registration timeout logged since its JVM started (this incarnation's)."""
    path, cited = node_log(run_dir, node)
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    found = None
    for i, line in enumerate(lines):
        m = LINE.match(line)
        if m and REGISTRATION_TIMEOUT in line and TIMED_OUT in line and wall_of(m[1]) >= started:
            found = (cited, i + 1, line.strip())
    return found


def _brokers(
    records: list[Record],
    nodes: Nodes,
    samples: list[Sample],
    healed: float,
    end: float,
    bound: float,
    notes: list[str],
) -> list[Finding]:
    states = BrokerStates.of(records)
    out = []
    for node in sorted(nodes.brokers):
        broker = nodes.ids.get(node)
        if broker is None:
            continue
        state, record = states.at(broker, end)
        if state == UNFENCED:
            continue
        if state is None and records[0].offset != 0:
            # The log begins after a snapshot: its registration may be in the snapshot.
            notes.append(
                f"liveness: broker {broker} ({node}) has no record in the committed log, which "
                f"begins at offset {records[0].offset} (a snapshot took its start): not judged"
            )
            continue
        since = max(healed, record.create_ms / 1000 if record is not None else -math.inf)
        if end - since <= bound:
            continue
        alive = _answered_after(samples, node, since + bound)
        if not alive:
            notes.append(
                f"liveness: broker {broker} ({node}) was {state or 'never registered'} at the "
                "end of the committed log, but no observer sample of its node answered after "
                "the bound: its JVM may not have been up, not judged"
            )
            continue
        said = state if state is not None else "not registered in the committed log"
        shown = record.cite() if record is not None else "no registration record"
        out.append(
            Finding(
                "broker-fenced-after-heal",
                None,
                tuple(s.index for s in alive[:5]),
                f"broker {broker} (node {node}) was {said} from {utc(since)} to the end of the "
                f"committed records the history covers ({utc(end)}), {end - since:.1f} s, past "
                f"the {bound:g} s bound after the last heal at {utc(healed)}; its JVM answered "
                f"the observer then ({', '.join(s.cite() for s in alive[:3])}). Last record: "
                f"{shown}. Rule: {BROKER_RULE}",
                {"rule": BROKER_RULE, "broker": broker, "node": node, "state": said},
            )
        )
    return out


def _controllers(
    records: list[Record],
    nodes: Nodes,
    samples: list[Sample],
    healed: float,
    end: float,
    bound: float,
    notes: list[str],
) -> list[Finding]:
    registered: dict[int, list[Record]] = {}
    for r in records:
        cid = r.data.get("controllerId") if r.type == REGISTER_CONTROLLER else None
        if isinstance(cid, int):
            registered.setdefault(cid, []).append(r)
    if not registered:
        return []  # the metadata.version has no controller registrations (before 3.7)
    out = []
    for node in sorted(nodes.controllers):
        cid = nodes.ids.get(node)
        if cid is None:
            continue
        starts = [
            t / 1000
            for s in samples
            if s.node == node and s.type == "ok" and isinstance(t := s.value.get("started_ms"), int)
        ]
        if not starts:
            notes.append(
                f"liveness: no observer sample gave controller {cid} ({node})'s JVM start time: "
                "its registration not judged"
            )
            continue
        started = max(starts)
        if started * 1000 < records[0].create_ms and records[0].offset != 0:
            continue  # started before the log's first record: its registration may be snapshotted
        since = max(healed, started)
        if end - since <= bound:
            continue
        later = [r for r in registered.get(cid, []) if r.create_ms / 1000 >= started - 1.0]
        if later:
            continue
        last = registered.get(cid, [])
        shown = last[-1].cite() if last else "none in the committed log"
        out.append(
            Finding(
                "controller-unregistered",
                None,
                (),
                f"controller {cid} (node {node}) started its JVM at {utc(started)} (the "
                f"observer's started_ms), yet no committed RegisterControllerRecord of id {cid} "
                f"came after it by {utc(end)}, {end - since:.1f} s after {utc(since)}, past the "
                f"{bound:g} s bound after the last heal at {utc(healed)}. Its last registration: "
                f"{shown}. Rule: {CONTROLLER_RULE}",
                {"rule": CONTROLLER_RULE, "controller": cid, "node": node, "started": started},
            )
        )
    return out
