"""JMX over HTTP through the Jolokia agent every node JVM runs, and the Kafka metrics kchaos reads.

One bulk request per node per sample keeps the cost at one round trip, which matters when the
observer samples every node four times a second on two cores.
"""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any

from clusters.topology import JOLOKIA_PORT
from history import strict_json

RAFT = "kafka.server:type=raft-metrics"
BROKER_METADATA = "kafka.server:type=broker-metadata-metrics"
BROKER_STATE = "kafka.server:type=KafkaServer,name=BrokerState"
ACTIVE_CONTROLLERS = "kafka.controller:type=KafkaController,name=ActiveControllerCount"
FENCED_BROKERS = "kafka.controller:type=KafkaController,name=FencedBrokerCount"
ACTIVE_BROKERS = "kafka.controller:type=KafkaController,name=ActiveBrokerCount"
ZK_MIGRATION_STATE = "kafka.controller:type=KafkaController,name=ZkMigrationState"
METADATA_VERSION = "kafka.server:type=MetadataLoader,name=CurrentMetadataVersion"
CONTROLLER_METADATA_VERSION = "kafka.controller:type=KafkaController,name=MetadataVersion"
# A pattern: Kafka registers `kafka.server:type=app-info,id=<node id>` (attribute `Version`) and,
# from its metrics, `kafka.server:type=app-info` (attribute `version`); reading every match, with
# no attribute list, finds whichever this node has.
APP_INFO = "kafka.server:type=app-info,*"
RUNTIME = "java.lang:type=Runtime"

# Kafka's BrokerState enum values (server-common BrokerState.java).
BROKER_STATES = {
    0: "NOT_RUNNING",
    1: "STARTING",
    2: "RECOVERY",
    3: "RUNNING",
    6: "PENDING_CONTROLLED_SHUTDOWN",
    7: "SHUTTING_DOWN",
    127: "UNKNOWN",
}
# ZkMigrationState values (metadata ZkMigrationState.java).
ZK_MIGRATION_STATES = {0: "NONE", 1: "MIGRATION", 2: "PRE_MIGRATION", 3: "POST_MIGRATION", 4: "ZK"}

RAFT_ATTRS = [
    "current-state",
    "current-leader",
    "current-epoch",
    "high-watermark",
    "log-end-offset",
]


class JmxUnavailable(Exception):
    """The node's agent did not answer (node down, paused, partitioned or still starting)."""


