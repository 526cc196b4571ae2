"""What the queue's topic promises to keep: its durability settings as run options (issue 29).

Kafka acknowledges an ``acks=all`` write once every in-sync replica has it in its log, not on its
disk: by default nothing is fsynced by count or by time (``flush.messages`` and ``flush.ms``
unset), and durability comes from replication. These options choose, for the queue's topic,
what that promise rests on:

- ``--replication`` and ``--min-insync-replicas``: its replication factor (at most the cluster's
  brokers) and ``min.insync.replicas`` (at most the replication factor); 3 and 2 as every run
  had (on a cluster of fewer brokers, as many as it has);
- ``--flush-messages N``: the topic's ``flush.messages`` (``log.flush.interval.messages`` for
  one topic): each replica fsyncs its log once N messages are unflushed, 1 for every append;
  default: Kafka's own, which never flushes by count;
- ``--unclean-leader-election``: the topic's ``unclean.leader.election.enable`` (off by default,
  as kchaos renders it on every broker);
- ``--elr on|off``: Eligible Leader Replicas (KIP-966), the cluster's
  ``eligible.leader.replicas.version`` (1 or 0) finalized when the storage is formatted, on
  Kafka 4.0 and later (on by default from 4.1 for a new cluster, off in 4.0); default: the
  release's own.

Pure data and refusals, like ``client_choice``: the options are declared here (``OPTIONS``, among
the queue's own), checked before any run (``check``), written into plan.json's generator only
when asked for (``generator_params``: every stored plan keeps its bytes), applied when the topic
is created (``topic_configs``) or the storage formatted (``format_features``), and declared in
the history's header (``history_header``, key ``durability``), which the checkers that know
Kafka's durability model read (docs/history.md).
"""

from __future__ import annotations

from typing import Any

from clusters.kafka_dist import parse_version
from history.format import DURABILITY_FIELD
from history.options import AS_ASKED, Option, OptionError, Values

# The queue's options apply to its runs only (history/options.py refuse_inapplicable).
_QUEUE = ("workload", ("queue",))

# What every run had before the options existed (the generator always wrote these two).
# (history/format.py DURABILITY_DEFAULTS says them for histories without the header field.)
REPLICATION = 3
MIN_INSYNC_REPLICAS = 2
# Generator keys, the same names as the header's (docs/history.md), written only when asked for.
FLUSH_MESSAGES = "flush_messages"
UNCLEAN = "unclean_leader_election"
ELR = "elr"
ON, OFF = "on", "off"
# The feature KIP-966 added (Kafka 4.0; on by default for new clusters from 4.1), its level for
# each --elr, and the first line that has it.
ELR_FEATURE = "eligible.leader.replicas.version"
ELR_LEVEL = {ON: 1, OFF: 0}
ELR_FROM = (4, 0)
# Where the level is set: KRaft storage formatting (clusters/config.py feature_options).
KRAFT_TOPOLOGIES = ("kraft", "kraft-combined")
# The largest --flush-messages: beyond a billion, a flush by count never comes in a run.
MAX_FLUSH_MESSAGES = 10**9
# The largest replication factor a run may ask for: --controllers' largest combined cluster.
MAX_REPLICATION = 9

OPTIONS: tuple[Option, ...] = (
    Option(
        "replication",
        int,
        REPLICATION,
        stored=AS_ASKED,
        minimum=1,
        maximum=MAX_REPLICATION,
        applies_with=_QUEUE,
        help="The queue topic's replication factor, at most the cluster's brokers (default 3, "
        "or every broker of a smaller cluster).",
    ),
    Option(
        "min_insync_replicas",
        int,
        MIN_INSYNC_REPLICAS,
        stored=AS_ASKED,
        minimum=1,
        maximum=MAX_REPLICATION,
        applies_with=_QUEUE,
        help="The queue topic's min.insync.replicas, at most its replication factor (default "
        "2): how many replicas must hold a write before acks=all acknowledges it.",
    ),
    Option(
        FLUSH_MESSAGES,
        int,
        stored=AS_ASKED,
        minimum=1,
        maximum=MAX_FLUSH_MESSAGES,
        applies_with=_QUEUE,
        help="The queue topic's flush.messages: every replica fsyncs its log once this many "
        "messages are unflushed (1: every append). Default: Kafka's own, no flush by count "
        "(the OS writes back; docs/disk.md).",
    ),
    Option(
        UNCLEAN,
        bool,
        False,
        stored=AS_ASKED,
        applies_with=_QUEUE,
        help="Turn the queue topic's unclean.leader.election.enable on (off by default).",
    ),
    Option(
        ELR,
        str,
        choices=(ON, OFF),
        noun="ELR setting",
        stored=AS_ASKED,
        applies_with=_QUEUE,
        help="Eligible Leader Replicas (KIP-966): the cluster formatted with "
        "eligible.leader.replicas.version 1 (on) or 0 (off); Kafka 4.0+, KRaft. Default: the "
        "release's own (on from 4.1).",
    ),
)


