"""KIP-584 / KIP-778 feature levels, judged from observer samples and recorded feature steps.

Pure functions from op rows to findings: `check_features(observed, upgrade_rows)`. How a sample's
levels are read (which features a sample can speak for, which belong to the epoch it reports)
is in checkers/families/feature_views.py; docs/checkers.md ("Feature levels") says what each rule
claims and, as carefully, what it does not.

Two facts carry every rule that compares samples of different nodes:

- An epoch names one state: in KRaft mode the metadata log offset of the image the node serves,
  in ZooKeeper mode the version of the /feature znode. The same epoch in one mode is the same
  state, and a higher one comes later; samples of different modes are never compared (a
  migration moves nodes from one to the other).
- Only feature steps change finalized levels, and a step's record lands after its invocation:
  a record written for a step invoked after a sample was taken sits above that sample's epoch.
  Samples lag (a broker applies the log when it gets to it), so nothing is ever concluded from a
  sample's time alone, only from epochs, or from samples taken after everything settled.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from checkers.core.findings import Finding, secs
from checkers.families.feature_views import (
    FEATURES_F,
    KRAFT,
    KRAFT_VERSION,
    NO,
    Step,
    View,
    controllers_atomic,
    in_image,
    steps_of,
    unanswered,
    views_of,
)
from checkers.families.observer_samples import MetadataInput

KIP584_EPOCH = (
    'KIP-584: "The metadata served to the client will contain an epoch value. These epoch '
    'values are integers and will increase monotonically whenever the metadata changes."'
)
RULES = {
    "feature-epoch-regressed": KIP584_EPOCH,
    "feature-levels-diverged": (
        KIP584_EPOCH + ' "Note: here, the metadata epoch # applies for the entire metadata '
        'contents": one epoch, one set of finalized levels'
    ),
    "feature-update-lost": (
        'KIP-584: "By durable, we mean that the finalized features should be persisted durably '
        'and remembered across broker restarts."; ' + KIP584_EPOCH
    ),
    "feature-refused-took-effect": (
        'KIP-584: "the system will dynamically verify that all brokers in the cluster support '
        'the intended version. If not, the request will be rejected."; KIP-778: "--dry-run '
        'Validate this downgrade, but do not perform it."'
    ),
    "feature-update-partial": (
        'KIP-584: "when processing a request to finalize a set of feature version levels, the '
        "system will dynamically verify that all brokers in the cluster support the intended "
        'version. If not, the request will be rejected.": a request finalizes its set, or is '
        "rejected (Kafka 4.0+ answers it whole: KAFKA-16308)"
    ),
    "static-quorum-kraft-version-changed": (
        'KIP-853: "KRaft will use the kraft.version to determine which version of '
        'KRaftVersionRecord and VotersRecord to write to the log"; a static quorum '
        "(controller.quorum.voters) is at kraft.version 0, and no release before 4.1 moves it "
        "to 1 (Kafka 4.1's static-to-dynamic upgrade, KAFKA-16538): while every controller "
        "runs an older release, its kraft.version must not change"
    ),
    "unsupported-level-served": (
        'KIP-778: "If a broker encounters an unsupported metadata.version, it should unregister '
        'itself and terminate."; "If this inactive controller encounters a FeatureLevelRecord '
        'for metadata.version that it cannot support, it should terminate."; KIP-584: "If it is '
        "not, it will either refuse to start up or eventually die as soon as it discovers a "
        'feature incompatibility."'
    ),
}
# After the last thing that could have held a node back (a fault, a heal, a restart, an upgrade
# or migration step, a node not answering), how long before every node's view is taken as caught
# up: brokers fetch the metadata log continuously (500 ms fetch wait) and a restarted node
# publishes no image before it has caught up to the high watermark.
SETTLE_NS = 5_000_000_000
# How long a node may serve a level it does not support: a controller that replays an
# unsupported FeatureLevelRecord halts at once, but its features publisher may answer one
# ApiVersions first ("eventually die as soon as it discovers", KIP-584).
GRACE_NS = 5_000_000_000
RUNNING = "RUNNING"
NEVER_SETTLED = 2**62
# The first release whose controllers upgrade a static quorum's kraft.version (KAFKA-16538,
# KIP-853's static-to-dynamic path); 4.0.2 answers `kraft.version was upgraded to 1.` to
# `kafka-features upgrade --release-version 4.0` and stays at 0 (tried for real:
# docs/upgrades.md).
KRAFT_UPGRADE_FROM = (4, 1)


def check_features(observed: MetadataInput, upgrade_rows: list[dict[str, Any]]) -> list[Finding]:
    """Every feature-level finding of a run: `observed` (observer_samples.MetadataInput) and the
    op rows of process "upgrade" (columnar, with value_json)."""
    return features_and_notes(observed, upgrade_rows)[0]


def features_and_notes(
    observed: MetadataInput, upgrade_rows: list[dict[str, Any]]
) -> tuple[list[Finding], list[str]]:
    """`check_features`, and the notes on what it deliberately left unjudged."""
    views = views_of(observed.samples)
    if not views:
        return [], []
    steps = steps_of(upgrade_rows, views)
    losses = sorted(d.time for d in observed.disruptions if d.data_loss)
    quiet = _quiet_since(observed, upgrade_rows)
    lost = _lost_updates(steps, views, losses)
    findings = _epoch_regressions(views) + _divergences(views, losses) + lost
    reported = {(f.data["step"], f.data["feature"]) for f in lost}
    pinned = static_kraft_pinned(views)
    notes = []
    if pinned:
        for u in steps:
            if u.type == "ok" and u.changes and u.levels.get(KRAFT_VERSION, 0) > 0:
                reported.add((u.index, KRAFT_VERSION))
                notes.append(
                    f"feature levels: {u.cite()} was acknowledged with kraft.version="
                    f"{u.levels[KRAFT_VERSION]} on a static quorum whose controllers all ran "
                    "releases before 4.1, which keep kraft.version 0 (Kafka 4.0 answers 'was "
                    "upgraded' and changes nothing): judged by static-quorum-kraft-version-"
                    "changed, not as a lost update"
                )
    findings += _never_shown(steps, views, losses, quiet, reported)
    findings += _refused_effects(steps, views, losses)
    findings += _partial_updates(steps, views, losses, quiet)
    findings += _unsupported(views, observed)
    findings += _static_kraft_changed(views)
    return sorted(findings, key=Finding.sort_key), notes


def _finding(kind: str, ops: Iterable[int], text: str, **data: Any) -> Finding:
    return Finding(
        kind,
        None,
        tuple(sorted(set(ops))),
        f"{text}. Rule: {RULES[kind]}",
        {"rule": RULES[kind], **data},
    )


def _quiet_since(observed: MetadataInput, upgrade_rows: list[dict[str, Any]]) -> int:
    """The last time anything could have held a node's view back (see SETTLE_NS)."""
    times = [d.time for d in observed.disruptions]  # faults, heals, migration steps, silences
    times += [s.time for s in unanswered(observed.samples)]
    # A pause never resumed in the history: nothing after it counts as settled.
    times += [f.end if f.end is not None else NEVER_SETTLED for f in observed.freezes]
    # Rolls and other upgrade steps restart nodes; feature steps themselves are judged.
    times += [r["time"] for r in upgrade_rows if r.get("f") != FEATURES_F]
    return max(times, default=0)


