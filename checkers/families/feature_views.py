"""What the feature-level rules (checkers/families/features.py) read: each observer sample's KIP-584
view of the features (`View`) and each recorded feature step (`Step`), with what Kafka's own code
says about reading them.

A sample's `features` is the node's ApiVersions answer: `supported` ({name: [min, max]}),
`finalized` ({name: level}), `epoch` and `mode` (docs/history.md). Facts from the Kafka source
(3.8, 3.9, trunk of October 2024) that decide how a level is read:

- ApiVersions leaves every finalized feature at level 0 out (`createFinalizedFeatureKeys`), so an
  absent feature is at level 0, whatever version the node runs.
- In ZooKeeper mode `FinalizedFeatures` removes `metadata.version` ("In ZK mode, we never include
  it"): a ZooKeeper-mode sample says nothing about it.
- In KRaft mode `kraft.version` is the Raft layer's (KIP-853), not the metadata image's: 3.9+
  brokers add the Raft client's current level beside the image's features (and so at level 0
  list nothing), controllers serve their features publisher's image and leave it out, and 3.8
  brokers know nothing of it. So a KRaft sample shows `kraft.version` only when it lists it or
  is a 3.9+ broker (absent: 0), and never at the image's epoch: epoch-ordered rules skip it.
- `FinalizedFeaturesEpoch` below 0 means the information is not valid (KIP-778's schema: "The
  information is valid only if FinalizedFeaturesEpoch >= 0"): a starting controller serves a
  placeholder (metadata.version of the oldest KRaft release) at epoch -1. Such samples are left
  out entirely.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from checkers.core.findings import secs
from checkers.families.observer_samples import Sample
from checkers.scan.op_rows import row_value
from history.format import UPGRADE

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
KRAFT, ZK = "kraft", "zk"
FEATURES_F = "features"
# Where kafka-features.sh stopped answering each feature on its own (KAFKA-16308, first in 4.0.0:
# "Returning top level error ... if any feature failed to update"): before it, one request
# could apply some features and refuse others.
ATOMIC_FROM = (4, 0)


def parse_version(text: object) -> tuple[int, ...] | None:
    """A version such as "3.9.2" as (3, 9, 2); None unless it starts with a number."""
    if not isinstance(text, str):
        return None
    parts = re.match(r"\d+(?:\.\d+)*", text.strip())
    return tuple(int(p) for p in parts.group(0).split(".")) if parts else None


def _int(x: object) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


@dataclass(frozen=True)
class View:
    """One ok observer sample with valid features (epoch >= 0)."""

    sample: Sample
    mode: str
    epoch: int
    finalized: dict[str, int]
    supported: dict[str, tuple[int, int]]
    version: tuple[int, ...] | None
    started_ms: int | None
    roles: frozenset[str]

    @property
    def index(self) -> int:
        return self.sample.index

    @property
    def node(self) -> str:
        return self.sample.node

    @property
    def invoke_time(self) -> int:
        return self.sample.invoke_time

    @property
    def time(self) -> int:
        return self.sample.time

    def level(self, feature: str) -> int | None:
        """The finalized level this sample shows for `feature`; None: it cannot tell."""
        if self.mode == ZK and feature == METADATA_VERSION:
            return None
        if feature in self.finalized:
            return self.finalized[feature]
        if self.mode == KRAFT and feature == KRAFT_VERSION:
            listed = "broker" in self.roles and (self.version or ()) >= (3, 9)
            return 0 if listed else None
        return 0

    def cite(self) -> str:
        s = self.sample
        return (
            f"op {s.index} ({s.node}, {secs(s.invoke_time)}-{secs(s.time)}, {self.mode} "
            f"epoch {self.epoch})"
        )


def in_image(mode: str, feature: str) -> bool:
    """Whether `feature`'s level belongs to the state at the sample's epoch (see above)."""
    return not (mode == KRAFT and feature == KRAFT_VERSION)


def views_of(samples: list[Sample]) -> list[View]:
    """The samples whose features are valid, in sample order."""
    out = []
    for s in samples:
        f = s.value.get("features")
        if not isinstance(f, dict) or f.get("mode") not in (KRAFT, ZK):
            continue
        epoch = _int(f.get("epoch"))
        finalized = f.get("finalized")
        if epoch is None or epoch < 0 or not isinstance(finalized, dict):
            continue
        supported: dict[str, tuple[int, int]] = {}
        for name, r in (f.get("supported") or {}).items():
            if isinstance(r, list) and len(r) == 2 and all(_int(x) is not None for x in r):
                supported[str(name)] = (r[0], r[1])
        roles = s.value.get("roles")
        out.append(
            View(
                s,
                f["mode"],
                epoch,
                {str(k): v for k, v in finalized.items() if _int(v) is not None},
                supported,
                parse_version(s.value.get("version")),
                _int(s.value.get("started_ms")),
                frozenset(roles) if isinstance(roles, list) else frozenset(),
            )
        )
    return out


def unanswered(samples: list[Sample]) -> list[Sample]:
    """Ok samples whose node answered JMX but not ApiVersions, or with an invalid epoch: the
    node was starting or in trouble then."""
    out = []
    for s in samples:
        f = s.value.get("features", False)
        if f is False:
            continue
        epoch = f.get("epoch") if isinstance(f, dict) else None
        if not isinstance(f, dict) or _int(epoch) is None or epoch < 0:
            out.append(s)
    return out


# What a step did to one feature: YES (acknowledged), MAYBE (unknown), NO (it cannot have).
YES, MAYBE, NO = "yes", "maybe", "no"
_REFUSED = r"(?:Could|Can) not (?:upgrade|downgrade|disable) {}\b"
_APPLIED = r"{} (?:was|can be) (?:upgraded|downgraded|disabled)\b"


@dataclass(frozen=True)
class Step:
    """One feature step of process "upgrade" (docs/history.md): its invocation and completion."""

    index: int  # the invocation
    done: int | None  # the completion; None: it never completed (an info op)
    type: str  # ok, fail or info (info also for one that never completed)
    node: str | None
    invoke_time: int
    time: int | None
    action: str
    dry_run: bool
    unsafe: bool
    levels: dict[str, int]
    text: str = ""  # what the tool said (error or output)
    atomic: bool = False  # every controller that could answer it ran Kafka 4.0 or later
    ops: tuple[int, ...] = field(default=())

    @property
    def changes(self) -> bool:
        """Whether it asked for a change at all (a dry run never makes one)."""
        return not self.dry_run

    def applied(self, feature: str) -> str:
        """YES, MAYBE or NO for `feature` (one of its levels)."""
        if self.dry_run:
            return NO
        if self.type == "ok":
            return YES
        if self.type != "fail":
            return MAYBE
        name = re.escape(feature)
        if re.search(_APPLIED.format(name), self.text):
            return MAYBE  # kafka-features.sh said this one went through
        if len(self.levels) == 1 or self.atomic or re.search(_REFUSED.format(name), self.text):
            return NO
        # Kafka 3.x answers each feature of a request on its own: a failed step of several
        # features may have applied the ones it does not name as refused.
        return MAYBE

    def describe(self) -> str:
        what = ", ".join(f"{f}={lvl}" for f, lvl in sorted(self.levels.items()))
        flags = " --dry-run" if self.dry_run else ""
        flags += " --unsafe" if self.unsafe else ""
        return f"{self.action}{flags} {what}"

    def cite(self) -> str:
        end = "never completed" if self.time is None else f"{self.type} at {secs(self.time)}"
        via = f" via {self.node}" if self.node else ""
        return (
            f"feature step op {self.index} ({self.describe()}{via}, invoked at "
            f"{secs(self.invoke_time)}, {end}"
            + (f" op {self.done}" if self.done is not None else "")
            + ")"
        )


def steps_of(rows: list[dict[str, Any]], views: list[View] | None = None) -> list[Step]:
    """Feature steps from op rows (columnar, with value_json) of process "upgrade"; `views`
    tell whether every controller ran Kafka 4.0+ while a step was answered (`Step.atomic`)."""
    done = {
        r["invoke_index"]: r
        for r in rows
        if r["type"] != "invoke" and r.get("process") == UPGRADE and r["f"] == FEATURES_F
    }
    out = []
    for r in rows:
        if r["type"] != "invoke" or r.get("process") != UPGRADE or r["f"] != FEATURES_F:
            continue
        value = row_value(r)
        params = value.get("params") if isinstance(value, dict) else None
        if not isinstance(params, dict):
            continue
        levels = params.get("levels")
        levels = {
            str(k): v for k, v in (levels or {}).items() if _int(v) is not None
        } if isinstance(levels, dict) else {}  # fmt: skip
        end = done.get(r["index"])
        end_value = row_value(end) if end else None
        text = " ".join(
            str(t)
            for t in (
                end.get("error") if end else None,
                *(
                    (end_value.get("error"), end_value.get("output"))
                    if isinstance(end_value, dict)
                    else ()
                ),
            )
            if t
        )
        step = Step(
            index=r["index"],
            done=end["index"] if end else None,
            type=end["type"] if end else "info",
            node=r.get("node") or (value.get("node") if isinstance(value, dict) else None),
            invoke_time=r["time"],
            time=end["time"] if end else None,
            action=str(params.get("action") or "update"),
            dry_run=params.get("dry_run") is True,
            unsafe=params.get("unsafe") is True,
            levels=levels,
            text=text,
            ops=(r["index"],) + ((end["index"],) if end else ()),
        )
        if views is not None and end is not None:
            step = _with_atomic(step, views, end["time"])
        out.append(step)
    return out


def _with_atomic(step: Step, views: list[View], until: int) -> Step:
    return replace(step, atomic=controllers_atomic(views, step.invoke_time, until))


def controllers_atomic(views: list[View], since: int, until: int | None) -> bool:
    """Whether every controller that could have answered a request made between `since` and
    `until` (None: the end of the run) ran Kafka 4.0 or later: each controller's last sample
    before `since` and all its samples from then to `until` say so."""
    controllers = [v for v in views if "controller" in v.roles]
    if not controllers:
        return False
    judged: list[View] = []
    last_before: dict[str, View] = {}
    for v in controllers:
        if v.time < since:
            last_before[v.node] = v
        elif until is None or v.invoke_time <= until:
            judged.append(v)
    judged += last_before.values()
    return bool(judged) and all(v.version is not None and v.version >= ATOMIC_FROM for v in judged)
