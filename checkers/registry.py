"""Every checker `kchaos check` runs, in order, and what each reads of the run.

Each class adapts one family of pure checks (their own modules: queue/, cycles.py, metadata.py,
migration.py, admin.py, data_log/, metadata_log/, zk_controller/, quorum_membership.py,
groups.py, foreign.py, fenced_acks.py, elr/, prevote.py, durability/, disk/) to the
Checker protocol (checkers/core/checker.py): it declares its Needs and turns the family's answer
into a CheckerResult.
The order of REGISTRY is the order of findings and notes in results.json, and a checker that
reads another's result comes after it:

  queue -> cycles          the cycle search runs over the queue checker's edges
  queue -> metadata-logs   queue failures corroborate sends of fenced brokers (lease-violation)
  queue, data-logs -> durability   lost writes (and what follows from them), judged against
                                   Kafka's durability model
  queue -> disk-corruption queue findings on a partition a disk corrupt step damaged

The data logs are read once (RunInputs.data_logs) for both checkers that use them.
"""

from __future__ import annotations

from checkers.core.checker import Checker
from checkers.core.checker_result import CheckerResult
from checkers.core.inputs import (
    BROKER_LOGS,
    CLUSTER,
    DATA_LOGS,
    ELEMENTS,
    HISTORY,
    METADATA_LOGS,
    OBSERVED,
    PLAN,
    Needs,
    RunInputs,
)
from checkers.families.admin import ADMIN_FS, admin_ops, check_admin, kraft_mode
from checkers.families.collection import collection_failures
from checkers.families.coverage.count import count_states, is_fencing_error, read_must_reach
from checkers.families.cycles import find_cycles
from checkers.families.data_log.check import check_data_logs
from checkers.families.disk.corruption import DISK_FS, READ_FS, telling_reads
from checkers.families.disk.corruption import judge as judge_disk
from checkers.families.durability.check import RunView, check_durability
from checkers.families.durability.partitions import read_partitions
from checkers.families.durability.power import disk_faults
from checkers.families.durability.reads import FinalReads, heal_end
from checkers.families.durability.settings import SettingsError, settings_of
from checkers.families.elr.check import check_elr
from checkers.families.features import features_and_notes
from checkers.families.fenced_acks import (
    ACK_FS,
    fenced_acks,
    hijacked_acks,
    hijacks_of,
    zombie_commits,
)
from checkers.families.foreign import FOREIGN_FS, foreign_reads
from checkers.families.groups import GROUP_FS, SUBSCRIBE_FS, check_groups
from checkers.families.liveness.check import LivenessInputs, check_liveness, read_options
from checkers.families.liveness.progress import OP_COLUMNS, client_ops
from checkers.families.metadata import check_metadata
from checkers.families.metadata_log.applied import unjudged_note
from checkers.families.metadata_log.check import check_read_metadata
from checkers.families.metadata_log.committed import committed_of_cluster
from checkers.families.metadata_log.liveness import LivenessInput, logged_fences, read_availability
from checkers.families.migration import migration_note
from checkers.families.observer_samples import MetadataInput
from checkers.families.prevote import check_prevote
from checkers.families.queue.arrays import ElemArrays
from checkers.families.queue.check import (
    RESET_FS,
    QueueResult,
    Resets,
    queue_resets,
)
from checkers.families.queue.dispatch import run_engine
from checkers.families.queue.rules.fencing import generator_slots, run_slots
from checkers.families.queue.source import ElementSource
from checkers.families.queue.spill import SpilledElements
from checkers.families.quorum_membership import check_membership, membership_input
from checkers.families.share.checks import FS as SHARE_FS
from checkers.families.share.checks import PROCESSES as SHARE_PROCESSES
from checkers.families.share.checks import check_share_run
from checkers.families.share.finality import SHARE_OP_FS
from checkers.families.zk_controller.check import check_zk_logs, zk_brokers
from checkers.scan.op_stream import OpRows, with_fields
from history.collection import read_failures
from history.columnar import op_row_groups
from history.format import (
    DATA_LOGS_DIR,
    METADATA_DIR,
    MIGRATION,
    NEMESIS,
    OBSERVER,
    UPGRADE,
    idempotent_producers,
)
from history.share import SHARE_FIELD