def _lost_between(losses: list[int], start: int, end: int | None) -> bool:
    """A fault that may have erased a node's disk between the two times: after it, a log may be
    rebuilt from another history, so no epoch before it is compared with one after it."""
    return any(start <= t and (end is None or t <= end) for t in losses)


def _levels(view: View, features: Iterable[str]) -> str:
    return ", ".join(f"{f}={view.level(f)}" for f in features)


def _changes_of(steps: list[Step], feature: str) -> list[Step]:
    """The steps that asked for a change of `feature` (no dry run), in order."""
    return [s for s in steps if s.changes and feature in s.levels]


# -- 1. feature-epoch-regressed ------------------------------------------------------------


def _epoch_regressions(views: list[View]) -> list[Finding]:
    """Per node, JVM lifetime and mode: an epoch below one it served before.

    Across a restart nothing is claimed: the node rebuilds its view from its disk and the
    quorum, and KIP-584 itself allows "an older lower epoch" to be "briefly returned during
    discovery"; what a node keeps is its own order while it runs.
    """
    out = []
    top: dict[tuple[str, int, str], View] = {}
    found: dict[tuple[str, int, str], list[View]] = {}
    for v in views:
        if v.started_ms is None:
            continue
        life = (v.node, v.started_ms, v.mode)
        best = top.get(life)
        if best is not None and v.epoch < best.epoch:
            if life in found:
                found[life].append(v)
            else:
                found[life] = [best, v]
        if best is None or v.epoch > best.epoch:
            top[life] = v
    for (node, started, mode), (high, low, *more) in found.items():
        further = len(more)
        out.append(
            _finding(
                "feature-epoch-regressed",
                [high.index, low.index],
                f"{node} served finalized features at {mode} epoch {high.epoch} in "
                f"{high.cite()}, then at the lower epoch {low.epoch} in {low.cite()}, in one "
                f"JVM lifetime (started_ms {started} in both)"
                + (f"; {further} more of its samples went below {high.epoch}" if further else ""),
                node=node,
                mode=mode,
                started_ms=started,
                epochs=[high.epoch, low.epoch],
            )
        )
    return out


