"""The run's durability settings, as the history declares them (header `durability`,
docs/history.md; written by the queue workload) and, where it does not, as the plan and the
committed metadata log show them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from history.format import DURABILITY_DEFAULTS, DURABILITY_FIELD

# What a history without the key ran with: kchaos's defaults before runs could change them.
DURABILITY = DURABILITY_FIELD
DEFAULTS: dict[str, Any] = dict(DURABILITY_DEFAULTS)


@dataclass(frozen=True)
class Settings:
    replication: int
    min_insync_replicas: int
    flush_messages: int | None  # None: Kafka's default, no flush by count (nor by time)
    unclean_leader_election: bool
    elr: bool | None  # None: the release's default, read from the committed log if it can be
    declared: bool  # the header said so (else the defaults, the plan's replication and min ISR)

    @property
    def min_isr(self) -> int:
        """The ISR size an acks=all write needs, capped at the replica count (an uncapped min
        ISR refuses every write: nothing is acknowledged to lose)."""
        return max(1, min(self.min_insync_replicas, self.replication))

    @property
    def fsync_each(self) -> bool:
        """flush.messages=1: every replica fsyncs each append before it answers for it."""
        return self.flush_messages == 1

    def describe(self) -> str:
        flush = (
            "Kafka's default flush policy (no fsync by count or time)"
            if self.flush_messages is None
            else f"flush.messages={self.flush_messages}"
        )
        elr = {True: "on", False: "off", None: "the release's default"}[self.elr]
        return (
            f"replication {self.replication}, min.insync.replicas {self.min_insync_replicas}, "
            f"{flush}, unclean.leader.election.enable="
            f"{str(self.unclean_leader_election).lower()}, ELR {elr}"
            + ("" if self.declared else " (the history declares none: kchaos's defaults)")
        )


class SettingsError(ValueError):
    """A `durability` header that cannot be read: one sentence saying what is wrong."""


def _int(d: dict[str, Any], key: str, low: int) -> int:
    v = d[key]
    if not isinstance(v, int) or isinstance(v, bool) or v < low:
        raise SettingsError(f"durability.{key} is {v!r}, not an integer of at least {low}")
    return v


def settings_of(header: dict[str, Any], generator: dict[str, Any] | None) -> Settings:
    """The header's `durability` over the defaults (docs/history.md); without it, the plan's
    `replication` and `min_insync_replicas` (every queue plan has them) over the defaults.
    Raises SettingsError for a header whose values are not what the key says."""
    said = header.get(DURABILITY)
    if said is None:
        d = dict(DEFAULTS)
        for key in ("replication", "min_insync_replicas"):
            v = (generator or {}).get(key)
            if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
                d[key] = v
        declared = False
    elif not isinstance(said, dict):
        raise SettingsError(f"the history header's durability is {said!r}, not an object")
    else:
        d = {**DEFAULTS, **said}
        declared = True
    flush = d["flush_messages"]
    if flush is not None:
        flush = _int(d, "flush_messages", 1)
    for key in ("unclean_leader_election", "elr"):
        if not (isinstance(d[key], bool) or (key == "elr" and d[key] is None)):
            raise SettingsError(f"durability.{key} is {d[key]!r}, not true or false")
    return Settings(
        _int(d, "replication", 1),
        _int(d, "min_insync_replicas", 1),
        flush,
        d["unclean_leader_election"],
        d["elr"],
        declared,
    )