# The lease liveness rules' ops (metadata_log/liveness.py): faults, steps and observer samples.
LIVENESS_PROCESSES = (NEMESIS, OBSERVER, UPGRADE, MIGRATION)
# The ops fault spans are made of (checkers/scan/fault_windows.py).
FAULT_PROCESSES = (NEMESIS, UPGRADE, MIGRATION)
SUBSCRIBE_NOTE = "consumers subscribe: poll-skip and nonmonotonic-poll are tolerated"


class QueueChecker:
    """Jepsen's Kafka queue anomalies (checkers/families/queue/) on the engine asked for; its
    `outputs` hold the QueueResult (edges for the cycle search)."""

    name = "queue"

    def needs(self, inputs: RunInputs) -> Needs:
        # plan.json: run_slots reads it to say which processes shared a transactional.id.
        return Needs(frozenset({HISTORY, ELEMENTS, PLAN}), fs=tuple(RESET_FS))

    def check(self, inputs: RunInputs) -> CheckerResult:
        slots, slots_note = run_slots(inputs.run_dir)
        n_elements = inputs.history.n_elements
        resets = queue_resets(
            inputs.op_table(fs=RESET_FS), inputs.history.queue_ops, inputs.after_abort
        )
        stats: dict[str, int] = {"elements": n_elements}
        queue = self._engine(inputs, resets, slots, stats)
        notes = [SUBSCRIBE_NOTE] if queue.subscribe else []
        if slots_note and n_elements:
            notes.append(slots_note)
        return CheckerResult(queue.findings, notes, n_elements > 0, stats, {"queue": queue})

    def _engine(
        self, inputs: RunInputs, resets: Resets, slots: int | None, stats: dict[str, int]
    ) -> QueueResult:
        # Each engine takes the form of the elements it works on: the decoded arrays (local,
        # handed over so they are held once), the Parquet file (reference, Spark).
        # A streamed history's spilled elements are deleted once checked (its edges stay, for
        # the cycle search, until the check ends).
        held = inputs.take_elements() if inputs.engine == "local" else None
        spilled = held if isinstance(held, SpilledElements) else None
        if spilled is not None:  # streamed (checkers/scan/load.py): in how many buckets of keys
            stats["streamed_buckets"] = len(spilled)
        source = ElementSource(
            arrays=held if isinstance(held, ElemArrays) else None,
            spilled=spilled,
            parquet=inputs.parquet,
            spark=inputs.spark_session() if inputs.engine == "spark" else None,
            pool=inputs.pool,
            producers=idempotent_producers(inputs.header),
        )
        try:
            return run_engine(inputs.engine, source, resets, slots, inputs.after_abort)
        finally:
            if spilled is not None:
                spilled.close()


class CyclesChecker:
    """G0 and G1c, with their -process and -realtime variants (checkers/families/cycles.py)."""

    name = "cycles"

    def needs(self, inputs: RunInputs) -> Needs:
        return Needs(frozenset({HISTORY}), after=("queue",))

    def check(self, inputs: RunInputs) -> CheckerResult:
        queue = inputs.result("queue")
        edges: QueueResult = queue.outputs["queue"]
        found = find_cycles(edges.edge_parts, inputs.history.queue_ops, edges.back_spans)
        return CheckerResult(found, checked=queue.checked)