# -- 2. feature-levels-diverged ------------------------------------------------------------


def _divergences(views: list[View], losses: list[int]) -> list[Finding]:
    """Two samples of one mode and one epoch showing different levels of a feature both can
    speak for (an unlisted feature is at level 0)."""
    groups: dict[tuple[str, int], list[View]] = {}
    for v in views:
        groups.setdefault((v.mode, v.epoch), []).append(v)
    out = []
    for (mode, epoch), group in sorted(groups.items()):
        names = sorted({f for v in group for f in v.finalized if in_image(mode, f)})
        shown: dict[tuple[Any, ...], View] = {}  # the first sample of each distinct view
        for v in group:
            shown.setdefault(tuple(v.level(f) for f in names), v)
        pair = _differing_pair(list(shown.values()), names, losses)
        if pair is None:
            continue
        a, b, differ = pair
        out.append(
            _finding(
                "feature-levels-diverged",
                [a.index, b.index],
                f"two samples at {mode} epoch {epoch} show different finalized levels: "
                f"{a.node} shows {_levels(a, differ)} in {a.cite()}, {b.node} shows "
                f"{_levels(b, differ)} in {b.cite()} (a feature a node does not list is at "
                f"level 0)"
                + (f"; {len(shown)} different views at this epoch" if len(shown) > 2 else ""),
                mode=mode,
                epoch=epoch,
                features=differ,
                nodes=[a.node, b.node],
            )
        )
    return out


def _differing_pair(
    reps: list[View], names: list[str], losses: list[int]
) -> tuple[View, View, list[str]] | None:
    for i, a in enumerate(reps):
        for b in reps[i + 1 :]:
            differ = [
                f
                for f in names
                if None not in (a.level(f), b.level(f)) and a.level(f) != b.level(f)
            ]
            start = min(a.invoke_time, b.invoke_time)
            if differ and not _lost_between(losses, start, max(a.time, b.time)):
                return a, b, differ
    return None


# -- 3. feature-update-lost ----------------------------------------------------------------


