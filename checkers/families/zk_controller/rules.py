"""ZooKeeper-mode controller epochs: two controllers acting in overlapping epochs.

In ZooKeeper mode a deposed controller does not know it is deposed until it reaches ZooKeeper
again, so for a while two brokers each believe they are the controller (KIP-500). Safety rests
on epochs: each election increments /controller_epoch, every controller write is conditional
on that znode's version, and a broker refuses a request whose controller epoch is older than
the newest it has seen. The rules below hold exactly that; the overlap itself is measured and
reported as a note, because it is how ZooKeeper mode works, not a violation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from checkers.core.findings import Finding
from checkers.families.zk_controller.parse import Event

_FENCING = (
    'KIP-866: "/controller_epoch ... is used for fencing writes from old controllers in ZK '
    "mode. Each write from a ZK controller is actually a conditional multi-write with a "
    '\\"check\\" operation on the \\"/controller_epoch\\" ZNode\'s version. By altering this '
    'node, we can ensure any in-flight writes from the previous ZK controller epoch will fail"'
)
RULES = {
    "stale-controller-epoch-accepted": (
        f"{_FENCING}; a broker likewise refuses a LeaderAndIsr, UpdateMetadata or StopReplica "
        "request whose controller epoch is older than the latest it knows "
        "(STALE_CONTROLLER_EPOCH), so within one broker process the epochs it acts on never go "
        "back"
    ),
    "controller-epoch-reused": (
        'KIP-866: "Every time a ... controller election occurs, the newly elected controller '
        'will overwrite the values in \\"/controller\\" and \\"/controller_epoch\\" ... in '
        'order to maintain the monotonic epoch invariant": an election takes a new epoch, so '
        "one epoch names one controller"
    ),
}
OVERLAP_WHY = (
    "expected in ZooKeeper mode: a controller cut off from ZooKeeper learns that its session "
    "expired only when it reaches ZooKeeper again (KIP-500: the controller's in-memory state "
    '"often doesn\'t match the state" in ZooKeeper); brokers that have not yet heard of the '
    "new epoch may still act on its requests, those that have refuse them"
)


@dataclass
class EpochSummary:
    elections: list[Event] = field(default_factory=list)
    accepted: int = 0
    refused: int = 0

    @property
    def failovers(self) -> int:
        """Elections after the first: each moved the controllership to a new epoch."""
        return max(0, len({e.epoch for e in self.elections}) - 1)

    def stats(self) -> dict[str, Any]:
        return {
            "elections": len(self.elections),
            "failovers": self.failovers,
            "epochs": sorted({e.epoch for e in self.elections if e.epoch is not None}),
            "requests_accepted": self.accepted,
            "requests_refused_as_stale": self.refused,
        }


def _finding(kind: str, events: list[Event], text: str, **data: Any) -> Finding:
    return Finding(
        kind,
        None,
        (),
        f"{text}. Rule: {RULES[kind]}",
        {"rule": RULES[kind], "lines": [e.cite() for e in events], **data},
    )


def stale_epochs(events: list[Event]) -> list[Finding]:
    """One broker's log: an epoch acted on, or stated as latest known, below one seen before.

    A restart (KafkaServer "starting") begins a new process whose in-memory controller epoch
    starts from zero again, so the comparison never crosses it.
    """
    out: list[Finding] = []
    known: Event | None = None  # the line that showed the highest epoch of this process

    def level(e: Event) -> int:
        return (e.known if e.kind == "refused" else e.epoch) or 0

    for e in events:
        if e.kind == "start":
            known = None
            continue
        if e.kind not in ("accepted", "refused"):
            continue
        if known is not None and level(e) < level(known):
            what = (
                f"acted on a request from controller {e.controller} with controller epoch "
                f"{e.epoch} ({e.cite()})"
                if e.kind == "accepted"
                else f"said its latest known controller epoch was {e.known} ({e.cite()})"
            )
            out.append(
                _finding(
                    "stale-controller-epoch-accepted",
                    [known, e],
                    f"broker {e.node_id} {what} after it had already "
                    + (
                        f"acted on controller epoch {known.epoch} from controller "
                        f"{known.controller}"
                        if known.kind == "accepted"
                        else f"stated {known.known} as its latest known controller epoch"
                    )
                    + f" ({known.cite()}), in the same process",
                    broker=e.node_id,
                    epochs=[level(known), level(e)],
                )
            )
        if known is None or level(e) > level(known):
            known = e
    return out


def reused_epochs(events: Iterable[Event]) -> list[Finding]:
    """One controller epoch claimed by two controllers: by election lines or by requests."""
    owners: dict[int, dict[int, Event]] = {}
    for e in events:
        controller = e.node_id if e.kind in ("elected", "acts") else e.controller
        # Epoch 0 is the initial value, held before any election: it names no controller.
        if e.kind != "start" and e.epoch and controller is not None:
            owners.setdefault(e.epoch, {}).setdefault(controller, e)
    out = []
    for epoch, by_controller in sorted(owners.items()):
        if len(by_controller) > 1:
            cited = list(by_controller.values())
            out.append(
                _finding(
                    "controller-epoch-reused",
                    cited,
                    f"controller epoch {epoch} was used by {len(cited)} controllers: "
                    + "; ".join(
                        f"controller {c} ({_how(e)}, {e.cite()})" for c, e in by_controller.items()
                    ),
                    epoch=epoch,
                    controllers=sorted(by_controller),
                )
            )
    return out


def _how(e: Event) -> str:
    return {
        "elected": "elected",
        "acts": "logged a state change",
        "accepted": f"broker {e.node_id} acted on its request",
        "refused": f"broker {e.node_id} refused its request",
    }[e.kind]


def overlaps(by_file: dict[str, list[Event]]) -> list[str]:
    """Notes: each deposed controller still acting after its successor's election."""
    events = [e for es in by_file.values() for e in es]
    elections = sorted((e for e in events if e.kind == "elected"), key=lambda e: e.wall)
    notes = []
    for new in elections:
        old_acts: dict[tuple[int, int], Event] = {}
        for e in events:
            if (
                e.kind == "acts"
                and e.node_id != new.node_id
                and (e.epoch or 0) < (new.epoch or 0)
                and e.wall > new.wall
            ):
                key = (e.node_id or 0, e.epoch or 0)
                if key not in old_acts or e.wall > old_acts[key].wall:
                    old_acts[key] = e
        for (controller, epoch), last in sorted(old_acts.items()):
            took = [
                e
                for e in events
                if e.kind in ("accepted", "refused")
                and e.controller == controller
                and e.epoch == epoch
                and e.wall > new.wall
            ]
            accepted = [e for e in took if e.kind == "accepted"]
            refused = [e for e in took if e.kind == "refused"]
            notes.append(
                f"controller epochs: controller {controller} (epoch {epoch}) still acted as "
                f"controller at {last.at()} ({last.cite()}), {last.wall - new.wall:.3f} s after "
                f"controller {new.node_id} was elected in epoch {new.epoch} at {new.at()} "
                f"({new.cite()}); after that election brokers acted on {len(accepted)} of its "
                f"requests{_cites(accepted)} and refused {len(refused)} as stale"
                f"{_cites(refused)}: {OVERLAP_WHY}"
            )
    return notes


def _cites(events: list[Event], most: int = 3) -> str:
    if not events:
        return ""
    shown = ", ".join(e.cite() for e in events[:most])
    return f" ({shown}{', …' if len(events) > most else ''})"


def summarize(by_file: dict[str, list[Event]]) -> EpochSummary:
    out = EpochSummary()
    for events in by_file.values():
        for e in events:
            if e.kind == "elected":
                out.elections.append(e)
            out.accepted += e.kind == "accepted"
            out.refused += e.kind == "refused"
    out.elections.sort(key=lambda e: e.wall)
    return out