class KraftMetadataChecker:
    """KRaft safety and migration states from observer samples (checkers/families/metadata.py)."""

    name = "kraft-metadata"

    def needs(self, inputs: RunInputs) -> Needs:
        return Needs(frozenset({OBSERVED}))

    def check(self, inputs: RunInputs) -> CheckerResult:
        samples = inputs.observed.samples
        return CheckerResult(
            check_metadata(inputs.observed),
            checked=bool(samples),
            stats={"observer_samples": len(samples)},
        )


class MigrationChecker:
    """How far a ZooKeeper-to-KRaft migration got: a note, never a finding (migration.py)."""

    name = "migration"

    def needs(self, inputs: RunInputs) -> Needs:
        return Needs(frozenset({HISTORY}), processes=(MIGRATION,))

    def check(self, inputs: RunInputs) -> CheckerResult:
        note = migration_note(inputs.op_rows(processes=(MIGRATION,)))
        return CheckerResult(notes=[note] if note else [])


class AdminChecker:
    """Topics whose fate the brokers' final views contradict (checkers/families/admin.py)."""

    name = "admin"

    def needs(self, inputs: RunInputs) -> Needs:
        return Needs(frozenset({HISTORY, OBSERVED, CLUSTER}), fs=ADMIN_FS)

    def check(self, inputs: RunInputs) -> CheckerResult:
        ops = admin_ops(inputs.op_rows(fs=ADMIN_FS))
        stats = {"admin_ops": len(ops)}
        if not ops:
            return CheckerResult(stats=stats)
        findings, notes = check_admin(ops, kraft_mode(inputs.cluster, inputs.observed))
        return CheckerResult(findings, notes, True, stats)


class DataLogsChecker:
    """Fenced producers' writes and commits in the brokers' final logs
    (checkers/families/data_log/)."""

    name = "data-logs"

    def needs(self, inputs: RunInputs) -> Needs:
        if not inputs.has_dir(DATA_LOGS_DIR):
            return Needs()
        return Needs(frozenset({HISTORY, DATA_LOGS}))

    def check(self, inputs: RunInputs) -> CheckerResult:
        if not inputs.has_dir(DATA_LOGS_DIR):
            return CheckerResult()
        read = inputs.data_logs
        assert read is not None  # the directory is there
        data = check_data_logs(read, inputs.sends)
        return CheckerResult(data.findings, data.notes, bool(data.logs))


class MetadataLogsChecker:
    """KRaft safety from the decoded metadata logs (checkers/families/metadata_log/), and the lease
    liveness rules over them, the faults, observer samples, the plan's availability option and
    the controllers' logs; without the metadata logs, a note on the brokers' applied offsets it
    could not judge."""

    name = "metadata-logs"

    def needs(self, inputs: RunInputs) -> Needs:
        if not inputs.has_dir(METADATA_DIR):
            return Needs(frozenset({OBSERVED}))
        reads = {HISTORY, OBSERVED, CLUSTER, METADATA_LOGS, DATA_LOGS, PLAN, BROKER_LOGS}
        # The sends: those inside a fence's window (inputs.send_rows, read only then) and, for
        # the attribution, their element rows as arrays (inputs.sends): none read whole.
        return Needs(frozenset(reads), processes=LIVENESS_PROCESSES, after=("queue",))

    def check(self, inputs: RunInputs) -> CheckerResult:
        observed = inputs.observed
        if not inputs.has_dir(METADATA_DIR):
            if inputs.has_dir(DATA_LOGS_DIR):
                return CheckerResult()
            why = "the run has no decoded metadata logs (metadata/)"
            return CheckerResult(notes=unjudged_note(observed, why))
        read = inputs.metadata_logs
        assert read is not None  # the directory is there
        # A fenced broker's acknowledgement shows as a lost or misplaced write: such findings
        # corroborate a send the history attributes to a fenced broker.
        queue = inputs.result("queue").findings
        failing = {i for f in queue if f.tolerated is None and not f.unknown for i in f.ops}
        data = inputs.data_logs
        acked = inputs.sends if data and data.logs else None
        result = check_read_metadata(
            read,
            inputs.cluster,
            inputs.send_rows(any_ok=acked is None or len(acked.acked) > 0),
            _highest_watermark(observed),
            failing,
            observed,
            data.logs if data else None,
            _liveness(inputs),
            acked,
        )
        return CheckerResult(result.findings, result.notes, result.checked, result.stats)