def _new_level(u: Step, feature: str, level: int, steps: list[Step], mviews: list[View]) -> bool:
    """Whether `level` can only appear through `u` or a later step: no earlier step asked for
    it, and the samples taken before any step touched the feature show another level. Then a
    sample showing it is at or above the epoch of u's record."""
    changes = _changes_of(steps, feature)
    if any(s.levels[feature] == level for s in changes if s.invoke_time < u.invoke_time):
        return False
    first = min(s.invoke_time for s in changes)
    before = [v for v in mviews if v.time < first]
    return bool(before) and all(v.level(feature) != level for v in before)


def _may_explain(s: Step, u: Step, feature: str, until: int | None) -> bool:
    """Whether step `s` may have written a record of `feature` after `u`'s, by `until`: invoked
    after `u`, or before it with an outcome unknown (such a request may still be answered)."""
    if s is u or not s.changes or feature not in s.levels:
        return False
    if until is not None and s.invoke_time > until:
        return False
    return s.invoke_time > u.invoke_time or s.time is None or s.type == "info"


def _lost_updates(steps: list[Step], views: list[View], losses: list[int]) -> list[Finding]:
    """An acknowledged level, seen at some epoch, then another level at a later epoch that no
    other step can account for."""
    out = []
    for u in steps:
        if u.type != "ok" or not u.changes:
            continue
        for feature, level in sorted(u.levels.items()):
            for mode in sorted({v.mode for v in views}):
                if not in_image(mode, feature):
                    continue
                mviews = [v for v in views if v.mode == mode and v.level(feature) is not None]
                if not _new_level(u, feature, level, steps, mviews):
                    continue
                seen = [
                    v
                    for v in mviews
                    if v.level(feature) == level and v.invoke_time >= u.invoke_time
                ]
                if not seen:
                    continue
                s1 = min(seen, key=lambda v: (v.epoch, v.index))
                s2 = next(
                    (
                        v
                        for v in mviews
                        if v.epoch > s1.epoch
                        and v.level(feature) != level
                        and not any(_may_explain(s, u, feature, v.time) for s in steps)
                        and not _lost_between(losses, min(s1.invoke_time, v.invoke_time), v.time)
                    ),
                    None,
                )
                if s2 is None:
                    continue
                out.append(
                    _finding(
                        "feature-update-lost",
                        [*u.ops, s1.index, s2.index],
                        f"{u.cite()} was acknowledged, setting {feature} to {level}; "
                        f"{s1.node} showed {feature}={level} at {mode} epoch {s1.epoch} in "
                        f"{s1.cite()}, then {s2.node} showed {feature}={s2.level(feature)} at "
                        f"the later epoch {s2.epoch} in {s2.cite()}, and no other step that "
                        f"could change {feature} was invoked before that sample (no earlier "
                        f"step asked for {feature}={level} and the samples before the first "
                        f"{feature} step show another level, so epoch {s1.epoch} already holds "
                        f"this update)",
                        step=u.index,
                        feature=feature,
                        level=level,
                        mode=mode,
                        epochs=[s1.epoch, s2.epoch],
                    )
                )
                break
    return out


def _last_views(views: list[View]) -> list[View]:
    last: dict[str, View] = {}
    for v in views:
        last[v.node] = v
    return list(last.values())


def _settled(views: list[View], after: int) -> bool:
    return all(v.invoke_time >= after + SETTLE_NS for v in views)