@dataclass(frozen=True)
class Jolokia:
    host: str
    port: int = JOLOKIA_PORT
    timeout: float = 2.0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/jolokia/"

    def read_many(self, reads: dict[str, tuple[str, list[str] | None]]) -> dict[str, Any]:
        """Reads several MBeans in one request; an MBean that does not exist reads as None."""
        names = list(reads)
        body = [
            {"type": "read", "mbean": mbean, **({"attribute": attrs} if attrs else {})}
            for mbean, attrs in (reads[n] for n in names)
        ]
        try:
            answers = json.loads(self._post(strict_json.dumps(body).encode()))
        except ValueError as exc:
            raise JmxUnavailable(f"{self.host}: {type(exc).__name__}") from None
        if not isinstance(answers, list):
            raise JmxUnavailable(f"{self.host}: JSONDecodeError")
        out: dict[str, Any] = {}
        for name, answer in zip(names, answers, strict=False):
            out[name] = answer.get("value") if answer.get("status") == 200 else None
        return out

    def _post(self, payload: bytes) -> bytes:
        """One POST on a connection of its own (see workloads/observe.py for why not kept).

        http.client, not requests: a sample costs ~0.3 ms of CPU instead of ~1 ms, and the
        observer makes one per node five times a second. Failures are named as requests named
        them, since the history keeps the name and the observer tells a refused connection
        (``ConnectionError``: the JVM is down) from a timeout (``ConnectTimeout``,
        ``ReadTimeout``: it may still be in flight)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            try:
                conn.connect()
            except TimeoutError:
                raise JmxUnavailable(f"{self.host}: ConnectTimeout") from None
            except OSError:
                raise JmxUnavailable(f"{self.host}: ConnectionError") from None
            try:
                conn.request("POST", "/jolokia/", payload, {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
            except TimeoutError:
                raise JmxUnavailable(f"{self.host}: ReadTimeout") from None
            except (OSError, http.client.HTTPException):
                raise JmxUnavailable(f"{self.host}: ConnectionError") from None
            if response.status >= 400:
                raise JmxUnavailable(f"{self.host}: HTTPError")
            return data
        finally:
            conn.close()


def _num(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def _gauge(value: Any) -> Any:
    return value.get("Value") if isinstance(value, dict) else None


def _software_version(app_info: Any) -> str | None:
    """The version from a pattern read of app-info: {mbean name: {attribute: value}}."""
    if not isinstance(app_info, dict):
        return None
    for name in sorted(app_info):
        attrs = app_info[name]
        if isinstance(attrs, dict):
            version = attrs.get("Version") or attrs.get("version")
            if version:
                return str(version)
    return None


# Kafka computes each raft-metrics attribute on its own when read, so one read can mix two
# epochs: an observer once reported (observer, leader 3003, epoch 7) while moving from following
# 3003 in epoch 6 to epoch 7, which 3001 led, and the split-brain rule took it for two leaders of
# epoch 7. Within one epoch the leader is unknown or one node, so a read between two equal reads
# of current-epoch (Jolokia runs a bulk request's reads in order) is one state of the node.
RAFT_REREADS = 2
_TORN: dict[str, Any] = {}


def _raft_view(got: dict[str, Any]) -> dict[str, Any] | None:
    """The raft-metrics view, _TORN when the epoch moved while it was read."""
    raft = got.get("raft")
    if not isinstance(raft, dict) or raft.get("current-state") is None:
        return None
    epoch = _num(raft.get("current-epoch"))
    before, after = _num(_epoch(got.get("epoch_before"))), _num(_epoch(got.get("epoch_after")))
    if before != epoch or after != epoch:
        return _TORN
    return {
        "state": raft.get("current-state"),
        "leader": _num(raft.get("current-leader")),
        "epoch": epoch,
        "high_watermark": _num(raft.get("high-watermark")),
        "log_end_offset": _num(raft.get("log-end-offset")),
    }


def _epoch(value: Any) -> Any:
    return value.get("current-epoch") if isinstance(value, dict) else None


def sample_kafka(host: str, roles: frozenset[str], timeout: float = 2.0) -> dict[str, Any]:
    """What a Kafka node says about the quorum and itself, in the history's observe shape."""
    has_raft = "controller" in roles or "broker" in roles
    reads: dict[str, tuple[str, list[str] | None]] = {}
    if has_raft:
        reads["epoch_before"] = (RAFT, ["current-epoch"])
    reads |= {
        "broker_state": (BROKER_STATE, ["Value"]),
        "active": (ACTIVE_CONTROLLERS, ["Value"]),
        "fenced": (FENCED_BROKERS, ["Value"]),
        "active_brokers": (ACTIVE_BROKERS, ["Value"]),
        "migration": (ZK_MIGRATION_STATE, ["Value"]),
        "mv": (METADATA_VERSION, ["Value"]),
        "controller_mv": (CONTROLLER_METADATA_VERSION, ["Value"]),
        "app_info": (APP_INFO, None),
        "runtime": (RUNTIME, ["StartTime"]),
    }
    if has_raft:
        reads["raft"] = (RAFT, RAFT_ATTRS)
    if "broker" in roles:
        reads["metadata"] = (BROKER_METADATA, ["last-applied-record-offset"])
    if has_raft:
        reads["epoch_after"] = (RAFT, ["current-epoch"])
    jolokia = Jolokia(host, timeout=timeout)
    got = jolokia.read_many(reads)
    raft_view = _raft_view(got)
    for _ in range(RAFT_REREADS):
        if raft_view is not _TORN:
            break
        raft_view = _raft_view(
            jolokia.read_many(
                {
                    "epoch_before": reads["epoch_before"],
                    "raft": reads["raft"],
                    "epoch_after": reads["epoch_after"],
                }
            )
        )
    if raft_view is _TORN:
        raft_view = None
    metadata = got.get("metadata")
    state_code = _num(_gauge(got.get("broker_state")))
    migration = _num(_gauge(got.get("migration")))
    mv = _gauge(got.get("mv")) or _gauge(got.get("controller_mv"))
    runtime = got.get("runtime")
    return {
        "roles": sorted(roles),
        "raft": raft_view,
        "active_controller_count": _num(_gauge(got.get("active"))),
        "metadata_offset": _num(metadata.get("last-applied-record-offset"))
        if isinstance(metadata, dict)
        else None,
        "fenced_broker_count": _num(_gauge(got.get("fenced"))),
        "active_broker_count": _num(_gauge(got.get("active_brokers"))),
        "broker_state": BROKER_STATES.get(state_code, str(state_code))
        if state_code is not None
        else None,
        "zk_migration_state": ZK_MIGRATION_STATES.get(migration, str(migration))
        if migration is not None
        else None,
        "metadata_version": str(mv) if mv is not None else None,
        "quorum": None,
        "version": _software_version(got.get("app_info")),
        # The JVM's start: the same value across samples means the same process lifetime.
        "started_ms": _num(runtime.get("StartTime")) if isinstance(runtime, dict) else None,
    }