def _liveness(inputs: RunInputs) -> LivenessInput:
    controllers = [
        n["name"]
        for n in inputs.cluster.get("nodes") or []
        if "controller" in (n.get("roles") or []) and "name" in n
    ]
    return LivenessInput(
        inputs.op_rows(processes=LIVENESS_PROCESSES),
        read_availability(inputs.run_dir),
        logged_fences(inputs.run_dir, controllers),
    )


def _highest_watermark(observed: MetadataInput) -> int | None:
    marks = [s.raft("high_watermark") for s in observed.samples]
    return max((m for m in marks if isinstance(m, int)), default=None)


class ZkControllerChecker:
    """ZooKeeper-mode controller epochs from the brokers' logs
    (checkers/families/zk_controller/)."""

    name = "zk-controller"

    def needs(self, inputs: RunInputs) -> Needs:
        return Needs(frozenset({CLUSTER, OBSERVED, BROKER_LOGS}))

    def check(self, inputs: RunInputs) -> CheckerResult:
        brokers = zk_brokers(inputs.cluster)
        if brokers is None:
            return CheckerResult()
        zk = check_zk_logs(brokers, inputs.broker_logs(brokers), inputs.observed.samples)
        return CheckerResult(zk.findings, zk.notes, zk.checked, {"zk_controller": zk.stats})


class FeatureLevelsChecker:
    """KIP-584/KIP-778 finalized feature levels from observer samples and the feature steps of
    process "upgrade" (checkers/families/features.py)."""

    name = "feature-levels"

    def needs(self, inputs: RunInputs) -> Needs:
        return Needs(frozenset({HISTORY, OBSERVED}), processes=(UPGRADE,))

    def check(self, inputs: RunInputs) -> CheckerResult:
        observed = inputs.observed
        rows = inputs.op_rows(processes=(UPGRADE,))
        n_samples = sum(isinstance(s.value.get("features"), dict) for s in observed.samples)
        n_steps = sum(1 for r in rows if r["f"] == "features" and r["type"] == "invoke")
        # Runs without features (before the observer read them) keep their results.json as it was.
        stats = (
            {"feature_samples": n_samples, "feature_steps": n_steps} if n_samples or n_steps else {}
        )
        notes = []
        if n_steps and not n_samples:
            notes.append(
                f"feature levels: {n_steps} feature steps, but no observer sample carries the "
                "nodes' features: not judged"
            )
        findings, pinned = features_and_notes(observed, rows)
        return CheckerResult(findings, notes + pinned, n_samples > 0, stats)


class EligibleLeadersChecker:
    """KIP-966's ELR: the committed partition records, each broker's DescribeTopicPartitions
    answers, and acknowledged sends against the committed ISR
    (checkers/families/elr/)."""

    name = "eligible-leaders"

    def needs(self, inputs: RunInputs) -> Needs:
        if not inputs.has_dir(METADATA_DIR):
            return Needs(frozenset({OBSERVED}))
        reads = {HISTORY, OBSERVED, CLUSTER, METADATA_LOGS, PLAN}
        return Needs(frozenset(reads), processes=FAULT_PROCESSES)

    def check(self, inputs: RunInputs) -> CheckerResult:
        samples = inputs.observed.samples
        if not inputs.has_dir(METADATA_DIR):
            r = check_elr(None, {}, None, samples, (), [])
        else:
            r = check_elr(
                inputs.metadata_logs,
                inputs.cluster,
                inputs.generator,
                samples,
                inputs.send_rows(values=True),
                inputs.op_rows(processes=FAULT_PROCESSES),
            )
        stats = {"elr": r.stats} if r.stats else {}
        return CheckerResult(r.findings, r.notes if r.checked else [], r.checked, stats)


