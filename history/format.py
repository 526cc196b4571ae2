"""Names shared by everything that writes or reads a history (docs/history.md, format 1)."""

from __future__ import annotations

FORMAT_VERSION = 1
HEADER_KEY = "kchaos_history"

JSONL_NAME = "history.jsonl"
# Header fields of a history converted from Jepsen's EDN (docs/history.md, "Jepsen histories"):
# how keys and values were numbered (history/names.py), why times are op positions, and how
# many invocations the conversion supplied.
NAMES_FIELD = "names"
TIME_FROM, TIME_FROM_INDEX, TIME_FROM_REASON = "time_from", "index", "time_from_reason"
INVOCATIONS_ADDED = "invocations_added"
PARQUET_NAME = "history.parquet"
# The JSONL header rides in history.parquet's metadata under this key (history/columnar.py).
HEADER_METADATA = b"kchaos_header"
# What a run directory holds beside the history, written by clusters/collect.py and read by the
# checkers (docs/history.md): one set of names for both sides.
CLUSTER_JSON = "cluster.json"
LOGS_DIR = "logs"  # logs/<node>/stdout.log
NODE_LOG = "stdout.log"
METADATA_DIR = "metadata"  # metadata/<voter>.txt, metadata/observers/<broker>.txt
OBSERVERS_DIR = "observers"
DATA_LOGS_DIR = "data"  # data/<broker>.txt
# Each broker's high watermarks as Kafka last checkpointed them (its log directory's file of
# that name), kept as data/<broker>-raw/replication-offset-checkpoint.
HW_CHECKPOINT = "replication-offset-checkpoint"
# Written by the harness before the run: the plan's `generator` says how clients behaved.
PLAN_JSON = "plan.json"
# How the queue workload names transactional ids (the plan's `generator.transactional_id`): one
# per worker slot, so the process replacing a retired one fences it. A plan without this value
# (older runs named one id per process) says nothing about who fenced whom.
TXN_ID_PER_SLOT = "kchaos-<run>-slot<process mod concurrency>"

# Where the queue client that wrote a history leaves its consumer after a transaction that polled
# and then aborted (`fail`): a header field, so the checker applies the poll-skip rule that fits
# the writer (docs/history.md, docs/checkers.md).
CONSUMER_AFTER_ABORT = "consumer_after_abort"
# Back to where it stood when the transaction began (kchaos's queue client): the next poll starts
# where the last `ok` poll ended; a `fail` op's polls start there too.
REWIND = "rewind"
# Jepsen's checker: no `fail` or `info` op moves the position (poll-skip+nonmonotonic-cases).
JEPSEN = "jepsen"
# Said by nothing (kchaos histories before the field existed, whose aborted transactions
# recorded no poll results): any `fail` or `info` queue op leaves the position unknown.
UNDECLARED = "undeclared"
AFTER_ABORT_RULES = (REWIND, JEPSEN, UNDECLARED)


def after_abort_rule(header: dict[str, object]) -> str:
    """The rule a history's header asks for; Jepsen's histories (converted from EDN) get
    Jepsen's."""
    declared = header.get(CONSUMER_AFTER_ABORT)
    if declared in AFTER_ABORT_RULES:
        return str(declared)
    if str(header.get("run", "")).startswith("jepsen:"):
        return JEPSEN
    return UNDECLARED


INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
OP_TYPES = frozenset({INVOKE, OK, FAIL, INFO})
COMPLETIONS = frozenset({OK, FAIL, INFO})

# Operations whose value is a list of queue micro-operations.
QUEUE_FS = frozenset({"send", "poll", "txn"})
# Operations that change which partitions a consumer reads.
ASSIGN_FS = frozenset({"assign", "subscribe"})

NEMESIS = "nemesis"
# A nemesis op the harness records when a node stays dead after the heal because a lasting
# fault keeps it down (docs/history.md, "Nodes kept down"): its value says which and why.
KEPT_DOWN = "kept-down"
OBSERVER = "observer"
# The ZooKeeper-to-KRaft migration's steps (steps/migration.py), one at a time.
MIGRATION = "migration"
# Rolling upgrades and downgrades, feature-level and controller-membership steps
# (steps/upgrade.py), one at a time.
UPGRADE = "upgrade"
# A completion of a Jepsen history without a process runs on this one (history/edn.py).
NIL_PROCESS = "nil"
# Which processes are clients, by the history alone (Jepsen's rule, jepsen.history's
# client-op?): a client's process is an integer, and so is none of the run's own, which are
# named: the nemesis, the observer, each planned step family's (its key, steps/registry.py).
# A new family's name therefore needs no line here. One named process is a client: Jepsen's
# completions without a process, kept together as one consumer on "nil".
# The columnar form stores every process as a string: its client processes match this.
CLIENT_PROCESS_TEXT = "-?[0-9]+|" + NIL_PROCESS


def is_client(process: object) -> bool:
    """Is an op of this process (as read from a history line) a client's?"""
    if isinstance(process, int):
        return not isinstance(process, bool)
    return process == NIL_PROCESS


REQUIRED_FIELDS: dict[str, tuple[type, ...]] = {
    "index": (int,),
    "type": (str,),
    "f": (str,),
    "process": (int, str),
    "time": (int,),
}


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def is_int64(x: object) -> bool:
    """An integer the columnar form can hold (JSON integers are unbounded; bool is not one)."""
    return isinstance(x, int) and not isinstance(x, bool) and INT64_MIN <= x <= INT64_MAX


