"""ZooKeeper-to-KRaft migration states (KIP-866) never go backwards: per node in the observer's
`zk_migration_state` samples, and along the committed ZkMigrationStateRecords of the metadata log.

KIP-866 names the states MigrationIneligible -> MigratingZkData -> DualWriteMetadata ->
MigrationFinalized; Kafka's ZkMigrationState enum calls them ZK -> PRE_MIGRATION -> MIGRATION ->
POST_MIGRATION (with values 4, 2, 1, 3: not in order). NONE (0) is outside that order: "This
cluster started out as KRaft and was not migrated". What nodes report outside a migration:

- a KRaft controller's gauge starts at -1 until its first metadata image is published, and an
  empty log's image says NONE: both say nothing about a migration's progress, so a migrating
  controller going from either to PRE_MIGRATION is no regression, and a restarted one briefly
  reports them again;
- every ZooKeeper-mode broker reports ZK for as long as it runs;
- broker-only KRaft nodes have no such gauge (None).

A rollback to ZooKeeper ("reverse the steps of the migration", KIP-866) is an operator's act
that kchaos never performs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from checkers.core.findings import Finding
from checkers.families.observer_samples import MetadataInput, Sample

if TYPE_CHECKING:
    from checkers.families.metadata_log.parse import Record

ORDER = ("ZK", "PRE_MIGRATION", "MIGRATION", "POST_MIGRATION")
NONE = "NONE"
# ZkMigrationStateRecord.ZkMigrationState values (Kafka 3.5+, ZkMigrationState.java).
RECORD_STATES = {0: NONE, 1: "MIGRATION", 2: "PRE_MIGRATION", 3: "POST_MIGRATION"}
KIP_NAMES = {
    "ZK": "MigrationIneligible",
    "PRE_MIGRATION": "MigratingZkData",
    "MIGRATION": "DualWriteMetadata",
    "POST_MIGRATION": "MigrationFinalized",
    NONE: "None",
}
RULE = (
    'KIP-866: "Here is a state machine description of the migration ... these four will be '
    'exposed as the ZkMigrationState metric": MigrationIneligible, MigratingZkData, '
    'DualWriteMetadata, MigrationFinalized, in that order; and state None (0): "This cluster '
    'started out as KRaft and was not migrated"'
)
KIND = "migration-state-regression"


def _name(state: str) -> str:
    return f"{state} ({KIP_NAMES[state]})"


def observed_migration_regressions(data: MetadataInput) -> list[Finding]:
    """Per node: a later sample in an earlier migration state, or NONE after a migration state.

    An earlier state is excused only by a data-loss fault of the node in between (its log may
    be gone); NONE after a migration state by any restart or silence of the node (a restarted
    controller publishes an empty log's NONE before it has replayed its log).
    """
    out = []
    latest: dict[str, Sample] = {}  # the node's furthest migration state so far
    for s in data.samples:
        state = s.value.get("zk_migration_state")
        top = latest.get(s.node)
        if state in ORDER:
            if top is not None and ORDER.index(state) < ORDER.index(
                top.value["zk_migration_state"]
            ):
                if not data.disrupted(s.node, top.invoke_time, s.time, data_loss=True):
                    out.append(_observed(top, s))
                latest[s.node] = s
            elif top is None or ORDER.index(state) > ORDER.index(top.value["zk_migration_state"]):
                latest[s.node] = s
        elif (
            state == NONE
            and top is not None
            and not data.disrupted(s.node, top.invoke_time, s.time, data_loss=False)
        ):
            out.append(_observed(top, s))
            del latest[s.node]
    return out


def _observed(before: Sample, after: Sample) -> Finding:
    was, now = before.value["zk_migration_state"], after.value["zk_migration_state"]
    return Finding(
        KIND,
        None,
        (before.index, after.index),
        f"{after.node} reported ZkMigrationState {_name(was)} in {before.cite()}, then "
        f"{_name(now)} in {after.cite()}, with no fault of {after.node} in between that could "
        f"reset it. Rule: {RULE}",
        {"rule": RULE, "node": after.node, "states": [was, now], "source": "observer"},
    )


def state_changes(committed: list[Record]) -> Iterator[tuple[Record, Record, str, str]]:
    """Successive committed ZkMigrationStateRecords: (previous, next, their states)."""
    previous: tuple[Record, str] | None = None
    for r in committed:
        if r.control or r.type != "ZK_MIGRATION_STATE_RECORD":
            continue
        state = RECORD_STATES.get(r.data.get("zkMigrationState"))  # type: ignore[arg-type]
        if state is None:
            continue
        if previous is not None:
            yield previous[0], r, previous[1], state
        previous = (r, state)


def logged_migration_regressions(committed: list[Record]) -> list[Finding]:
    """Committed ZkMigrationStateRecords going back in ORDER, or between NONE and ORDER."""
    out = []
    for before, after, was, state in state_changes(committed):
        backwards = was in ORDER and state in ORDER and ORDER.index(state) < ORDER.index(was)
        if backwards or (was == NONE) != (state == NONE):
            out.append(_logged(before, after, was, state))
    return out


def _logged(before: Record, after: Record, was: str, now: str) -> Finding:
    cites = [before.cite(), after.cite()]
    data: dict[str, Any] = {
        "rule": RULE,
        "records": cites,
        "states": [was, now],
        "offsets": [before.offset, after.offset],
        "source": "metadata log",
    }
    return Finding(
        KIND,
        None,
        (),
        f"the committed metadata log sets the ZK migration state to {_name(was)} at offset "
        f"{before.offset}, then to {_name(now)} at offset {after.offset}. Records: "
        + "; ".join(cites)
        + f". Rule: {RULE}",
        data,
    )


SKIP_KIND = "migration-state-skip"
SKIP_RULE = (
    "KIP-866: the migration's states are MigratingZkData (\"The controller is copying data from "
    'ZooKeeper into KRaft"), DualWriteMetadata ("The controller is in KRaft mode making dual '
    'writes to ZooKeeper"), MigrationFinalized ("The cluster has been migrated to KRaft mode"); '
    'finalizing is "the final step", taken once "the operator has decided to commit to KRaft '
    'mode": a migration is not finalized before its ZooKeeper data was copied'
)


def observed_migration_skips(data: MetadataInput) -> list[Finding]:
    """Per node: PRE_MIGRATION, then POST_MIGRATION with no MIGRATION sample in between.

    Excused by any fault or silent sample of the node in between: a node that was down or cut
    off while the cluster was in MIGRATION catches up on both records at once and may publish
    only the later one.
    """
    out = []
    last: dict[str, Sample] = {}
    for s in data.samples:
        state = s.value.get("zk_migration_state")
        if state not in ORDER:
            continue
        before = last.get(s.node)
        if (
            before is not None
            and before.value["zk_migration_state"] == "PRE_MIGRATION"
            and state == "POST_MIGRATION"
            and not data.disrupted(s.node, before.invoke_time, s.time, data_loss=False)
        ):
            out.append(
                Finding(
                    SKIP_KIND,
                    None,
                    (before.index, s.index),
                    f"{s.node} reported ZkMigrationState {_name('PRE_MIGRATION')} in "
                    f"{before.cite()}, then {_name('POST_MIGRATION')} in {s.cite()}, never "
                    f"{_name('MIGRATION')} in between, and no fault or silent sample of "
                    f"{s.node} in between could have hidden it. Rule: {SKIP_RULE}",
                    {"rule": SKIP_RULE, "node": s.node, "source": "observer"},
                )
            )
        last[s.node] = s
    return out


def logged_migration_skips(committed: list[Record]) -> list[Finding]:
    """A committed POST_MIGRATION record whose previous ZkMigrationStateRecord is PRE_MIGRATION."""
    out = []
    for before, after, was, state in state_changes(committed):
        if was != "PRE_MIGRATION" or state != "POST_MIGRATION":
            continue
        cites = [before.cite(), after.cite()]
        out.append(
            Finding(
                SKIP_KIND,
                None,
                (),
                f"the committed metadata log sets the ZK migration state to {_name(was)} at "
                f"offset {before.offset}, then to {_name(state)} at offset {after.offset}, with "
                f"no {_name('MIGRATION')} record in between. Records: "
                + "; ".join(cites)
                + f". Rule: {SKIP_RULE}",
                {
                    "rule": SKIP_RULE,
                    "records": cites,
                    "offsets": [before.offset, after.offset],
                    "source": "metadata log",
                },
            )
        )
    return out


def migration_note(rows: list[dict[str, Any]]) -> str | None:
    """How far the run's migration got, from the op rows of process "migration" (none: None)."""
    done = [r for r in rows if r.get("process") == "migration" and r["type"] != "invoke"]
    if not done:
        return None
    ok = [r for r in done if r["type"] == "ok"]
    last = f"{ok[-1]['f']} {ok[-1].get('node') or ''}".strip() if ok else "no step"
    if len(ok) == len(done):
        return f"migration: all {len(done)} steps ok, the last {last} (op {ok[-1]['index']})"
    first = next(r for r in done if r["type"] != "ok")
    return (
        f"migration: {len(ok)} of {len(done)} steps ok, the last {last}; op {first['index']} "
        f"({first['f']} {first.get('node') or ''}) ended {first['type']}: {first.get('error')}"
    )