class PreVoteChecker:
    """KIP-996's pre-vote under the five-voter one-way layout, from the controllers' Raft
    views in the observer's samples (checkers/families/prevote.py)."""

    name = "pre-vote"

    def needs(self, inputs: RunInputs) -> Needs:
        return Needs(frozenset({HISTORY, OBSERVED, CLUSTER}), processes=FAULT_PROCESSES)

    def check(self, inputs: RunInputs) -> CheckerResult:
        names = [n["name"] for n in inputs.cluster.get("nodes") or [] if "name" in n]
        r = check_prevote(inputs.observed.samples, inputs.op_rows(processes=FAULT_PROCESSES), names)
        return CheckerResult(r.findings, r.notes, r.checked)


class QuorumMembershipChecker:
    """Controller membership changes (KIP-853) against the voter sets and leaders observed
    after them (checkers/families/quorum_membership.py)."""

    name = "quorum-membership"

    def needs(self, inputs: RunInputs) -> Needs:
        return Needs(frozenset({HISTORY, OBSERVED}), processes=(UPGRADE,))

    def check(self, inputs: RunInputs) -> CheckerResult:
        samples = inputs.observed.samples
        data = membership_input(inputs.op_rows(processes=(UPGRADE,)), samples)
        if not data.changes:
            # Runs without membership changes keep their results.json as it was.
            return CheckerResult()
        stats = {"membership_changes": len(data.changes)}
        return CheckerResult(check_membership(data, samples), checked=True, stats=stats)


class ConsumerGroupsChecker:
    """Partition ownership and committed offsets of the run's consumer group, from the
    subscribers' rebalance events and commits (checkers/families/groups.py)."""

    name = "consumer-groups"

    def _fs(self, inputs: RunInputs) -> tuple[str, ...]:
        # Without op fields only the subscribe ops are read (are there subscribers to say were
        # not judged?); they are read whole for the queue's resets already.
        return GROUP_FS if inputs.has_op_fields() else SUBSCRIBE_FS

    def needs(self, inputs: RunInputs) -> Needs:
        return Needs(frozenset({HISTORY}), fs=self._fs(inputs))

    def check(self, inputs: RunInputs) -> CheckerResult:
        # A batch of rows at a time: what it keeps of each completed op (its GroupOp, reads
        # included) is far less than the op's row as a dict.
        groups = check_groups(OpRows(inputs.op_table(fs=self._fs(inputs))))
        return CheckerResult(groups.findings, groups.notes, groups.checked, groups.stats)


class ForeignRecordsChecker:
    """Records of another topic than the run's handed to a consumer
    (checkers/families/foreign.py)."""

    name = "foreign-records"

    def needs(self, inputs: RunInputs) -> Needs:
        # Histories without op fields (every one written before the clients recorded them, and
        # Jepsen's) have nothing to read: not even their polls are decoded whole.
        if not inputs.has_op_fields():
            return Needs()
        return Needs(frozenset({HISTORY}), fs=FOREIGN_FS)

    def check(self, inputs: RunInputs) -> CheckerResult:
        if not inputs.has_op_fields():
            return CheckerResult()
        # Only rows carrying op fields can hold foreign records: the rest are never decoded.
        found, n = foreign_reads(OpRows(with_fields(inputs.op_table(fs=FOREIGN_FS))))
        return CheckerResult(found, checked=True, stats={"foreign_record_ops": n} if n else {})


