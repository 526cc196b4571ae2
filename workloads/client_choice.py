"""Which Kafka client a queue run drives, and the protocols it asks the cluster for.

Two clients record the same history: librdkafka through confluent-kafka (every run before
`--client` existed) and Kafka's own Java client (`workloads/java_client.py`), which speaks the
newest protocols first: the 4.x transaction protocol (KIP-890 part 2, `transaction.version`
2) is in no librdkafka release (librdkafka#5423). Beside the client, a run may choose the
consumer group protocol of its subscribers (KIP-848) and the transaction protocol the cluster
is formatted with.

Pure data and refusals: the options are declared here (``OPTIONS``, among the queue's own) and
checked before any run (``check_values``), the queue workload writes them into plan.json's
generator, and the history's header says them.
"""

from __future__ import annotations

from typing import Any

from clusters.errors import ClusterError
from clusters.kafka_dist import check_release, parse_version
from history.options import AS_ASKED, Option, OptionError, Values

LIBRDKAFKA, JAVA = "librdkafka", "java"
CLIENTS = (LIBRDKAFKA, JAVA)  # the first is what a run without the option does
CLASSIC, CONSUMER = "classic", "consumer"
GROUP_PROTOCOLS = (CLASSIC, CONSUMER)
V2 = "v2"
TXN_PROTOCOLS = (CLASSIC, V2)
# The finalized `transaction.version` each transaction protocol formats the cluster with.
TRANSACTION_VERSION_FEATURE = "transaction.version"
TRANSACTION_VERSION = {CLASSIC: 0, V2: 2}
# The first release whose brokers run KIP-848's consumer protocol by default, and the first with
# transaction.version 2 production-ready (KIP-890 part 2, KIP-1022).
CONSUMER_PROTOCOL_FROM = (4, 0)
TXN_V2_FROM = (4, 0)
# History header fields (docs/history.md): which client wrote it and what it asked for.
CLIENT_FIELD, CLIENT_VERSION_FIELD = "client", "client_version"
GROUP_PROTOCOL_FIELD, TXN_PROTOCOL_FIELD = "group_protocol", "txn_protocol"

# The queue's client options (workloads/queue.py lists them among its own); what they need of
# each other and of the run is ``check``'s.
OPTIONS = (
    Option(
        "client",
        str,
        choices=CLIENTS,
        stored=AS_ASKED,
        quiet=(LIBRDKAFKA,),
        help="The Kafka client the queue drives: librdkafka (confluent-kafka, the default) or "
        "java (Kafka's own client, from the Maven jars; docs/clients.md).",
    ),
    Option(
        "client_version",
        str,
        stored=AS_ASKED,
        help="With --client java: the Kafka release whose client jars to use (default: the "
        "release the run starts on).",
    ),
    Option(
        "group_protocol",
        str,
        choices=GROUP_PROTOCOLS,
        stored=AS_ASKED,
        quiet=(CLASSIC,),
        help="With --mode subscribe: the consumer group protocol, classic (the default) or "
        "consumer (KIP-848, Kafka 4.0+).",
    ),
    Option(
        "txn_protocol",
        str,
        choices=TXN_PROTOCOLS,
        noun="transaction protocol",
        stored=AS_ASKED,
        help="With --txn on Kafka 4.0+: the transaction protocol the cluster is formatted with, "
        "classic (transaction.version 0) or v2 (KIP-890 part 2, --client java only); default: "
        "the release's own default.",
    ),
)