# Pipelined sends (docs/history.md, "Pipelined sends"): what a pipelined run's header declares of
# its producers. workloads/pipelined.py writes these fields; the queue checker reads them.
SEND_MODE_FIELD, IN_FLIGHT_FIELD, IDEMPOTENCE_FIELD = "send_mode", "in_flight", "idempotence"
ASYNC_SEND_MODE = "async"
# A pipelined transactional run's header field (docs/history.md, "Pipelined transactions"): the
# sends one `txn` op held at most, all produced before its commit.
TXN_SENDS_FIELD = "txn_sends"
# The op field naming the producer instance of a pipelined send.
PRODUCER_FIELD = "producer"

# The fields every op line has or may have from the recorder itself: an op's further fields
# (workloads/client.py Completion.extra, such as OP_FIELDS below) never take one of these names.
RECORDER_FIELDS = frozenset(
    {"index", "type", "f", "value", "process", "time", "wall", "node", "error", PRODUCER_FIELD}
)


def idempotent_producers(header: dict[str, object]) -> bool:
    """Does the history's writer declare pipelined idempotent producers (acks=all,
    enable.idempotence=true), whose sends to one partition Kafka appends in send order? Only
    then is one producer's order judged (checkers/families/queue/rules/producer_order.py)."""
    return header.get(SEND_MODE_FIELD) == ASYNC_SEND_MODE and header.get(IDEMPOTENCE_FIELD) is True


# Consumer groups and foreign records (docs/history.md, "Consumer groups: rebalances and
# commits"): further op fields a queue client writes on its completions. The columnar form
# carries them in one JSON column (history/columnar.py FIELDS_COLUMN) for the checkers.
REBALANCE_FIELD = "rebalance"  # [[event, [keys], time], ...] in the listener's order
COMMIT_FIELD = "commit"  # {"<key>": next offset to read} a synchronous commit stored
COMMIT_ERROR_FIELD = "commit_error"  # what the client saw when its commit failed
FOREIGN_FIELD = "foreign"  # [[topic, partition, offset, value], ...] of another topic
# [[partition, offset, what], ...]: records of the run's topic a read was handed that are not
# one of the run's values (`what`: "value b'...'", the bytes as read) or that the client
# reported as an error in place of a record ("error: ..."): what a damaged file can serve.
UNREADABLE_FIELD = "unreadable"
# A `txn` completion's field when the client held its commit (nemesis/client.py pause-commit):
# {"point": "commit", "asked": ns, "ms": held, "first_ack": ns | null, and the two timeouts
# below, ms}; docs/history.md.
HELD_FIELD = "commit_held"
TXN_TIMEOUT_MS = "transaction.timeout.ms"
# How often the transaction coordinator aborts the transactions open past their timeout.
TXN_ABORT_CHECK = "transaction.abort.timed.out.transaction.cleanup.interval.ms"
OP_FIELDS = (
    REBALANCE_FIELD,
    COMMIT_FIELD,
    COMMIT_ERROR_FIELD,
    FOREIGN_FIELD,
    UNREADABLE_FIELD,
    HELD_FIELD,
)
# A rebalance event: given to the member, taken back in an orderly rebalance, or lost (the
# member was fenced or its assignment is gone: another may have had the partitions already).
ASSIGNED, REVOKED, LOST = "assigned", "revoked", "lost"
REBALANCE_EVENTS = (ASSIGNED, REVOKED, LOST)

# Sends recorded in the JVM (docs/history.md, "Sends recorded in the JVM"): with `--client java
# --send-mode async` each worker slot's producer runs in the Java client's JVM and writes its own
# send operations as binary records (history/sidefiles.py) into `<run>/jvm-sends/slot<s>.ops`
# (beside them `slot<s>.acked`, the acknowledged sends as int64 triples for the final reads);
# with `--client java` the final reads write their polls so too, into `final.ops` ("Final
# reads"), and a pipelined run's harness recorder its sends into `harness.ops` ("Pipelined
# sends"). history/build.py builds history.parquet from them and the recorder's history.jsonl at
# the end of the run (or when `kchaos check` finds a run whose build did not happen),
# renumbering indices. Runs recorded before wrote JSONL side files (SIDE_SUFFIX), which
# history/merge.py merges into history.jsonl.
JVM_SENDS_DIR = "jvm-sends"
SIDE_SUFFIX = ".jsonl"
# The header field of a history holding side files' ops: {"files": [...]} and, when the build (or
# merge) had to drop a torn tail, "torn": [file names] (a side file) and "history_torn": true.
JVM_SENDS_FIELD = "jvm_sends"
# The header field of a run whose sends the JVM recorded (before and after the build).
SEND_RECORDER_FIELD = "send_recorder"
JVM_RECORDER = "jvm"

# The queue topic's durability settings (docs/history.md, the header's `durability`): written by
# the queue workload (workloads/durability.py), read by the checks that know Kafka's durability
# model. A history without the field (written before it) had these, Kafka's defaults apart from
# replication: no flush by count or time, unclean elections off, the release's own ELR.
DURABILITY_FIELD = "durability"
DURABILITY_DEFAULTS: dict[str, object] = {
    "replication": 3,
    "min_insync_replicas": 2,
    "flush_messages": None,
    "unclean_leader_election": False,
    "elr": None,
}