class FencedAcksChecker:
    """Acknowledgements a fenced transactional producer was given after its successor's first
    commit (checkers/families/fenced_acks.py), for runs with per-slot transactional ids."""

    name = "fenced-acks"

    def needs(self, inputs: RunInputs) -> Needs:
        slots, _ = generator_slots(inputs.generator)
        if slots is None:
            return Needs(frozenset({PLAN}))
        return Needs(frozenset({HISTORY, PLAN}), fs=ACK_FS, processes=(NEMESIS,))

    def check(self, inputs: RunInputs) -> CheckerResult:
        # Why a run is not judged is the queue checker's note (fenced-producer-read): the same
        # plans decide both rules.
        slots, _ = generator_slots(inputs.generator)
        if slots is None:
            return CheckerResult()
        rows = OpRows(inputs.op_table(fs=ACK_FS))
        found, n = fenced_acks(rows, slots)
        # The ack rows are read a second time only in runs with a hijack (nemesis/client.py).
        nemesis = OpRows(inputs.op_table(processes=(NEMESIS,)))
        hijacks = hijacks_of(nemesis)
        hijacked = hijacked_acks(rows, hijacks, slots)
        # Commits the client held past the transaction's timeout (nemesis/client.py).
        zombies, held, overlapped = zombie_commits(rows, nemesis)
        stats = {
            "transactional_acks": n,
            **({"hijacks": len(hijacks)} if hijacks else {}),
            **({"held_commits_judged": held} if held else {}),
            **({"held_commits_not_judged": overlapped} if overlapped else {}),
        }
        return CheckerResult(found + hijacked + zombies, checked=n > 0 or held > 0, stats=stats)


class DurabilityChecker:
    """Lost acknowledged writes judged against Kafka's durability model after power losses, and
    the in-sync replicas' final logs compared (checkers/families/durability/). It replaces the
    queue findings it judges (CheckerResult.replaces)."""

    name = "durability"

    def needs(self, inputs: RunInputs) -> Needs:
        reads = {HISTORY, PLAN, CLUSTER}
        if inputs.has_dir(DATA_LOGS_DIR):
            reads.add(DATA_LOGS)
        if inputs.has_dir(METADATA_DIR):
            reads.add(METADATA_LOGS)
        return Needs(frozenset(reads), processes=(NEMESIS,), after=("queue", "data-logs"))

    def check(self, inputs: RunInputs) -> CheckerResult:
        topic = (inputs.generator or {}).get("topic")
        if not isinstance(topic, str):
            return CheckerResult()  # not the queue workload (or no plan: a Jepsen history)
        header = inputs.header
        rows = inputs.op_rows(processes=(NEMESIS,))
        started = header.get("started_wall")
        names = [n["name"] for n in inputs.cluster.get("nodes") or [] if "name" in n]
        faults = disk_faults(rows, started if isinstance(started, (int, float)) else None, names)
        has_data = inputs.has_dir(DATA_LOGS_DIR)
        if not faults and not has_data:
            return CheckerResult()
        notes = []
        try:
            settings = settings_of(header, inputs.generator)
        except SettingsError as e:
            # Judged by nobody rather than against settings the run may not have had.
            notes.append(f"durability: lost writes not judged: {e}")
            faults = []
            settings = settings_of({}, inputs.generator)
        cluster = inputs.cluster
        metadata = inputs.metadata_logs if inputs.has_dir(METADATA_DIR) else None
        data = inputs.data_logs if has_data else None
        power = any(f.power for f in faults)
        healed = heal_end(rows)
        run = RunView(
            settings,
            faults,
            topic,
            cluster,
            read_partitions(metadata, cluster, topic),
            inputs.result("queue").findings + inputs.result("data-logs").findings,
            inputs.history.queue_ops,
            inputs.sends if power and data is not None else None,
            data,
            inputs.run_dir / DATA_LOGS_DIR if has_data else None,
            FinalReads.from_parquet(inputs.parquet, healed)
            if data is not None and healed is not None
            else None,
            # The records polled: with a power loss, when each lost write was first seen lost;
            # without one, looked for in every final log.
            inputs.parquet if data is not None or power else None,
            inputs.sends.value if data is not None and not power else None,
        )
        r = check_durability(run)
        stats = {"durability": r.stats} if r.stats else {}
        return CheckerResult(r.findings, notes + r.notes, r.checked, stats, replaces=r.replaces)