def _never_shown(
    steps: list[Step],
    views: list[View],
    losses: list[int],
    quiet: int,
    reported: set[tuple[int, str]],
) -> list[Finding]:
    """An acknowledged level that no node shows at the end of the run, every node's last sample
    taken once everything had settled, and no later step of the feature."""
    lasts = _last_views(views)
    if len({v.mode for v in lasts}) != 1:
        return []  # a run that ends mid-migration: which mode holds the update?
    out = []
    for u in steps:
        if u.type != "ok" or not u.changes or u.time is None:
            continue
        if not _settled(lasts, max(u.time, quiet)) or _lost_between(losses, u.invoke_time, None):
            continue
        for feature, level in sorted(u.levels.items()):
            if (u.index, feature) in reported:
                continue
            known = [v for v in lasts if v.level(feature) is not None]
            if not known or any(v.level(feature) == level for v in known):
                continue
            if any(_may_explain(s, u, feature, None) for s in steps):
                continue
            out.append(
                _finding(
                    "feature-update-lost",
                    [*u.ops, *(v.index for v in known)],
                    f"{u.cite()} was acknowledged, setting {feature} to {level}, but no node "
                    f"shows it at the end of the run: "
                    + "; ".join(
                        f"{v.node} shows {feature}={v.level(feature)} in {v.cite()}" for v in known
                    )
                    + f". Each is the node's last sample, taken at least {SETTLE_NS / 1e9:g} s "
                    f"after the acknowledgement and after the last fault, restart, upgrade "
                    f"step or silent sample ({secs(max(u.time, quiet))}), and no later step "
                    f"asked to change {feature}",
                    step=u.index,
                    feature=feature,
                    level=level,
                    nodes=[v.node for v in known],
                )
            )
    return out


# -- 4. feature-refused-took-effect ---------------------------------------------------------


def _refused_effects(steps: list[Step], views: list[View], losses: list[int]) -> list[Finding]:
    """A dry run, or a refusal, whose level then appears at a later epoch with no accepted (or
    possibly accepted) step that asked for it."""
    out = []
    for x in steps:
        for feature, level in sorted(x.levels.items()):
            if x.applied(feature) != NO:
                continue
            for mode in sorted({v.mode for v in views}):
                found = _refused_in_mode(x, feature, level, mode, steps, views, losses)
                if found is not None:
                    out.append(found)
                    break
    return out


def _refused_in_mode(
    x: Step,
    feature: str,
    level: int,
    mode: str,
    steps: list[Step],
    views: list[View],
    losses: list[int],
) -> Finding | None:
    if not in_image(mode, feature):
        return None
    mviews = [v for v in views if v.mode == mode and v.level(feature) is not None]
    before = [v for v in mviews if v.time < x.invoke_time]
    if not before:
        return None
    high = max(before, key=lambda v: (v.epoch, v.index))
    if high.level(feature) == level:
        return None
    for v in mviews:
        if v.invoke_time < x.invoke_time or v.epoch <= high.epoch or v.level(feature) != level:
            continue
        accepted = [
            s
            for s in steps
            if s is not x
            and s.changes
            and s.levels.get(feature) == level
            and s.applied(feature) != NO
            and s.invoke_time <= v.time
        ]
        if accepted or _lost_between(losses, high.invoke_time, v.time):
            return None  # and so for every later sample
        why = "a dry run" if x.dry_run else f"refused ({x.type}: {x.text or 'no error text'})"
        return _finding(
            "feature-refused-took-effect",
            [*x.ops, high.index, v.index],
            f"{x.cite()} was {why}, asking for {feature}={level}; before it, the highest-epoch "
            f"sample {high.cite()} showed {feature}={high.level(feature)}; then {v.cite()} "
            f"showed {feature}={level} at a later epoch, and no step that was or may have been "
            f"accepted asked for {feature}={level} before that sample",
            step=x.index,
            feature=feature,
            level=level,
            mode=mode,
            epochs=[high.epoch, v.epoch],
        )
    return None


# -- 5. feature-update-partial --------------------------------------------------------------


