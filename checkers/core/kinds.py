"""Every anomaly kind a checker can report: the rule it rests on, when it is tolerated, and which
checker (checkers/registry.py) reports it.

Each kind is spelled out whole here, as in the code that reports it, so that `grep` finds both.
A kind's outcome is given per mode of the history (Tolerance): kchaos's own histories, the
same when a consumer subscribes, and Jepsen's histories (history/edn.py). Where it depends on
the finding's evidence rather than its kind, DEPENDS says so and `when` says on what. The
tolerances themselves are decided where kinds are tolerated (queue/policy.py: Jepsen's
allowed-error-types; and, for DEPENDS, the module named in `when`); this table states them, and
tests/unit/checkers/test_kinds.py holds the two together, finds every kind the code reports
(by reading the source and by running the checkers over the test histories), and every kind
named in docs/checkers.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from checkers.families import (
    admin,
    collection,
    features,
    fenced_acks,
    foreign,
    groups,
    metadata,
    migration,
    prevote,
    quorum_membership,
)
from checkers.families.data_log import acks as data_acks
from checkers.families.data_log import fencing as data_fencing
from checkers.families.data_log import resent as data_resent
from checkers.families.disk import corruption as disk_corruption
from checkers.families.durability import lost as durability_lost
from checkers.families.durability import polled as durability_polled
from checkers.families.durability import replicas as durability_replicas
from checkers.families.elr import rules as elr_rules
from checkers.families.elr import watermark as elr_watermark
from checkers.families.liveness import assignment as live_assignment
from checkers.families.liveness import fatal as live_fatal
from checkers.families.liveness import offline as live_offline
from checkers.families.liveness import progress as live_progress
from checkers.families.liveness import registration as live_registration
from checkers.families.metadata_log import applied, lease, liveness, observers, rules
from checkers.families.metadata_log import fencing as log_fencing
from checkers.families.queue.rules import producer_order
from checkers.families.share import at_least_once as share_alo
from checkers.families.share import committed as share_committed
from checkers.families.share import counts as share_counts
from checkers.families.share import finality as share_finality
from checkers.families.share import locks as share_locks
from checkers.families.share import ordering as share_ordering
from checkers.families.share import start_offsets as share_start
from checkers.families.zk_controller import rules as zk_rules

# Outcomes: a failure (the run is invalid), tolerated (reported, the run stays valid), unknown
# (the run cannot be judged: exit 2 unless something fails), or depending on the evidence.
FAILS, TOLERATED, UNKNOWN, DEPENDS = "fails", "tolerated", "unknown", "depends"


@dataclass(frozen=True)
class Tolerance:
    kchaos: str  # in kchaos's own histories, no consumer subscribing
    subscribe: str  # in a history where some consumer subscribes
    jepsen: str  # in Jepsen's histories (header consumer_after_abort "jepsen"), no subscribe
    when: str = ""  # for DEPENDS: what decides, and where


NEVER = Tolerance(FAILS, FAILS, FAILS)
ALWAYS = Tolerance(TOLERATED, TOLERATED, TOLERATED)
CANNOT_TELL = Tolerance(UNKNOWN, UNKNOWN, UNKNOWN)
UNDER_SUBSCRIBE = Tolerance(FAILS, TOLERATED, FAILS)
WW_CYCLE = (
    "tolerated when the cycle needs a ww edge (a ww edge orders sends, not commits), a failure "
    "over wr (process, realtime) edges alone; cycles.py SPECS"
)


@dataclass(frozen=True)
class Kind:
    name: str
    checkers: tuple[str, ...]  # the registry names of the checkers that report it
    rule: str  # the sentence it rests on
    source: str  # where that sentence is from: a KIP, or the Jepsen function that checks it
    tolerance: Tolerance


QUEUE, CYCLES, KRAFT = ("queue",), ("cycles",), ("kraft-metadata",)
LOGS, DATA, ADMIN, ZK = ("metadata-logs",), ("data-logs",), ("admin",), ("zk-controller",)
FEATURES = ("feature-levels",)
QUORUM = ("quorum-membership",)
ELR = ("eligible-leaders",)
PREVOTE = ("pre-vote",)
DISK = ("disk-corruption",)
GROUPS, FOREIGN, ACKS = ("consumer-groups",), ("foreign-records",), ("fenced-acks",)
DURABILITY = ("durability",)
SHARE = ("share",)
LIVENESS = ("liveness",)
# Every liveness finding (a result class of its own): tolerated unless the run says otherwise.
LIVENESS_OUTCOME = Tolerance(
    DEPENDS,
    DEPENDS,
    DEPENDS,
    "tolerated (a liveness finding, reported in results.json's liveness block) unless the "
    "run's plan.json spec has liveness: fail (run option --liveness fail), then a failure; "
    "liveness/check.py TOLERATED",
)
JEPSEN_KAFKA = "jepsen.tests.kafka/"

KINDS: tuple[Kind, ...] = (
    # -- queue (checkers/families/queue/): Jepsen's Kafka checker ----------------------------------
    Kind(
        "lost-write",
        QUEUE,
        "a send that certainly happened (ok, or info with another of its sends polled), at or "
        "below the highest offset any poll of its key returned, is returned by some poll",
        JEPSEN_KAFKA + "lost-write-cases",
        NEVER,
    ),
    Kind(
        "unseen",
        QUEUE + DURABILITY,
        "an acknowledged send is eventually returned by some poll; kchaos's final polls are "
        "bounded in time, so one nobody read past may be lost or not yet read",
        JEPSEN_KAFKA + "unseen",
        Tolerance(UNKNOWN, UNKNOWN, FAILS),
    ),
    Kind(
        "duplicate",
        QUEUE,
        "a value sent once sits at one offset: the partition holds no duplicate record",
        JEPSEN_KAFKA + "duplicate-cases",
        NEVER,
    ),
    Kind(
        "inconsistent-offsets",
        QUEUE,
        "a partition offset names exactly one record",
        JEPSEN_KAFKA + "version-orders (:errors)",
        NEVER,
    ),
    Kind(
        "G1a",
        QUEUE,
        "an aborted write must never be visible: no ok poll returns the value of a failed send",
        JEPSEN_KAFKA + "g1a-cases",
        NEVER,
    ),
    Kind(
        "precommitted-read",
        QUEUE,
        "a read_committed consumer must never see a record before its transaction commits: no "
        "op polls its own send",
        JEPSEN_KAFKA + "precommitted-read-cases",
        NEVER,
    ),
    Kind(
        "garbage-read",
        QUEUE,
        "a poll returns only values some operation sent to that key",
        "kchaos; Jepsen's graph builders throw :no-writer-of-value here ("
        + JEPSEN_KAFKA
        + "wr-graph)",
        NEVER,
    ),
    Kind(
        "poll-skip",
        QUEUE,
        "a consumer that kept its partition reads on from where its last poll ended",
        JEPSEN_KAFKA + "poll-skip+nonmonotonic-cases",
        UNDER_SUBSCRIBE,
    ),
    Kind(
        "nonmonotonic-poll",
        QUEUE,
        "a consumer that kept its partition moves forward only",
        JEPSEN_KAFKA + "poll-skip+nonmonotonic-cases",
        UNDER_SUBSCRIBE,
    ),
    Kind(
        "nonmonotonic-send",
        QUEUE,
        "a producer's next send to a partition lands after its last one",
        JEPSEN_KAFKA + "nonmonotonic-send-cases",
        NEVER,
    ),
    Kind(
        "int-poll-skip",
        QUEUE,
        "within one op a partition is read in offset order, without gaps",
        JEPSEN_KAFKA + "int-poll-skip+nonmonotonic-cases",
        NEVER,
    ),
    Kind(
        "int-nonmonotonic-poll",
        QUEUE,
        "within one op a partition is read in offset order",
        JEPSEN_KAFKA + "int-poll-skip+nonmonotonic-cases",
        NEVER,
    ),
    Kind(
        "int-send-skip",
        QUEUE,
        "Kafka does not isolate writes: other producers' sends interleave with a transaction's "
        "sends to the same partition (Jepsen allows it)",
        JEPSEN_KAFKA + "int-send-skip+nonmonotonic-cases; allowed-error-types",
        ALWAYS,
    ),
    Kind(
        "int-nonmonotonic-send",
        QUEUE,
        "within one op a partition is written in offset order",
        JEPSEN_KAFKA + "int-send-skip+nonmonotonic-cases",
        NEVER,
    ),
    Kind(
        "fenced-producer-read",
        QUEUE,
        data_fencing.RULE,
        "KIP-98 (InitPidRequest); kchaos, from the history alone",
        NEVER,
    ),
    Kind(
        "read-from-other-partition",
        QUEUE,
        "a poll of a partition returns only records written to that partition: a value sent "
        "to one key (partition) is never read from another",
        "kchaos; values are unique in a kchaos run, so the send of the value read is the "
        "record's writer (Jepsen's histories: garbage-read)",
        NEVER,
    ),
    Kind(
        "producer-nonmonotonic-send",
        QUEUE,
        producer_order.RULE,
        "KIP-98 (idempotent producer); Kafka's and librdkafka's producer configuration docs; "
        "kchaos, pipelined histories only",
        NEVER,
    ),
    # -- cycles (checkers/families/cycles.py): Elle's names ----------------------------------------
    Kind(
        "G0",
        CYCLES,
        "Kafka does not isolate writes: a cycle of ww edges is allowed",
        JEPSEN_KAFKA + "allowed-error-types; elle",
        ALWAYS,
    ),
    Kind(
        "G0-process",
        CYCLES,
        "as G0, with process edges",
        JEPSEN_KAFKA + "allowed-error-types; elle",
        ALWAYS,
    ),
    Kind(
        "G0-realtime",
        CYCLES,
        "as G0, with realtime edges",
        JEPSEN_KAFKA + "allowed-error-types; elle",
        ALWAYS,
    ),
    Kind(
        "G1c",
        CYCLES,
        "under read_committed a wr edge means the writer committed before the reader did, so no "
        "cycle of wr edges can happen",
        "elle (G1c); " + JEPSEN_KAFKA + "allowed-error-types with :ww-deps",
        Tolerance(DEPENDS, DEPENDS, TOLERATED, WW_CYCLE),
    ),
    Kind(
        "G1c-process",
        CYCLES,
        "as G1c, with process edges",
        "elle (G1c-process); " + JEPSEN_KAFKA + "allowed-error-types with :ww-deps",
        Tolerance(DEPENDS, DEPENDS, TOLERATED, WW_CYCLE),
    ),
    Kind(
        "G1c-realtime",
        CYCLES,
        "as G1c, with realtime edges",
        "elle (G1c-realtime); " + JEPSEN_KAFKA + "allowed-error-types with :ww-deps",
        Tolerance(DEPENDS, DEPENDS, TOLERATED, WW_CYCLE),
    ),
    # -- KRaft metadata from observer samples (checkers/families/metadata.py, migration.py) --------
    Kind("split-brain", KRAFT, metadata.RULES["split-brain"], "KIP-631, KIP-500", NEVER),
    Kind(
        "multiple-active-controllers",
        KRAFT,
        metadata.RULES["multiple-active-controllers"],
        "KIP-500, KIP-631",
        NEVER,
    ),
    Kind("epoch-regression", KRAFT, metadata.RULES["epoch-regression"], "KIP-631", NEVER),
    Kind(
        "high-watermark-regression",
        KRAFT,
        metadata.RULES["high-watermark-regression"],
        "KIP-631",
        NEVER,
    ),
    Kind("migration-state-regression", KRAFT + LOGS, migration.RULE, "KIP-866", NEVER),
    Kind("migration-state-skip", KRAFT + LOGS, migration.SKIP_RULE, "KIP-866", NEVER),
    # -- admin workload (checkers/families/admin.py) -----------------------------------------------
    Kind("lost-topic", ADMIN, admin.RULES["lost-topic"], "KIP-500, KIP-631", NEVER),
    Kind("lost-topic-deletion", ADMIN, admin.RULES["lost-topic-deletion"], "KIP-500", NEVER),
    Kind(
        "failed-create-visible",
        ADMIN,
        admin.RULES["failed-create-visible"],
        "KIP-631",
        Tolerance(
            DEPENDS,
            DEPENDS,
            DEPENDS,
            "tolerated when the create failed with INVALID_REPLICATION_FACTOR, which can answer "
            "a retry of a create that succeeded; else a failure; admin.py RETRIED_CREATE",
        ),
    ),
    Kind("phantom-topic", ADMIN, admin.RULES["phantom-topic"], "kchaos", NEVER),
    Kind("cluster-id-divergence", ADMIN, admin.RULES["cluster-id-divergence"], "KIP-631", NEVER),
    # -- data logs (checkers/families/data_log/) ---------------------------------------------------
    Kind("fenced-producer-commit", DATA, data_fencing.RULE, "KIP-98", NEVER),
    Kind("fenced-producer-write", DATA, data_fencing.RULE, "KIP-98", NEVER),
    Kind(data_acks.KIND, DATA, data_acks.RULE, "kchaos", NEVER),
    Kind(data_resent.KIND, DATA, data_resent.RULE, "KIP-98", NEVER),
    Kind(
        "data-log-unreadable",
        DATA,
        "a decoded data log that cannot be parsed says nothing",
        "kchaos",
        CANNOT_TELL,
    ),
    # -- metadata logs (checkers/families/metadata_log/) -------------------------------------------
    Kind(
        "metadata-divergence",
        LOGS,
        rules.RULES["metadata-divergence"],
        "KIP-631, KIP-500",
        NEVER,
    ),
    Kind(
        "feature-level-divergence",
        LOGS,
        rules.RULES["feature-level-divergence"],
        "KIP-584",
        NEVER,
    ),
    Kind(
        "broker-epoch-regression",
        LOGS,
        rules.RULES["broker-epoch-regression"],
        "KIP-631, KIP-380",
        NEVER,
    ),
    Kind(
        "leader-epoch-regression",
        LOGS,
        rules.RULES["leader-epoch-regression"],
        "KIP-631, KIP-584",
        NEVER,
    ),
    Kind("deposed-leader-write", LOGS, log_fencing.RULE, "KIP-500, KIP-631", NEVER),
    Kind("applied-uncommitted-metadata", LOGS, applied.RULE, "KIP-631", NEVER),
    Kind("broker-metadata-divergence", LOGS, observers.RULE, "KIP-500", NEVER),
    Kind(
        "lease-violation",
        LOGS,
        lease.RULE,
        "KIP-631",
        Tolerance(
            DEPENDS,
            DEPENDS,
            DEPENDS,
            "tolerated when the send's write is in a final log (the data logs attribute it) and "
            "no failing finding cites the op; a failure when a failing data finding cites it, "
            "or, unattributed, a failing queue finding does; metadata_log/lease.py TOLERATED",
        ),
    ),
    Kind(
        "metadata-log-unknown",
        LOGS,
        "nothing in the metadata logs is proven committed (Raft's commit rule): divergence and "
        "fencing cannot be judged",
        "Raft (figure 8); kchaos",
        CANNOT_TELL,
    ),
    Kind(
        "metadata-log-unreadable",
        LOGS,
        "a decoded metadata log that cannot be parsed says nothing",
        "kchaos",
        CANNOT_TELL,
    ),
    # -- ZooKeeper-mode controller epochs (checkers/families/zk_controller/) -----------------------
    Kind(
        "stale-controller-epoch-accepted",
        ZK,
        zk_rules.RULES["stale-controller-epoch-accepted"],
        "KIP-866",
        NEVER,
    ),
    Kind(
        "controller-epoch-reused",
        ZK,
        zk_rules.RULES["controller-epoch-reused"],
        "KIP-866",
        NEVER,
    ),
    Kind(
        "zk-controller-epochs-unknown",
        ZK,
        "no controller election and no broker acting on a controller request in the brokers' "
        "logs: controller epochs cannot be judged",
        "kchaos",
        CANNOT_TELL,
    ),
    # -- KIP-584/KIP-778 feature levels (checkers/families/features.py) ----------------------------
    Kind(
        "feature-epoch-regressed",
        FEATURES,
        features.RULES["feature-epoch-regressed"],
        "KIP-584",
        NEVER,
    ),
    Kind(
        "feature-levels-diverged",
        FEATURES,
        features.RULES["feature-levels-diverged"],
        "KIP-584",
        NEVER,
    ),
    Kind("feature-update-lost", FEATURES, features.RULES["feature-update-lost"], "KIP-584", NEVER),
    Kind(
        "feature-refused-took-effect",
        FEATURES,
        features.RULES["feature-refused-took-effect"],
        "KIP-584, KIP-778",
        NEVER,
    ),
    Kind(
        "feature-update-partial",
        FEATURES,
        features.RULES["feature-update-partial"],
        "KIP-584; KAFKA-16308 (Kafka 4.0)",
        NEVER,
    ),
    Kind(
        "static-quorum-kraft-version-changed",
        FEATURES,
        features.RULES["static-quorum-kraft-version-changed"],
        "KIP-853; Kafka 4.1 (KAFKA-16538)",
        NEVER,
    ),
    Kind(
        "unsupported-level-served",
        FEATURES,
        features.RULES["unsupported-level-served"],
        "KIP-778, KIP-584",
        NEVER,
    ),
    # -- KIP-966's Eligible Leader Replicas (checkers/families/elr/) ------------------------------
    Kind("elr-isr-overlap", ELR, elr_rules.RULES["elr-isr-overlap"], "KIP-966", NEVER),
    Kind(
        "ineligible-leader-elected",
        ELR,
        elr_rules.RULES["ineligible-leader-elected"],
        "KIP-966; KIP-631",
        NEVER,
    ),
    Kind("leader-election-order", ELR, elr_rules.RULES["leader-election-order"], "KIP-966", NEVER),
    Kind(
        "unclean-leader-election",
        ELR,
        elr_rules.RULES["unclean-leader-election"],
        "Kafka's unclean.leader.election.enable; KIP-966",
        NEVER,
    ),
    Kind("hw-advanced-below-min-isr", ELR, elr_watermark.RULE, "KIP-966", NEVER),
    # -- KIP-996's pre-vote (checkers/families/prevote.py) -----------------------------------------
    Kind("leadership-unstable", PREVOTE, prevote.RULES["leadership-unstable"], "KIP-996", NEVER),
    Kind(
        "election-livelock", PREVOTE, prevote.RULES["election-livelock"], "KIP-996; KIP-595", NEVER
    ),
    # -- controller membership (checkers/families/quorum_membership.py) ----------------------------
    Kind(
        "removed-voter-led",
        QUORUM,
        quorum_membership.RULES["removed-voter-led"],
        "KIP-853",
        NEVER,
    ),
    Kind(
        "membership-change-lost",
        QUORUM,
        quorum_membership.RULES["membership-change-lost"],
        "KIP-853, KIP-595",
        NEVER,
    ),
    # -- consumer groups, foreign records, fenced acknowledgements --------------------------
    Kind(
        "group-double-owner",
        GROUPS,
        groups.OWNER_RULE,
        "KIP-848 (reconciliation); Kafka's ConsumerRebalanceListener; kchaos, from the "
        "subscribers' rebalance events",
        NEVER,
    ),
    Kind(
        "committed-offset-regressed",
        GROUPS,
        groups.COMMIT_RULE,
        "KIP-848 (member epoch fencing of offset commits); the classic protocol's generation "
        "(CommitFailedException); kchaos",
        NEVER,
    ),
    Kind("read-from-other-topic", FOREIGN, foreign.RULE, "kchaos", NEVER),
    Kind("fenced-producer-ack", ACKS, fenced_acks.RULE, "KIP-98 (InitPidRequest); KIP-890", NEVER),
    Kind("hijacked-producer-ack", ACKS, fenced_acks.HIJACK_RULE, "KIP-98 (InitPidRequest)", NEVER),
    Kind(
        "zombie-commit",
        ACKS,
        fenced_acks.ZOMBIE_RULE,
        "producer javadoc (transaction.timeout.ms); KIP-98",
        NEVER,
    ),
    # -- share groups (checkers/families/share/) ----------------------------------------------
    Kind(
        "redelivered-after-final-ack",
        SHARE,
        share_finality.RULE,
        "KIP-932; AcknowledgeType (ACCEPT, REJECT)",
        NEVER,
    ),
    Kind(
        "share-never-delivered", SHARE, share_alo.RULES["share-never-delivered"], "KIP-932", NEVER
    ),
    Kind(
        "share-archived-before-limit",
        SHARE,
        share_alo.RULES["share-archived-before-limit"],
        "KIP-932 (delivery count)",
        ALWAYS,
    ),
    Kind("share-unsettled", SHARE, share_alo.RULES["share-unsettled"], "KIP-932", CANNOT_TELL),
    Kind(
        "share-lock-overlap",
        SHARE,
        share_locks.RULES["share-lock-overlap"],
        "KafkaShareConsumer (acquisition lock); KIP-932",
        NEVER,
    ),
    Kind(
        "share-ack-after-reacquired",
        SHARE,
        share_locks.RULES["share-ack-after-reacquired"],
        "KIP-932 (InvalidRecordStateException)",
        NEVER,
    ),
    Kind(
        "share-ack-ok-after-final",
        SHARE,
        share_locks.RULES["share-ack-ok-after-final"],
        "KIP-932 (InvalidRecordStateException); SharePartition.acknowledge",
        ALWAYS,
    ),
    Kind(
        "share-delivery-count-above-limit",
        SHARE,
        share_counts.RULES["share-delivery-count-above-limit"],
        "KIP-932; group.share.delivery.count.limit",
        NEVER,
    ),
    Kind(
        "share-delivery-count-invalid",
        SHARE,
        share_counts.RULES["share-delivery-count-invalid"],
        "KIP-932",
        NEVER,
    ),
    Kind(
        "share-poll-offsets-not-increasing",
        SHARE,
        share_ordering.RULE,
        "KafkaShareConsumer (ConsumerRecords order)",
        NEVER,
    ),
    Kind(
        "share-aborted-read",
        SHARE,
        share_committed.RULES["share-aborted-read"],
        "KafkaShareConsumer (read_committed); KIP-932",
        NEVER,
    ),
    Kind(
        "share-open-transaction-read",
        SHARE,
        share_committed.RULES["share-open-transaction-read"],
        "KafkaShareConsumer (read_committed); KIP-932",
        NEVER,
    ),
    Kind("share-start-offset-regressed", SHARE, share_start.RULE, "KIP-932 (SPSO)", NEVER),
    # -- lease liveness (checkers/families/metadata_log/liveness.py) -------------------------------
    # -- durability (checkers/families/durability/): power losses, per-replica final logs ------
    Kind(
        "lost-write-power-loss-documented",
        DURABILITY,
        durability_lost.RULES["lost-write-power-loss-documented"],
        "Kafka's design (Replication; Unclean leader election); flush.messages; KIP-966",
        ALWAYS,
    ),
    Kind(
        "lost-write-despite-fsync",
        DURABILITY,
        durability_lost.RULES["lost-write-despite-fsync"],
        "flush.messages (TopicConfig); min.insync.replicas",
        NEVER,
    ),
    Kind(
        "lost-write-too-few-power-losses",
        DURABILITY,
        durability_lost.RULES["lost-write-too-few-power-losses"],
        "KIP-966 (MinISR-1 tolerance); Kafka's design (Replication)",
        NEVER,
    ),
    Kind(
        "replica-missing-committed-records",
        DURABILITY,
        durability_replicas.RULES["replica-missing-committed-records"],
        "Kafka's design (Replication)",
        NEVER,
    ),
    Kind(
        "replica-divergence",
        DURABILITY,
        durability_replicas.RULES["replica-divergence"],
        "Kafka's design (Replicated Logs)",
        NEVER,
    ),
    Kind(
        "committed-record-not-served",
        DURABILITY,
        durability_replicas.RULES["committed-record-not-served"],
        "Kafka's design (Replication)",
        NEVER,
    ),
    Kind(
        "lost-committed-record",
        DURABILITY,
        durability_polled.RULE,
        "Kafka's design (Replication); unclean.leader.election.enable",
        Tolerance(
            DEPENDS,
            DEPENDS,
            DEPENDS,
            "tolerated when unclean leader elections were allowed (the header or a committed "
            "ConfigRecord), a failure otherwise; durability/polled.py",
        ),
    ),
    Kind("dead-broker-not-fenced", LOGS, liveness.DEAD_RULE, "KIP-631", NEVER),
    Kind(
        "spurious-fence",
        LOGS,
        liveness.SPURIOUS_RULE,
        "KIP-631",
        Tolerance(
            DEPENDS,
            DEPENDS,
            DEPENDS,
            "tolerated (an availability finding: Kafka kept its safety) unless the run's "
            "plan.json spec has availability: fail (run option --availability fail), then a "
            "failure; metadata_log/liveness.py SPURIOUS_TOLERATED",
        ),
    ),
    # -- disk corruption (checkers/families/disk/) ------------------------------------------------
    Kind(
        "corruption-served",
        DISK,
        disk_corruption.SERVED_RULE,
        "Kafka's consumer configs, check.crcs; librdkafka CONFIGURATION.md, check.crcs "
        "(default false); kchaos",
        Tolerance(
            DEPENDS,
            DEPENDS,
            DEPENDS,
            "a failure when the reader checked CRCs (header client java: Kafka's consumer, "
            "check.crcs true by default) unless only offsets differ (a base offset, outside the "
            "CRC), tolerated when it was librdkafka (check.crcs false by default); "
            "disk/corruption.py UNCHECKED_CRCS, UNCOVERED_HEADER",
        ),
    ),
    Kind("corruption-detected", DISK, disk_corruption.DETECTED_RULE, "kchaos", ALWAYS),
    Kind("corruption-refused-start", DISK, disk_corruption.REFUSED_RULE, "kchaos", ALWAYS),
    Kind("unreadable-record", DISK, disk_corruption.UNREADABLE_RULE, "kchaos", NEVER),
    Kind("evidence-not-collected", ("collection",), collection.RULE, "kchaos", CANNOT_TELL),
    # -- liveness (checkers/families/liveness/): a result class of its own ------------------------
    Kind(
        "no-progress",
        LIVENESS,
        live_progress.PROGRESS_RULE,
        "KIP-500; Kafka's design (Replication)",
        LIVENESS_OUTCOME,
    ),
    Kind(
        "slow-recovery",
        LIVENESS,
        live_progress.RECOVERY_RULE,
        "kchaos (the run's --recovery-bound)",
        LIVENESS_OUTCOME,
    ),
    Kind(
        "broker-fenced-after-heal",
        LIVENESS,
        live_registration.BROKER_RULE,
        "KIP-631",
        LIVENESS_OUTCOME,
    ),
    Kind(
        "controller-unregistered",
        LIVENESS,
        live_registration.CONTROLLER_RULE,
        "KIP-919",
        LIVENESS_OUTCOME,
    ),
    Kind(
        "partition-offline-live-isr",
        LIVENESS,
        live_offline.OFFLINE_RULE,
        "Kafka's design (Replication); KIP-631",
        LIVENESS_OUTCOME,
    ),
    Kind(
        "group-unassigned",
        LIVENESS,
        live_assignment.GROUP_RULE,
        "KIP-848; Kafka's consumer group protocol",
        LIVENESS_OUTCOME,
    ),
    Kind(
        "fatal-log-line",
        LIVENESS,
        live_fatal.FATAL_RULE,
        "kchaos (allow-list: liveness/fatal.py ALLOWED)",
        LIVENESS_OUTCOME,
    ),
)

BY_NAME = {k.name: k for k in KINDS}