class DiskCorruptionChecker:
    """What Kafka did with a file a disk corrupt step damaged: detected it, or served it
    (checkers/families/disk/); reads the queue checker's findings, and replaces those a damage
    served (CheckerResult.replaces)."""

    name = "disk-corruption"

    def _fs(self, inputs: RunInputs) -> tuple[str, ...]:
        # The reads' unreadable records and errors, where op fields exist: the same rows the
        # foreign-records and group checks read whole.
        return DISK_FS + (READ_FS if inputs.has_op_fields() else ())

    def needs(self, inputs: RunInputs) -> Needs:
        return Needs(frozenset({HISTORY, PLAN}), fs=self._fs(inputs), after=("queue",))

    def check(self, inputs: RunInputs) -> CheckerResult:
        fs = self._fs(inputs)
        reads = OpRows(telling_reads(inputs.op_table(fs=READ_FS))) if READ_FS[0] in fs else ()
        judged = judge_disk(
            inputs.op_rows(fs=DISK_FS),
            inputs.result("queue").findings,
            reads,
            (inputs.generator or {}).get("topic"),
            inputs.header.get("client"),
        )
        return CheckerResult(
            judged.findings, judged.notes, judged.checked, judged.stats, replaces=judged.replaces
        )


class ShareChecker:
    """KIP-932's share groups (checkers/families/share/), from the share workload's ops, the
    sends, transactions and final log read of a share run (header `share`), and the nemesis's
    ops: finality, at-least-once against the drain, lock exclusivity, delivery counts, one
    poll's order, read_committed, start offsets."""

    name = "share"

    def needs(self, inputs: RunInputs) -> Needs:
        # Only a share run's sends and nemesis ops are read whole: a queue run's may be many.
        if SHARE_FIELD not in inputs.header:
            return Needs(frozenset({HISTORY}), fs=SHARE_OP_FS)
        return Needs(frozenset({HISTORY}), fs=SHARE_FS, processes=SHARE_PROCESSES)

    def check(self, inputs: RunInputs) -> CheckerResult:
        if SHARE_FIELD not in inputs.header:
            rows = inputs.op_rows(fs=SHARE_OP_FS)
        else:
            rows = inputs.op_rows(fs=SHARE_FS) + [
                r for r in inputs.op_rows(processes=SHARE_PROCESSES) if r["f"] not in SHARE_FS
            ]
        if not any(r["f"] in SHARE_OP_FS for r in rows):
            return CheckerResult()
        found, stats = check_share_run(rows, inputs.header, str(inputs.parquet))
        return CheckerResult(found, checked=True, stats=stats)


class CollectionChecker:
    """What the run's final collection could not collect (collection.json): a note each, and an
    unknown finding naming the checks that needed it (checkers/families/collection.py)."""

    name = "collection"

    def needs(self, inputs: RunInputs) -> Needs:
        return Needs()

    def check(self, inputs: RunInputs) -> CheckerResult:
        findings, notes = collection_failures(read_failures(inputs.run_dir))
        return CheckerResult(findings, notes)