def consumer_settings(
    gen: dict[str, Any], bootstrap: str, group: str, subscriber: bool
) -> dict[str, Any]:
    """The queue consumer's settings every client shares (librdkafka and Kafka's Java client
    spell them alike). A `subscriber` joins the group by the run's group protocol: under
    KIP-848's (`group.protocol=consumer`) the session and heartbeat are the brokers'
    (group.consumer.*, clusters/config.py), and both clients refuse the client-side ones."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": "read_committed" if gen["txn"] else "read_uncommitted",
    }
    if subscriber and gen.get(GROUP_PROTOCOL_FIELD) == CONSUMER:
        conf["group.protocol"] = CONSUMER
    else:
        conf["session.timeout.ms"] = 6000
        conf["heartbeat.interval.ms"] = 1000
    return conf


class ClientChoiceError(ValueError):
    """A client option that cannot work; the message is the whole story."""


def client_of(gen: dict[str, Any]) -> str:
    return str(gen.get(CLIENT_FIELD) or LIBRDKAFKA)


def client_params(options: Any) -> dict[str, Any]:
    """The generator parameters of the client choice: {} for what every earlier run did
    (librdkafka, classic groups, the release's own transaction protocol), so earlier plans stay
    byte for byte the same."""
    out: dict[str, Any] = {}
    client = getattr(options, "client", None)
    if client not in (None, LIBRDKAFKA):
        out[CLIENT_FIELD] = client
        version = getattr(options, "client_version", None) or options.version
        out[CLIENT_VERSION_FIELD] = version
    group = getattr(options, "group_protocol", None)
    if group not in (None, CLASSIC):
        out[GROUP_PROTOCOL_FIELD] = group
    txn = getattr(options, "txn_protocol", None)
    if txn is not None:
        out[TXN_PROTOCOL_FIELD] = txn
    return out


def format_features(gen: dict[str, Any]) -> dict[str, int]:
    """The feature levels the run's KRaft nodes are formatted with (`kafka-storage format
    --feature`, clusters/config.py): `transaction.version` by the transaction protocol asked
    for; {} without one, so the nodes are formatted with the release's own levels as before."""
    txn = gen.get(TXN_PROTOCOL_FIELD)
    if txn is None:
        return {}
    return {TRANSACTION_VERSION_FEATURE: TRANSACTION_VERSION[txn]}


def history_header(gen: dict[str, Any]) -> dict[str, Any]:
    """What the history's header declares of the client; {} for librdkafka with defaults."""
    return {k: gen[k] for k in (CLIENT_FIELD, GROUP_PROTOCOL_FIELD, TXN_PROTOCOL_FIELD) if k in gen}


def check_values(values: Values) -> None:
    """``check`` of a run's option values, its refusals as OptionError."""
    try:
        if values.client_version is not None:
            check_release(values.client_version)
        check(
            client=values.client,
            client_version=values.client_version,
            group_protocol=values.group_protocol,
            txn_protocol=values.txn_protocol,
            workload=values.workload,
            mode=values.mode,
            txn=values.txn,
            topology=values.topology,
            releases=list(values.releases),
        )
    except ClientChoiceError as exc:
        raise OptionError(str(exc)) from None
    except ClusterError as exc:
        raise OptionError(f"client-version: {exc}") from None


def check(
    *,
    client: str | None,
    client_version: str | None,
    group_protocol: str | None,
    txn_protocol: str | None,
    workload: str,
    mode: str,
    txn: bool,
    topology: str,
    releases: list[str],
) -> None:
    """Raises ClientChoiceError for a combination that cannot run as asked."""
    if client is not None and client not in CLIENTS:
        raise ClientChoiceError(f"unknown client '{client}': choose one of {', '.join(CLIENTS)}")
    if client_version is not None and client != JAVA:
        raise ClientChoiceError("client-version only applies with --client java")
    if client == JAVA and workload != "queue":
        raise ClientChoiceError(
            f"--client java drives the queue workload; '{workload}' runs on librdkafka only"
        )
    if group_protocol is not None:
        if group_protocol not in GROUP_PROTOCOLS:
            raise ClientChoiceError(
                f"unknown group protocol '{group_protocol}': choose one of "
                f"{', '.join(GROUP_PROTOCOLS)}"
            )
        if mode != "subscribe":
            raise ClientChoiceError("group-protocol applies to subscribers: use --mode subscribe")
        if group_protocol == CONSUMER:
            old = [r for r in releases if parse_version(r)[:2] < CONSUMER_PROTOCOL_FROM]
            if old:
                raise ClientChoiceError(
                    f"group-protocol consumer (KIP-848) needs Kafka 4.0 or later on every "
                    f"release of the run, not {', '.join(old)}"
                )
    if txn_protocol is not None:
        if txn_protocol not in TXN_PROTOCOLS:
            raise ClientChoiceError(
                f"unknown transaction protocol '{txn_protocol}': choose one of "
                f"{', '.join(TXN_PROTOCOLS)}"
            )
        if not txn:
            raise ClientChoiceError("txn-protocol applies to transactions: add --txn")
        if topology not in ("kraft", "kraft-combined"):
            # The level is set when the storage is formatted, which only KRaft topologies do.
            raise ClientChoiceError(
                f"txn-protocol needs a KRaft topology (kraft or kraft-combined), not {topology}"
            )
        old = [r for r in releases if parse_version(r)[:2] < TXN_V2_FROM]
        if old:
            raise ClientChoiceError(
                f"txn-protocol needs Kafka 4.0 or later (the transaction.version feature), "
                f"not {', '.join(old)}"
            )
        if txn_protocol == V2 and client != JAVA:
            raise ClientChoiceError(
                "txn-protocol v2 needs --client java: librdkafka does not implement "
                "transaction.version 2 (KIP-890 part 2, librdkafka#5423)"
            )
    if client_version is not None:
        try:
            parse_version(client_version)
        except ClusterError as exc:
            raise ClientChoiceError(f"client-version: {exc}") from None