def _partial_updates(
    steps: list[Step], views: list[View], losses: list[int], quiet: int
) -> list[Finding]:
    """A step of unknown outcome, of several features, that every node shows half done at the
    end of the run, while every controller ran Kafka 4.0+ (which applies a request whole)."""
    lasts = _last_views(views)
    if len({v.mode for v in lasts}) != 1:
        return []
    mode = lasts[0].mode
    out = []
    for x in steps:
        if x.type != "info" or not x.changes:
            continue
        end = x.time if x.time is not None else x.invoke_time
        if not _settled(lasts, max(end, quiet)) or _lost_between(losses, x.invoke_time, None):
            continue
        names = sorted(
            f for f in x.levels if in_image(mode, f) and all(v.level(f) is not None for v in lasts)
        )
        if len(names) < 2 or any(_may_explain(s, x, f, None) for s in steps for f in names):
            continue
        if not controllers_atomic(views, x.invoke_time, None):
            continue
        done = [f for f in names if all(v.level(f) == x.levels[f] for v in lasts)]
        undone = [f for f in names if all(v.level(f) != x.levels[f] for v in lasts)]
        changed = [(f, h) for f in done if (h := _was_other(x, f, mode, steps, views)) is not None]
        if not changed or not undone:
            continue
        out.append(
            _finding(
                "feature-update-partial",
                [*x.ops, *(h.index for _, h in changed), *(v.index for v in lasts)],
                f"{x.cite()} ended with its outcome unknown; at the end of the run every node "
                f"shows {', '.join(f'{f}={x.levels[f]}' for f, _ in changed)} as it asked "
                f"(before it, "
                + "; ".join(f"{h.cite()} showed {f}={h.level(f)}" for f, h in changed)
                + f") but not {', '.join(f'{f}={x.levels[f]}' for f in undone)}: "
                + "; ".join(f"{v.node} shows {_levels(v, undone)} in {v.cite()}" for v in lasts)
                + ". Every controller sampled from before the step to the end ran Kafka 4.0+, "
                "which applies an UpdateFeatures request whole or not at all; no other step "
                "asked to change these features",
                step=x.index,
                done=[f for f, _ in changed],
                undone=undone,
            )
        )
    return out


def _was_other(
    x: Step, feature: str, mode: str, steps: list[Step], views: list[View]
) -> View | None:
    """The highest-epoch sample before `x` if it shows `feature` at another level than `x` asked
    for and no earlier step asked for that level (so only `x` can have set it)."""
    target = x.levels[feature]
    if any(s.levels[feature] == target for s in _changes_of(steps, feature) if s.index < x.index):
        return None
    before = [
        v
        for v in views
        if v.mode == mode and v.time < x.invoke_time and v.level(feature) is not None
    ]
    if not before:
        return None
    high = max(before, key=lambda v: (v.epoch, v.index))
    return high if high.level(feature) != target else None


# -- 7. static-quorum-kraft-version-changed ------------------------------------------------


def _kraft_views(views: list[View]) -> list[View]:
    return [v for v in views if v.mode == KRAFT and v.level(KRAFT_VERSION) is not None]


def _before_kraft_upgrades(v: View) -> bool:
    """Not a controller on 4.1 or later, as far as the sample says (a sample whose JMX read
    named no version, a node starting, says nothing either way)."""
    return "controller" not in v.roles or v.version is None or v.version < KRAFT_UPGRADE_FROM


def static_kraft_pinned(views: list[View]) -> bool:
    """Whether the run's quorum started static (its first sample that can tell shows
    kraft.version 0) and every controller sampled ran a release before 4.1 all run long (at
    least one sample of a controller names its release)."""
    known = _kraft_views(views)
    if not known or known[0].level(KRAFT_VERSION) != 0:
        return False
    controllers = [v for v in views if "controller" in v.roles]
    named = [v for v in controllers if v.version is not None]
    return bool(named) and all(_before_kraft_upgrades(v) for v in controllers)


def _static_kraft_changed(views: list[View]) -> list[Finding]:
    """A static quorum (kraft.version 0 in the first sample that can tell) shown at another
    kraft.version while every controller sampled up to then ran a release before 4.1."""
    known = _kraft_views(views)
    if not known or known[0].level(KRAFT_VERSION) != 0:
        return []
    first = known[0]
    for v in views:
        if not _before_kraft_upgrades(v):
            return []  # a 4.1+ controller may upgrade it from here on
        if v in known and v.level(KRAFT_VERSION) != 0:
            return [
                _finding(
                    "static-quorum-kraft-version-changed",
                    [first.index, v.index],
                    f"the quorum was static ({first.node} showed kraft.version=0 in "
                    f"{first.cite()}), then {v.node} showed kraft.version="
                    f"{v.level(KRAFT_VERSION)} in {v.cite()}, while every controller sampled "
                    "until then ran a release before 4.1",
                    node=v.node,
                    level=v.level(KRAFT_VERSION),
                )
            ]
    return []


