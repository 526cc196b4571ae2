"""The share workload (`--workload share`): Kafka's share groups (KIP-932, "queues for Kafka").

Producers send as the queue's sync sends do (acks=all, idempotent, each value unique and naming
its send: process p's n-th value is p * stride + n), each to a random partition of one topic.
The last `--share-consumers` worker slots each run one KafkaShareConsumer of one share group,
one process id per consumer (a consumer whose outcome became unknown retires, as any process).
Records are acquired under a short acquisition lock (the brokers' `group.share.record.lock.
duration.ms`, set when the cluster is made), and each consumer acknowledges each record it is
handed with a type the generator draws at the plan's rates: ACCEPT, RELEASE, REJECT, RENEW
(Kafka 4.2+, KIP-1222), or none, letting the lock expire. Consumers run in explicit or implicit
acknowledgement mode (`share.acknowledgement.mode`); each batch's acknowledgements go to the
brokers with commitSync or ride on the next poll, at the plan's rate.

In explicit mode a poll is refused until every record of the last one was acknowledged ("All
records must be acknowledged in explicit acknowledgement mode"), so a record drawn none is
held: the consumer acknowledges the others, stays away for longer than the lock, then accepts
the held ones, which the brokers should refuse (InvalidRecordStateException) once the lock
expired. In implicit mode a batch is acknowledged whole (ACCEPT), so none is drawn per batch:
the consumer stays away for longer than the lock before it sends the batch's acknowledgement.

Every delivery and acknowledgement is an operation (history/share.py; docs/history.md, "The
share workload"). The JVM is the queue's Java client host (workloads/java_host.py) with the
share consumer's commands compiled in (workloads/java/share/KchaosShare.java).

After the run, the final reads read the topic's log whole as the queue's Java final reads do
(every acknowledged send must be in it), then a fresh share consumer drains the group, accepting
everything still delivered until nothing comes for a while, and the group's share-partition
start offsets are asked of the brokers before and after the drain.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from clusters.client_net import ClientNet
from clusters.errors import ClusterError
from clusters.kafka_dist import check_release, parse_version
from clusters.topology import Topology
from history.format import JVM_RECORDER, SEND_RECORDER_FIELD
from history.options import AS_ASKED, Option, OptionError, Values
from history.share import (
    ACCEPT,
    ACK_CHOICES,
    ACK_MODES,
    EXPLICIT,
    IMPLICIT,
    NONE,
    RENEW,
    SHARE_ACK,
    SHARE_FIELD,
    SHARE_OFFSETS,
    SHARE_POLL,
    SHARE_SUBSCRIBE,
    SHARE_VERSION_FIELD,
)
from workloads.api import KindBase, SideRecorder
from workloads.client import Completion, Invocation
from workloads.client_choice import CLIENT_FIELD, CLIENT_VERSION_FIELD, JAVA
from workloads.client_procs import (
    CLIENT_PROCS_HINT,
    CLIENT_TIMEOUTS_HINT,
    net_prefix,
    wants_processes,
)
from workloads.java_client import GRACE_S, SEND_TIMEOUT_S, producer_conf, send_outcome
from workloads.java_final import final_reads_java
from workloads.java_host import SOURCES, JavaError, JavaGone, JavaHost, client_dist, conf_args
from workloads.java_procs import SLOT_HEAP, SlotJvms
from workloads.java_recorded import JvmRecordedProducer, check_clock
from workloads.pipelined import (
    ASYNC,
    HARNESS_RECORDER,
    InFlight,
    ProducerClient,
    SlotSetup,
    has_lanes,
    lanes_of,
    send_keys,
)
from workloads.pipelined import history_header as pipelined_header
from workloads.queue import LeaderMap, create_topic
from workloads.queue_ops import FINAL_READ_RATE
from workloads.readback import AckedSends

NAME = "share"
SHARE_SOURCES = SOURCES / "share"
TOPIC = "kchaos-share"
# The group's id: the run's id (harness/run/interpreter.py run_id) in it.
GROUP_TEMPLATE = "kchaos-<run>-share"
# Share groups: preview in 4.1 (the share.version feature off unless the storage is formatted
# with it or a feature step enables it), on by default from 4.2 (KIP-932's production release);
# 4.0's were early access (a broker flag and unstable APIs), not run here.
SHARE_FROM = (4, 1)
SHARE_ON_BY_DEFAULT_FROM = (4, 2)
SHARE_VERSION_FEATURE = "share.version"
# The RENEW acknowledgement (KIP-1222): clients and brokers of 4.2 and later.
RENEW_FROM = (4, 2)
# The generator's rates (weights) for each delivered record's acknowledgement, by default.
DEFAULT_ACKS = {"accept": 65, "release": 15, "reject": 10, "renew": 5, "none": 5}
# Per cent of batches committed with commitSync; the others' acknowledgements ride on the next
# poll, their outcomes heard by the acknowledgement commit callback.
SYNC_COMMIT_PERCENT = 50
# Kafka's bounds (ShareGroupConfig): the brokers' lock floor may go down to 1 s; the delivery
# count limit is 2 to 10.
LOCK_MS_RANGE = (1000, 60_000)
DELIVERY_LIMIT_RANGE = (2, 10)
# How much longer than the lock a consumer stays away to let it expire: the lock's timer runs on
# the share-partition leader, which checks it on its own schedule.
EXPIRY_MARGIN = 1.5
EXPIRY_EXTRA_S = 0.5
POLL_TIMEOUT_MS = 500
COMMIT_TIMEOUT_MS = 10_000
# A share group member's session and heartbeat, the brokers' (group.share.*: Kafka's 45 s and
# 5 s, the minimums the same, would keep a member that could not leave, its consumer closed
# while the coordinator was down, assigned its partitions for most of a short run), as the
# consumer groups' (clusters/config.py CONSUMER_GROUP).
SESSION_MS = 6000
HEARTBEAT_MS = 1000
# The final drain ends once nothing was delivered for this many locks, and at least for a dead
# member's session and then some (its partitions are the drain's only once it is gone).
DRAIN_QUIET_LOCKS = 3
DRAIN_QUIET_MIN_S = SESSION_MS / 1000 + 2.0
OFFSETS_TIMEOUT_S = 30.0

_SHARE = ("workload", (NAME,))


def parse_acks(text: str) -> dict[str, int]:
    """`accept=60,release=15,...`: each choice's weight (ACK_CHOICES; the ones not named weigh
    0); ValueError with the sentence that refuses it."""
    rates: dict[str, int] = dict.fromkeys(ACK_CHOICES, 0)
    for part in (p.strip() for p in text.split(",")):
        name, eq, weight = part.partition("=")
        name = name.strip().lower()
        if not eq or name not in rates:
            raise ValueError(
                f"'{part}' is not choice=weight with a choice among {', '.join(ACK_CHOICES)}"
            )
        try:
            w = int(weight)
        except ValueError:
            raise ValueError(
                f"the weight of {name} must be a whole number, not '{weight}'"
            ) from None
        if w < 0 or w > 1_000_000:
            raise ValueError(f"the weight of {name} must be between 0 and 1000000, not {w}")
        rates[name] = w
    if not any(rates.values()):
        raise ValueError("at least one weight must be above 0")
    return rates


def _check_acks(flag: str, value: Any) -> str | None:
    if not isinstance(value, str):
        return f"must be text such as accept=60,release=15, not {value!r}"
    try:
        parse_acks(value)
    except ValueError as exc:
        return str(exc)
    return None


OPTIONS: tuple[Option, ...] = (
    Option(
        "share_partitions",
        int,
        4,
        help="With --workload share: partitions of the share topic.",
        minimum=1,
        maximum=1000,
        applies_with=_SHARE,
        stored=AS_ASKED,
    ),
    Option(
        "share_consumers",
        int,
        2,
        help="With --workload share: worker slots (of --concurrency, the last ones) that each "
        "run one share consumer of the group; the others send.",
        minimum=1,
        maximum=255,
        applies_with=_SHARE,
        stored=AS_ASKED,
    ),
    Option(
        "share_ack_mode",
        str,
        "mixed",
        choices=("mixed", *ACK_MODES),
        noun="acknowledgement mode",
        help="With --workload share: the consumers' share.acknowledgement.mode, explicit, "
        "implicit, or mixed (the default: every other consumer slot explicit).",
        applies_with=_SHARE,
        stored=AS_ASKED,
    ),
    Option(
        "share_acks",
        str,
        check=_check_acks,
        help="With --workload share: weights of each delivered record's acknowledgement, e.g. "
        "accept=65,release=15,reject=10,renew=5,none=5 (the default; renew is left out "
        "below Kafka 4.2). none leaves the record past its lock.",
        applies_with=_SHARE,
        stored=AS_ASKED,
    ),
    Option(
        "share_lock_ms",
        int,
        2000,
        help="With --workload share: the acquisition lock (the brokers' "
        "group.share.record.lock.duration.ms, and its floor).",
        minimum=LOCK_MS_RANGE[0],
        maximum=LOCK_MS_RANGE[1],
        unit="milliseconds",
        applies_with=_SHARE,
        stored=AS_ASKED,
    ),
    Option(
        "share_delivery_limit",
        int,
        5,
        help="With --workload share: deliveries of a record before it is archived (the "
        "brokers' group.share.delivery.count.limit).",
        minimum=DELIVERY_LIMIT_RANGE[0],
        maximum=DELIVERY_LIMIT_RANGE[1],
        applies_with=_SHARE,
        stored=AS_ASKED,
    ),
)


def share_version_steps(features: str | None) -> list[int]:
    """The levels the run's own feature steps (``--features``, steps/feature_steps.py, which
    checks the items) finalize ``share.version`` at, in order; dry runs change nothing and
    are left out, as is ``release-version=X`` (4.1's own release level leaves it 0)."""
    out = []
    for item in (features or "").split(","):
        name, _, level = item.strip().partition("=")
        level = level.removesuffix("!unsafe")
        if name == SHARE_VERSION_FEATURE and level.isascii() and level.isdigit():
            out.append(int(level))
    return out


def starts_off(gen: dict[str, Any]) -> bool:
    """Is the storage formatted with share groups off (4.1, a feature step turns them on)?"""
    return gen.get("share_version") == 0


def _version(release: str) -> tuple[int, ...]:
    try:
        return parse_version(release)[:2]
    except ClusterError as exc:
        raise OptionError(f"--version: {exc}") from None


def renew_allowed(releases: tuple[str, ...] | list[str]) -> bool:
    """Do the run's every release's brokers and its client take RENEW (KIP-1222)?"""
    return all(_version(r) >= RENEW_FROM for r in releases)


def ack_rates(options: Any) -> dict[str, int]:
    """The plan's weights: the ones asked for, or the defaults, without renew where a release
    of the run has none (``check`` refuses renew asked for there)."""
    if options.share_acks:
        return parse_acks(options.share_acks)
    rates = dict(DEFAULT_ACKS)
    if not renew_allowed(options.releases):
        rates[RENEW] = 0
    return rates


def consumer_modes(gen: dict[str, Any]) -> list[str]:
    """The acknowledgement mode of each consumer slot, in slot order."""
    mode = gen["ack_mode"]
    n = int(gen["consumers"])
    if mode in ACK_MODES:
        return [mode] * n
    return [EXPLICIT if i % 2 == 0 else IMPLICIT for i in range(n)]


def node_properties_of(gen: dict[str, Any]) -> dict[str, str]:
    """What every broker needs for the run's share group: its lock and its floor (Kafka's
    default floor is 15 s, too long for redeliveries in a short run), the delivery count limit,
    members' sessions (SESSION_MS), and a small state topic (its 50 default partitions take
    long to create on two cores)."""
    lock = int(gen["lock_ms"])
    return {
        "group.share.record.lock.duration.ms": str(lock),
        "group.share.min.record.lock.duration.ms": str(min(lock, 15_000)),
        "group.share.delivery.count.limit": str(int(gen["delivery_limit"])),
        "group.share.session.timeout.ms": str(SESSION_MS),
        "group.share.min.session.timeout.ms": str(SESSION_MS),
        "group.share.heartbeat.interval.ms": str(HEARTBEAT_MS),
        "group.share.min.heartbeat.interval.ms": str(HEARTBEAT_MS),
        "share.coordinator.state.topic.num.partitions": "5",
    }


class ShareWorkload(KindBase):
    """Shared state of one share run: the topic, the group, acknowledged sends, the JVM."""

    NAME: ClassVar[str] = NAME
    OPTIONS: ClassVar[tuple[Option, ...]] = OPTIONS
    FINAL_KEY: ClassVar[str] = "final_reads"
    FINAL_SAYS: ClassVar[str] = (
        "final reads: the share topic whole from the beginning, then a share consumer drains "
        "the group"
    )

    @staticmethod
    def check(values: Values) -> None:
        if values.workload != NAME:
            return
        for r in values.releases:
            try:
                check_release(r)
            except ClusterError as exc:
                raise OptionError(f"--version: {exc}") from None
        old = [r for r in values.releases if _version(r) < SHARE_FROM]
        if old:
            raise OptionError(
                f"--workload share needs Kafka 4.1 or later on every release of the run (share "
                f"groups, KIP-932; 4.0's were early access), not {', '.join(old)}"
            )
        if values.share_consumers >= values.concurrency:
            raise OptionError(
                f"--share-consumers {values.share_consumers} leaves no producer among "
                f"--concurrency {values.concurrency} worker slots: at most "
                f"{values.concurrency - 1}"
            )
        if values.send_mode == ASYNC:
            # Pipelined share producers are the Java client's, recording their own sends.
            if values.pollers:
                raise OptionError(
                    "pollers apply to the queue workload: a share run's consumers are its "
                    "--share-consumers slots"
                )
            if values.send_recorder == HARNESS_RECORDER:
                raise OptionError(
                    "send-recorder harness does not apply to a share run: its pipelined "
                    "producers record their sends in the Java client's JVM (jvm)"
                )
        if values.share_acks and parse_acks(values.share_acks)[RENEW]:
            old = [r for r in values.releases if _version(r) < RENEW_FROM]
            if old:
                raise OptionError(
                    f"--share-acks: renew needs Kafka 4.2 or later (KIP-1222) on every release "
                    f"of the run, not {', '.join(old)}"
                )

    @staticmethod
    def generator(options: Any) -> dict[str, Any]:
        """How clients choose operations (docs/history.md, "The share workload")."""
        gen: dict[str, Any] = {
            "topic": TOPIC,
            "partitions": options.share_partitions,
            "replication": 3,
            "min_insync_replicas": 2,
            "group": GROUP_TEMPLATE,
            "consumers": options.share_consumers,
            "ack_mode": options.share_ack_mode,
            "acks": ack_rates(options),
            "sync_commit_percent": SYNC_COMMIT_PERCENT,
            "lock_ms": options.share_lock_ms,
            "delivery_limit": options.share_delivery_limit,
            "poll_max_records": 50,
            "poll_timeout_ms": POLL_TIMEOUT_MS,
            "value_stride": 1_000_000,
            CLIENT_FIELD: JAVA,
            CLIENT_VERSION_FIELD: options.version,
            # The final log read's consumer, as the queue's (workloads/java_client.py).
            "txn": False,
            "poll_max_messages": 64,
        }
        if getattr(options, "send_mode", None) == ASYNC:
            gen.update(pipelined_params(options))
        if _version(options.version) < SHARE_ON_BY_DEFAULT_FROM:
            # 4.1: share groups are off until share.version is finalized; the storage is
            # formatted with it (format_features), unless the run's own first share.version
            # step turns it on (formatted off, so that step changes something).
            steps = share_version_steps(getattr(options, "features", None))
            gen["share_version"] = 0 if steps and steps[0] > 0 else 1
        return gen

    @classmethod
    def history_header(cls, gen: dict[str, Any]) -> dict[str, Any]:
        return {
            CLIENT_FIELD: JAVA,
            **pipelined_header(gen),
            SHARE_FIELD: {
                "group": gen["group"],
                "topic": gen["topic"],
                "lock_ms": gen["lock_ms"],
                "delivery_limit": gen["delivery_limit"],
                "modes": consumer_modes(gen),
                "acks": gen["acks"],
                "sync_commit_percent": gen["sync_commit_percent"],
                **({SHARE_VERSION_FIELD: gen["share_version"]} if "share_version" in gen else {}),
            },
        }

    @staticmethod
    def lanes(gen: dict[str, Any]) -> int:
        # A pipelined producer owns one process id per send in flight (harness/run/workers.py
        # Lanes); a consumer slot has its first lane's.
        return lanes_of(gen)

    @staticmethod
    def flush_by_time(gen: dict[str, Any]) -> bool:
        return bool(pipelined_header(gen))

    @staticmethod
    def format_features(gen: dict[str, Any]) -> dict[str, int]:
        # Level 0 is 4.1's own default: formatted without it, share groups are off.
        level = gen.get("share_version")
        return {SHARE_VERSION_FEATURE: int(level)} if level else {}

    @staticmethod
    def node_properties(gen: dict[str, Any]) -> dict[str, str]:
        return node_properties_of(gen)

    @staticmethod
    def final_sentence(outcome: dict[str, Any]) -> str:
        drain = outcome.get("share") or {}
        return (
            f"final reads read {outcome.get('read_acknowledged', '?')}/"
            f"{outcome.get('acknowledged', '?')} acknowledged sends; the drain accepted "
            f"{drain.get('accepted', '?')} of {drain.get('delivered', '?')} delivered"
        )

    def __init__(self, gen: dict[str, Any], topology: Topology, seed: int, run_id: str) -> None:
        self.gen = gen
        self.topology = topology
        self.seed = seed
        self.run_id = run_id
        self.topic = str(gen["topic"])
        self.keys = int(gen["partitions"])
        self.group = str(gen["group"]).replace("<run>", run_id.replace("/", "-"))
        self.concurrency = int(gen.get("concurrency") or 1)
        self.consumers = int(gen["consumers"])
        self.modes = consumer_modes(gen)
        self.lock_ms = int(gen["lock_ms"])
        self.lock_s = self.lock_ms / 1000
        self.bootstrap = topology.bootstrap_servers()
        self.acked = AckedSends()
        # Sends in flight per partition of the pipelined producers (the busiest-leader target).
        self.sends_in_flight = InFlight(self.keys)
        self.side_recorder: SideRecorder | None = None
        self.leaders = LeaderMap(self.bootstrap, self.topic, topology)
        self.java: JavaHost | None = None
        # With client faults that stop one client (generator client_procs): each sync slot's
        # JVM (pipelined producers record their sends in the shared one).
        self.procs: SlotJvms | None = None
        # Each slot's network where the run cuts one client alone (generator client_nets): the
        # harness gives them before setup (workloads/api.py ClientNetted).
        self.client_nets: Mapping[int, ClientNet] | None = None
        # The JVM's Admin client (group configs, start offsets), made by setup.
        self.admin_handle: int | None = None
        born = time.monotonic_ns()
        self.clock: Callable[[], int] = lambda: time.monotonic_ns() - born

    def setup_says(self) -> str:
        return (
            f"workload setup: topic {self.topic} with {self.keys} partitions; share group "
            f"{self.group} (lock {self.gen['lock_ms']} ms, delivery limit "
            f"{self.gen['delivery_limit']}, offsets reset to earliest); "
            + (
                "share groups off until a feature step finalizes share.version (no warm-up)"
                if starts_off(self.gen)
                else "the share state warmed up"
            )
        )

    def setup(self, timeout: float = 120.0) -> None:
        """The JVM (with the share consumer's classes), the topic and its leaders, and the
        group's start: earliest, so the sends made before a consumer first joined are
        delivered too (the group's default is latest)."""
        if self.java is None:
            dist = client_dist(str(self.gen[CLIENT_VERSION_FIELD]))
            self.java = JavaHost(dist, extra_sources=SHARE_SOURCES)
            if wants_processes(self.gen):
                first_consumer = self.concurrency - self.consumers
                own = range(first_consumer if self.pipelined_lanes() else 0, self.concurrency)
                self.procs = SlotJvms(
                    own,
                    lambda s: "share-consumer" if s >= first_consumer else "producer",
                    lambda s: JavaHost(
                        dist,
                        extra_sources=SHARE_SOURCES,
                        heap=SLOT_HEAP,
                        prefix=net_prefix(self.client_nets, s),
                    ),
                )
        deadline = time.monotonic() + timeout
        create_topic(self.bootstrap, self.gen, self.topic, self.keys, self.topology, deadline)
        self.leaders.await_all(self.keys, deadline)
        check_clock(self.java)  # the polls' hand-over times are on the history's clock
        h = self.admin_handle = self.java.handle()
        admin_conf = conf_args({"bootstrap.servers": self.bootstrap})
        self.java.call("share-admin", h, *admin_conf, timeout=30)
        while True:
            try:
                self.java.call(
                    "share-group-config",
                    h,
                    self.group,
                    "share.auto.offset.reset=earliest",
                    timeout=60,
                )
                break
            except JavaError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        if not starts_off(self.gen):
            # With share groups off the brokers refuse every share group request
            # (UNSUPPORTED_VERSION): nothing to warm up before the step turns them on.
            self._warm_up(deadline)
        self.leaders.start()

    def _warm_up(self, deadline: float) -> None:
        """A share group of its own on a topic of its own, one record sent and accepted: the
        brokers create the share state topic and load its coordinators on a share group's
        first use, which took 5-6 s on a fresh cluster (the run's first deliveries came that
        late, and its first faults cut into it). Nothing of it is in the history: another
        topic (`<topic>-warmup`), another group; readiness is observed (the record came
        back and was accepted), never slept."""
        assert self.java is not None and self.admin_handle is not None
        java, topic, group = self.java, f"{self.topic}-warmup", f"{self.group}-warmup"
        create_topic(self.bootstrap, self.gen, topic, 1, self.topology, deadline)
        java.call(
            "share-group-config",
            self.admin_handle,
            group,
            "share.auto.offset.reset=earliest",
            timeout=60,
        )
        p, c = java.handle(), java.handle()
        conf = {
            "bootstrap.servers": self.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": EXPLICIT,
        }
        try:
            java.call("producer", p, *conf_args(producer_conf(self, None, False)), timeout=30)
            java.call("send", p, topic, 0, "0", 0, timeout=SEND_TIMEOUT_S + GRACE_S)
            java.call("share-consumer", c, topic, 0, *conf_args(conf), timeout=30)
            java.call("share-subscribe", c, timeout=30)
            while True:
                got = java.call("share-poll", c, POLL_TIMEOUT_MS, "", timeout=20)
                if got["recs"]:
                    acks = _acks_arg([[r[0], r[1], ACCEPT] for r in got["recs"]])
                    java.call("share-ack", c, COMMIT_TIMEOUT_MS, acks, timeout=20)
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the share warm-up group {group} was handed nothing of {topic}"
                    )
        finally:
            for h in (c, p):
                with contextlib.suppress(JavaError, JavaGone):
                    java.call("close", h, 5000, timeout=20)
                java.forget(h)

    # What clients and the harness ask -----------------------------------------------------------
    def note_acked(self, key: int, offset: int | None, value: int) -> None:
        self.acked.add(key, value)

    def acked_bulk(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Sends acknowledged where the harness did not see them (recorded in the JVM)."""
        self.acked.add_many(keys, values)

    def pipelined_lanes(self) -> int:
        """Sends in flight per producer with --send-mode async; 0: sync sends."""
        return lanes_of(self.gen) if has_lanes(self.gen) else 0

    def records_sends(self) -> bool:
        """Pipelined share producers always record their own sends, in the JVM
        (workloads/java_recorded.py)."""
        return self.java is not None and self.gen.get(SEND_RECORDER_FIELD) == JVM_RECORDER

    def recorded_producer(self, slot: int, setup: SlotSetup) -> JvmRecordedProducer:
        assert self.java is not None, "setup() starts the JVM"
        return JvmRecordedProducer(self, self.java, slot, setup)

    def producer_client(self, producer: int, rng: random.Random) -> ProducerClient:
        # The harness's recording of pipelined sends: refused by check (records_sends).
        raise RuntimeError("a share run's pipelined producers record their sends in the JVM")

    def poller_slots(self) -> int:
        """The consumer slots (workloads/pipelined.py Polling): the harness runs them unpaced,
        and --rate paces the producers."""
        return self.consumers

    def final_timeout(self, base: float) -> float:
        return base + len(self.acked) / FINAL_READ_RATE[JAVA]

    def hints(self) -> dict[str, Any]:
        # share_group: for the share-leader and share-coordinator targets (nemesis/targets.py).
        return {
            "topic": self.topic,
            "partition_leaders": dict(self.leaders.leaders),
            "share_group": self.group,
            **(
                {"in_flight": self.sends_in_flight.by_partition()} if self.pipelined_lanes() else {}
            ),
            **(
                {
                    CLIENT_PROCS_HINT: self.procs.hint(),
                    # A share consumer away longer than its lock loses what it acquired.
                    CLIENT_TIMEOUTS_HINT: {"group.share.record.lock.duration.ms": self.lock_ms},
                }
                if self.procs is not None
                else {}
            ),
        }

    def client(self, process: int, rng: random.Random) -> ShareProducer | ShareConsumer:
        assert self.java is not None, "setup() starts the JVM"
        # Slot s's processes are s*lanes + j + k*concurrency*lanes (harness ProcessIds).
        slot = (process // max(1, self.pipelined_lanes())) % self.concurrency
        first_consumer = self.concurrency - self.consumers
        host = (None if self.procs is None else self.procs.host(slot, process)) or self.java
        if slot >= first_consumer:
            return ShareConsumer(self, host, process, rng, self.modes[slot - first_consumer])
        return ShareProducer(self, host, process, rng)

    def close(self) -> None:
        self.leaders.stop()
        if self.procs is not None:
            self.procs.close()
        if self.java is not None:
            self.java.close()
            self.java = None

    # The final reads -----------------------------------------------------------------------------
    def final(
        self, new_process: Callable[[], int], record: Callable[..., Any], timeout: float
    ) -> dict[str, Any]:
        """The log read whole (the queue's Java final reads, into their side file), then the
        group drained and its start offsets asked before and after; one outcome."""
        if self.java is None or self.side_recorder is None:
            raise RuntimeError("the share workload's final reads need its JVM and the recorder")
        started = time.monotonic()
        outcome = final_reads_java(self, self.java, new_process, self.side_recorder, timeout)
        left = max(10.0, timeout - (time.monotonic() - started))
        drain = Drain(self, self.java, new_process(), record).run(left)
        outcome["share"] = drain
        outcome["complete"] = bool(outcome.get("complete")) and drained(drain)
        return outcome


def pipelined_params(options: Any) -> dict[str, Any]:
    """The generator's keys of pipelined share producers (`--send-mode async`): the queue's
    send-mode keys (workloads/pipelined.py generator_params) without polls or transactions,
    recorded in the JVM."""
    params: dict[str, Any] = {**send_keys(options), SEND_RECORDER_FIELD: JVM_RECORDER}
    if getattr(options, "batch_size", None) is not None:
        params["batch_size"] = int(options.batch_size)
    return params


def drained(drain: dict[str, Any]) -> bool:
    """Did the drain end quiet with nothing left to deliver: every share-partition's lag 0, as
    the brokers answered after it (a lag the brokers do not give counts as nothing left)?"""
    after = drain.get("start_offsets")
    if drain.get("ended") != "quiet" or after is None:
        return False
    return all(not (info or {}).get("lag") for info in after.values())


def _acks_arg(acks: list[list[Any]]) -> str:
    """acks as the JVM takes them: partition:offset:TYPE,..."""
    return ",".join(f"{k}:{o}:{t.upper()}" for k, o, t in acks)


class ShareProducer:
    """One process's KafkaProducer: sync sends, as the queue's Java client sends."""

    setup_op: Invocation | None = None

    def __init__(self, wl: ShareWorkload, host: JavaHost, process: int, rng: random.Random):
        self.wl = wl
        self.host = host
        self.process = process
        self.rng = rng
        self._h = host.handle()
        self._opened = self._made = False
        self._n = 0
        self._stride = int(wl.gen["value_stride"])

    def open(self, op: Invocation) -> Completion:
        return Completion("ok", op.value)

    def next_op(self) -> Invocation:
        key = self.rng.randrange(self.wl.keys)
        self._n += 1
        value = self.process * self._stride + self._n
        return Invocation("send", [["send", key, value]], self.wl.leaders.leaders.get(key))

    def apply(self, op: Invocation) -> Completion:
        _, key, value = op.value[0]
        try:
            if not self._made:
                # Made at the first send, so that a JVM that is gone ends an op, not a slot.
                conf = conf_args(producer_conf(self.wl, None, False))
                self._opened = True  # the handle has a thread in the JVM: close() ends it
                self.host.call("producer", self._h, *conf, timeout=30)
                self._made = True
        except (JavaError, JavaGone) as exc:
            return Completion("fail", op.value, f"no producer: {exc}", op.node, retire=True)
        try:
            offset = self.host.call(
                "send", self._h, self.wl.topic, key, key, value, timeout=SEND_TIMEOUT_S + GRACE_S
            )
        except (JavaError, JavaGone) as exc:
            return Completion(send_outcome(exc), op.value, str(exc), op.node)
        at = offset if isinstance(offset, int) and offset >= 0 else None
        self.wl.note_acked(key, at, value)
        node = self.wl.leaders.leaders.get(key, op.node)
        return Completion("ok", [["send", key, [at, value]]], None, node)

    def close(self) -> None:
        if self._opened:
            with contextlib.suppress(JavaError, JavaGone):
                self.host.call("close", self._h, 0, timeout=15)
        self.host.forget(self._h)


class ShareConsumer:
    """One process's KafkaShareConsumer. After each poll it draws what to do with the records
    (module docstring), as the ops it will invoke next; retired after any unknown outcome."""

    def __init__(
        self, wl: ShareWorkload, host: JavaHost, process: int, rng: random.Random, mode: str
    ) -> None:
        self.wl = wl
        self.host = host
        self.process = process
        self.rng = rng
        self.mode = mode
        self.setup_op = Invocation(
            SHARE_SUBSCRIBE, {"group": wl.group, "topic": wl.topic, "ack_mode": mode}
        )
        self._h = host.handle()
        self._made = False
        gen = wl.gen
        self._choices = [c for c in ACK_CHOICES if gen["acks"].get(c)]
        self._weights = [gen["acks"][c] for c in self._choices]
        total = sum(gen["acks"].values())
        self._none_p = gen["acks"].get(NONE, 0) / total if total else 0.0
        self._sync_p = int(gen["sync_commit_percent"]) / 100
        self._stay_away_s = wl.lock_s * EXPIRY_MARGIN + EXPIRY_EXTRA_S
        # What comes next: (seconds to stay away first, op); empty: a poll carrying `_carry`.
        self._next: list[tuple[float, Invocation]] = []
        self._carry: list[list[Any]] = []
        self._away_s = 0.0
        # How the consumer stays away (tests give their own).
        self.sleep: Callable[[float], None] = time.sleep

    def open(self, op: Invocation) -> Completion:
        conf = {
            "bootstrap.servers": self.wl.bootstrap,
            "group.id": self.wl.group,
            "share.acknowledgement.mode": self.mode,
            "max.poll.records": int(self.wl.gen["poll_max_records"]),
            "default.api.timeout.ms": 10_000,
            "request.timeout.ms": 5000,
        }
        t0 = self.wl.side_recorder.t0_ns if self.wl.side_recorder is not None else 0
        # The handle has a thread in the JVM from its first request on: close() ends it.
        self._made = True
        try:
            self.host.call(
                "share-consumer", self._h, self.wl.topic, t0, *conf_args(conf), timeout=30
            )
            self.host.call("share-subscribe", self._h, timeout=30)
        except JavaError as exc:
            return Completion("fail", op.value, str(exc), retire=True)
        except JavaGone as exc:
            time.sleep(0.5)  # the JVM is gone: every later process would end here at once
            return Completion("info", op.value, str(exc))
        return Completion("ok", op.value)

    def next_op(self) -> Invocation:
        if self._next:
            away, op = self._next.pop(0)
        else:
            away, op = self._away_s, Invocation(SHARE_POLL, {"acks": self._carry})
            self._away_s = 0.0
        if away:
            # Before the invocation: the history shows the consumer away between two ops.
            self.sleep(away)
        return op

    def apply(self, op: Invocation) -> Completion:
        if op.f == SHARE_POLL:
            return self._poll(op)
        return self._ack(op)

    def _jvm_acks(self, acks: list[list[Any]]) -> str:
        # Implicit mode acknowledges without acknowledge(): the poll or commit does.
        return _acks_arg(acks) if self.mode == EXPLICIT else ""

    def _poll(self, op: Invocation) -> Completion:
        acks = op.value["acks"]
        self._carry = []
        ms = int(self.wl.gen["poll_timeout_ms"])
        try:
            got = self.host.call(
                "share-poll", self._h, ms, self._jvm_acks(acks), timeout=ms / 1000 + 15
            )
        except (JavaError, JavaGone) as exc:
            # What the poll sent and acquired is unknown; its consumer is closed with the process.
            return Completion("info", op.value, str(exc))
        records = [list(r) for r in got["recs"]]
        value = {
            "acks": acks,
            "records": records,
            "handed": got.get("handed"),
            "lock_ms": got.get("lock_ms"),
            "acked": got.get("acked") or [],
        }
        if records:
            self._plan(records)
        return Completion("ok", value)

    def _ack(self, op: Invocation) -> Completion:
        try:
            got = self.host.call(
                "share-ack",
                self._h,
                COMMIT_TIMEOUT_MS,
                self._jvm_acks(op.value["acks"]),
                timeout=COMMIT_TIMEOUT_MS / 1000 + GRACE_S,
            )
        except (JavaError, JavaGone) as exc:
            return Completion("info", op.value, str(exc))
        value = {
            **op.value,
            "commit": got.get("commit") or {},
            "committed": got.get("committed"),
            "acked": got.get("acked") or [],
        }
        return Completion("ok", value)

    def _plan(self, records: list[list[Any]]) -> None:
        """What to do with a poll's records, drawn from the process's stream: in explicit
        mode a type per record, in implicit mode whether to stay away past the lock; then
        commitSync or the next poll."""
        sync = False
        if self.mode == EXPLICIT:
            drawn = self.rng.choices(self._choices, self._weights, k=len(records))
            acks = [[r[0], r[1], t] for r, t in zip(records, drawn, strict=True) if t != NONE]
            held = [[r[0], r[1]] for r, t in zip(records, drawn, strict=True) if t == NONE]
            sync = self.rng.random() < self._sync_p
            if held:
                # The others first (committed), then away past the lock, then the held ones
                # accepted: the brokers should refuse them (the lock expired).
                self._next.append((0.0, Invocation(SHARE_ACK, {"acks": acks, "held": held})))
                late = [[k, o, ACCEPT] for k, o in held]
                self._next.append((self._stay_away_s, Invocation(SHARE_ACK, {"acks": late})))
                return
        else:
            acks = [[r[0], r[1], ACCEPT] for r in records]
            away = self.rng.random() < self._none_p
            sync = self.rng.random() < self._sync_p
            if away:
                self._away_s = self._stay_away_s
        if sync:
            self._next.append((self._away_s, Invocation(SHARE_ACK, {"acks": acks})))
            self._away_s = 0.0
        else:
            self._carry = acks

    def close(self) -> None:
        # A share consumer's close sends what is acknowledged and releases what is not
        # (docs/history.md: a process's acquired records end with its last op).
        if self._made:
            with contextlib.suppress(JavaError, JavaGone):
                self.host.call("close", self._h, 5000, timeout=20)
        self.host.forget(self._h)


class Drain:
    """The final drain: one explicit-mode share consumer of the group, accepting every record
    it is handed (commitSync each batch), until nothing was delivered for DRAIN_QUIET_LOCKS
    locks (at least DRAIN_QUIET_MIN_S), with the start offsets asked before and after. Its ops
    are the workers' (share-subscribe, share-poll, share-ack, share-offsets), recorded by the
    harness's recorder on one fresh process."""

    def __init__(
        self, wl: ShareWorkload, host: JavaHost, process: int, record: Callable[..., Any]
    ) -> None:
        self.wl = wl
        self.host = host
        self.process = process
        self.record = record
        self.quiet_s = max(DRAIN_QUIET_MIN_S, DRAIN_QUIET_LOCKS * wl.lock_s)
        self.counts = {"polls": 0, "delivered": 0, "accepted": 0, "refused": 0}
        self.refusals: dict[str, int] = {}

    def _op(self, f: str, value: Any, call: Callable[[], Any]) -> Any:
        """One op: invoked, done, completed ok with its value from `call`'s answer, or info
        (and the rest of the drain ends) when it threw."""
        self.record("invoke", f, value, self.process)
        try:
            done = call()
        except (JavaError, JavaGone) as exc:
            self.record("info", f, value, self.process, error=str(exc))
            raise
        self.record("ok", f, done, self.process)
        return done

    def offsets(self) -> dict[str, Any] | None:
        h = self.wl.admin_handle
        assert h is not None, "setup() makes the admin client"
        try:
            got = self._op(
                SHARE_OFFSETS,
                {"group": self.wl.group},
                lambda: {
                    "group": self.wl.group,
                    "offsets": self.host.call(
                        "share-offsets", h, self.wl.group, self.wl.topic, timeout=OFFSETS_TIMEOUT_S
                    ),
                },
            )
        except (JavaError, JavaGone):
            return None
        return got["offsets"]

    def run(self, timeout: float) -> dict[str, Any]:
        started = time.monotonic()
        before = self.offsets()
        ended, error = self._drain(started + timeout)
        after = self.offsets()
        out: dict[str, Any] = {
            **self.counts,
            "refusals": self.refusals,
            "ended": ended,
            "quiet_s": self.quiet_s,
            "seconds": round(time.monotonic() - started, 2),
            "start_offsets_before": before,
            "start_offsets": after,
        }
        if error:
            out["error"] = error
        left = {k: i["lag"] for k, i in (after or {}).items() if i and i.get("lag")}
        if left:
            out["undrained"] = left
        return out

    def _drain(self, deadline: float) -> tuple[str, str | None]:
        h = self.host.handle()
        conf = {
            "bootstrap.servers": self.wl.bootstrap,
            "group.id": self.wl.group,
            "share.acknowledgement.mode": EXPLICIT,
            "max.poll.records": 500,
            "default.api.timeout.ms": 10_000,
        }
        t0 = self.wl.side_recorder.t0_ns if self.wl.side_recorder is not None else 0
        sub = {"group": self.wl.group, "topic": self.wl.topic, "ack_mode": EXPLICIT}
        try:
            check_clock(self.host)  # the polls' hand-over times are on the history's clock

            def subscribe() -> dict[str, Any]:
                self.host.call("share-consumer", h, self.wl.topic, t0, *conf_args(conf), timeout=30)
                self.host.call("share-subscribe", h, timeout=30)
                return sub

            self._op(SHARE_SUBSCRIBE, sub, subscribe)
            last = time.monotonic()
            while True:
                now = time.monotonic()
                if now - last >= self.quiet_s:
                    return "quiet", None
                if now >= deadline:
                    return "deadline", None
                got = self._op(SHARE_POLL, {"acks": []}, lambda: self._poll(h))
                self.counts["polls"] += 1
                records = got["records"]
                if not records:
                    continue
                last = time.monotonic()
                self.counts["delivered"] += len(records)
                acks = [[r[0], r[1], ACCEPT] for r in records]
                done = self._op(SHARE_ACK, {"acks": acks}, lambda acks=acks: self._ack(h, acks))
                for k, _o, _ in acks:
                    said = done["commit"].get(str(k))
                    if said == "ok":
                        self.counts["accepted"] += 1
                    else:
                        self.counts["refused"] += 1
                        why = str(said).split(":", 1)[0]
                        self.refusals[why] = self.refusals.get(why, 0) + 1
        except (JavaError, JavaGone) as exc:
            return "error", str(exc)
        finally:
            with contextlib.suppress(JavaError, JavaGone):
                self.host.call("close", h, 5000, timeout=20)
            self.host.forget(h)

    def _poll(self, h: int) -> dict[str, Any]:
        wait = POLL_TIMEOUT_MS / 1000 + 15
        got = self.host.call("share-poll", h, POLL_TIMEOUT_MS, "", timeout=wait)
        return {
            "acks": [],
            "records": [list(r) for r in got["recs"]],
            "handed": got.get("handed"),
            "lock_ms": got.get("lock_ms"),
            "acked": got.get("acked") or [],
        }

    def _ack(self, h: int, acks: list[list[Any]]) -> dict[str, Any]:
        got = self.host.call(
            "share-ack",
            h,
            COMMIT_TIMEOUT_MS,
            _acks_arg(acks),
            timeout=COMMIT_TIMEOUT_MS / 1000 + GRACE_S,
        )
        return {
            "acks": acks,
            "commit": got.get("commit") or {},
            "committed": got.get("committed"),
            "acked": got.get("acked") or [],
        }