class LivenessChecker:
    """Liveness verdicts (checkers/families/liveness/): progress while a majority is healthy,
    recovery after the last heal, brokers and controllers back after it, leaderless partitions
    with a live ISR member, fatal log lines. A result class of its own: its findings are
    tolerated unless the run option --liveness fail says otherwise, it judges nothing of the
    safety verdict (`checked` stays False), and `outputs["liveness"]` is results.json's
    liveness block (checkers/api.py)."""

    name = "liveness"

    def needs(self, inputs: RunInputs) -> Needs:
        reads = {HISTORY, CLUSTER, PLAN, BROKER_LOGS}
        if inputs.has_dir(METADATA_DIR):
            reads.add(METADATA_LOGS)
        fs = GROUP_FS if inputs.has_op_fields() else ()
        return Needs(frozenset(reads), fs=fs, processes=LIVENESS_PROCESSES)

    def check(self, inputs: RunInputs) -> CheckerResult:
        # Every client op, a row group at a time, only its times, type and indices: a
        # pipelined run's millions of sends are held as a few numpy columns.
        ops = client_ops(op_row_groups(inputs.parquet, [*OP_COLUMNS, "time"]))
        committed = None
        read = inputs.metadata_logs if inputs.has_dir(METADATA_DIR) else None
        if read is not None and read.error is None and read.voters:
            committed = committed_of_cluster(read.voters, inputs.cluster)
        given = LivenessInputs(
            inputs.cluster,
            inputs.header,
            inputs.op_rows(processes=LIVENESS_PROCESSES),
            ops,
            committed,
            inputs.run_dir,
            read_options(inputs.run_dir),
            OpRows(inputs.op_table(fs=GROUP_FS)) if inputs.has_op_fields() else None,
        )
        result = check_liveness(given)
        # The client ops and committed records go on to the coverage counts (read once).
        outputs = {"liveness": result.block, "ops": ops, "committed": committed}
        return CheckerResult(result.findings, result.notes, outputs=outputs)


class CoverageChecker:
    """Coverage (checkers/families/coverage/, the table checkers/core/states.py): the
    interesting states the run reached and how often, for results.json's `coverage` block. It
    finds nothing and judges nothing; it reads the liveness checker's client ops and committed
    records, and the clients' errors (one narrow column) for fencing."""

    name = "coverage"

    def needs(self, inputs: RunInputs) -> Needs:
        fs = GROUP_FS if inputs.has_op_fields() else ()
        reads = frozenset({HISTORY, CLUSTER, PLAN})
        return Needs(reads, fs=fs, processes=LIVENESS_PROCESSES, after=("liveness",))

    def check(self, inputs: RunInputs) -> CheckerResult:
        live = inputs.result("liveness").outputs
        fenced = sum(
            sum(is_fencing_error(e) for e in part.column("error").to_pylist() if e)
            for part in op_row_groups(inputs.parquet, ["error"])
        )
        names = [n["name"] for n in inputs.cluster.get("nodes") or [] if "name" in n]
        started = inputs.header.get("started_wall")
        coverage = count_states(
            inputs.op_rows(processes=LIVENESS_PROCESSES),
            names,
            live.get("ops") or {},
            fenced,
            OpRows(inputs.op_table(fs=GROUP_FS)) if inputs.has_op_fields() else None,
            live.get("committed"),
            float(started) if isinstance(started, (int, float)) else None,
            read_must_reach(inputs.run_dir),
        )
        notes = (
            [f"coverage: the run did not reach {', '.join(coverage.missing)} (--must-reach): it "
             "did not exercise its scenario"]
            if coverage.missing
            else []
        )  # fmt: skip
        return CheckerResult(notes=notes, outputs={"coverage": coverage.to_dict()})


REGISTRY: tuple[Checker, ...] = (
    CollectionChecker(),
    QueueChecker(),
    CyclesChecker(),
    KraftMetadataChecker(),
    MigrationChecker(),
    AdminChecker(),
    DataLogsChecker(),
    MetadataLogsChecker(),
    ZkControllerChecker(),
    FeatureLevelsChecker(),
    EligibleLeadersChecker(),
    PreVoteChecker(),
    QuorumMembershipChecker(),
    ConsumerGroupsChecker(),
    ForeignRecordsChecker(),
    FencedAcksChecker(),
    DurabilityChecker(),
    ShareChecker(),
    DiskCorruptionChecker(),
    LivenessChecker(),
    CoverageChecker(),
)