def brokers_of(values: Values) -> int | None:
    """How many brokers the run's cluster has, None when an inventory says (``--hosts``)."""
    if getattr(values, "hosts", None):
        return None
    if getattr(values, "topology", "kraft-combined") == "kraft-combined":
        return int(getattr(values, "controllers", None) or 3)
    return 3  # kraft: 3 brokers beside the controllers; zk and migration: 3 brokers


def replication_of(options: Any) -> tuple[int, int]:
    """(replication factor, min.insync.replicas) of the queue's topic: as asked, each at most
    what holds it (the brokers, the replication factor), as the topic has always been made."""
    replication = int(getattr(options, "replication", None) or REPLICATION)
    brokers = brokers_of(options)
    if brokers is not None:
        replication = min(replication, brokers)
    min_isr = int(getattr(options, "min_insync_replicas", None) or MIN_INSYNC_REPLICAS)
    return replication, min(min_isr, replication)


def generator_params(options: Any) -> dict[str, Any]:
    """The durability settings beyond replication and min ISR, as the generator keeps them: {}
    for Kafka's defaults, so every earlier plan stays byte for byte the same."""
    out: dict[str, Any] = {}
    flush = getattr(options, FLUSH_MESSAGES, None)
    if flush is not None:
        out[FLUSH_MESSAGES] = int(flush)
    if getattr(options, UNCLEAN, False):
        out[UNCLEAN] = True
    elr = getattr(options, ELR, None)
    if elr is not None:
        out[ELR] = elr == ON
    return out


def topic_configs(gen: dict[str, Any], min_isr: int) -> dict[str, str]:
    """The queue topic's configs, as it is created."""
    config = {
        "min.insync.replicas": str(min_isr),
        "unclean.leader.election.enable": "true" if gen.get(UNCLEAN) else "false",
    }
    if gen.get(FLUSH_MESSAGES) is not None:
        config["flush.messages"] = str(int(gen[FLUSH_MESSAGES]))
    return config


def format_features(gen: dict[str, Any]) -> dict[str, int]:
    """eligible.leader.replicas.version for --elr; {} without it (the release's own level)."""
    if gen.get(ELR) is None:
        return {}
    return {ELR_FEATURE: ELR_LEVEL[ON if gen[ELR] else OFF]}


def history_header(gen: dict[str, Any]) -> dict[str, Any]:
    """The header's ``durability``: every setting, Kafka's default where the run set none
    (``elr`` null: the release's own, which the header does not know)."""
    return {
        DURABILITY_FIELD: {
            "replication": int(gen.get("replication", REPLICATION)),
            "min_insync_replicas": int(gen.get("min_insync_replicas", MIN_INSYNC_REPLICAS)),
            FLUSH_MESSAGES: gen.get(FLUSH_MESSAGES),
            UNCLEAN: bool(gen.get(UNCLEAN, False)),
            ELR: gen.get(ELR),
        }
    }


def _changes_elr(values: Values) -> str | None:
    """The step option that may change eligible.leader.replicas.version during the run, if any:
    a feature item naming it or a release version, or an upgrade or downgrade."""
    for item in str(getattr(values, "features", None) or "").split(","):
        item = item.strip()
        if item.startswith("dry-run:"):
            continue
        name = item.split("=", 1)[0]
        if name in (ELR_FEATURE, "release-version"):
            return f"--features {item}"
    for name in ("upgrade_to", "downgrade_to"):
        if getattr(values, name, None):
            return f"--{name.replace('_', '-')} {getattr(values, name)}"
    return None


def check(values: Values) -> None:
    """Refuses durability settings the run's cluster cannot have (beyond each option's own
    range): one sentence each, starting with the option at fault."""
    if values.workload != "queue":
        return  # refuse_inapplicable says that the options do not apply
    brokers = brokers_of(values)
    given = values.replication != REPLICATION
    if given and brokers is not None and values.replication > brokers:
        raise OptionError(
            f"--replication: at most {brokers}, the {values.topology} cluster's "
            f"broker{'s' if brokers != 1 else ''}, not {values.replication}"
        )
    replication, _ = replication_of(values)
    if values.min_insync_replicas != MIN_INSYNC_REPLICAS and (
        values.min_insync_replicas > replication
    ):
        raise OptionError(
            f"--min-insync-replicas: at most the topic's replication factor {replication}, not "
            f"{values.min_insync_replicas} (no acks=all write could ever be acknowledged)"
        )
    if values.elr is None:
        return
    if values.topology not in KRAFT_TOPOLOGIES:
        # The level is finalized when the storage is formatted, which only KRaft topologies do.
        raise OptionError(
            f"--elr needs a KRaft topology (kraft or kraft-combined), not {values.topology}"
        )
    old = [r for r in values.releases if (*parse_version(r), 0)[:2] < ELR_FROM]
    if old:
        raise OptionError(
            f"--elr needs Kafka 4.0 or later ({ELR_FEATURE}, KIP-966), not {', '.join(old)}"
        )
    changer = _changes_elr(values)
    if changer:
        raise OptionError(
            f"--elr: it sets {ELR_FEATURE} when the storage is formatted, and {changer} may "
            "change it during the run: give one of them"
        )