# -- 6. unsupported-level-served ------------------------------------------------------------


def _unsupported_levels(v: View) -> dict[str, str]:
    """Finalized levels above 0 that the node's own supported ranges exclude: {feature: what it
    supports}. A feature missing from `supported` counts only when the answer lists some
    feature from level 0: ApiVersions below v4 leaves out every feature whose range starts at
    0 (KAFKA-17492), so otherwise its absence proves nothing."""
    if not v.supported or ("broker" in v.roles and v.sample.value.get("broker_state") != RUNNING):
        return {}
    unfiltered = any(lo == 0 for lo, _ in v.supported.values())
    out = {}
    for feature, level in v.finalized.items():
        if level <= 0 or v.level(feature) is None:
            continue
        r = v.supported.get(feature)
        if r is not None and not r[0] <= level <= r[1]:
            out[feature] = f"supports {feature} {r[0]}-{r[1]} only"
        elif r is None and unfiltered:
            out[feature] = f"does not support {feature} at all"
    return out


def _unsupported(views: list[View], observed: MetadataInput) -> list[Finding]:
    """A node serving, for longer than GRACE_NS in one JVM lifetime, a finalized level outside
    its own supported range (brokers only while RUNNING). A fault, pause or silence of the node
    in between starts the time afresh: a stopped or cut-off node may not have run long enough
    to notice."""
    out = []
    runs: dict[tuple[str, str], list[View]] = {}  # (node, feature) -> the samples of a run

    def close(key: tuple[str, str]) -> None:
        run = runs.pop(key, None)
        if run and run[-1].invoke_time - run[0].time >= GRACE_NS:
            out.append(_unsupported_finding(key[1], run))

    for v in views:
        bad = _unsupported_levels(v) if v.started_ms is not None else {}
        for key in [k for k in runs if k[0] == v.node]:
            run = runs[key]
            same = run[0].started_ms == v.started_ms and key[1] in bad
            if same and _undisturbed(observed, v.node, run[-1].time, v.invoke_time):
                same = run[0].finalized[key[1]] == v.finalized[key[1]]
            else:
                same = False
            if same:
                run.append(v)
            else:
                close(key)
        for feature in bad:
            runs.setdefault((v.node, feature), [v])
    for key in list(runs):
        close(key)
    return out


def _undisturbed(observed: MetadataInput, node: str, start: int, end: int) -> bool:
    if observed.disrupted(node, start, end, data_loss=False):
        return False
    return not any(
        f.covers(node) and f.start <= end and (f.end is None or f.end >= start)
        for f in observed.freezes
    )


def _unsupported_finding(feature: str, run: list[View]) -> Finding:
    first, last = run[0], run[-1]
    level = first.finalized[feature]
    why = _unsupported_levels(last)[feature]
    span = (last.invoke_time - first.time) / 1e9
    state = " while its broker state was RUNNING" if "broker" in first.roles else ""
    return _finding(
        "unsupported-level-served",
        [first.index, last.index],
        f"{first.node} served finalized {feature}={level} in {len(run)} samples over "
        f"{span:.3f} s of one JVM lifetime (started_ms {first.started_ms}){state}, from "
        f"{first.cite()} to {last.cite()}, but it {why}: it neither fenced itself nor "
        f"terminated within {GRACE_NS / 1e9:g} s",
        node=first.node,
        feature=feature,
        level=level,
        supported=list(first.supported.get(feature, ())),
    )
