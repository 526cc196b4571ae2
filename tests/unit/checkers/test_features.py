"""KIP-584/KIP-778 feature levels (checkers/families/features.py) on hand-written histories: for
each rule a history that breaks it (found, named, citing its ops and the KIP) and near misses Kafka
produces on healthy runs (lag after an acknowledgement, restarts, mixed versions, dry runs, a later
downgrade); generated healthy runs yield nothing; and `kchaos check` runs the family end to end."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.cli import check_command
from checkers.core.findings import Finding
from checkers.families.features import GRACE_NS, SETTLE_NS, check_features
from checkers.families.observer_samples import observe_samples_from_ops
from history.columnar import op_rows, to_table
from history.format import UPGRADE, is_client
from history.reader import parse_history

SEC = 1_000_000_000
MV, GV, TV, KV = "metadata.version", "group.version", "transaction.version", "kraft.version"
SUPPORTED_39 = {MV: [1, 21], KV: [0, 1], GV: [0, 1], TV: [0, 2]}
SUPPORTED_40 = {MV: [7, 22], KV: [0, 1], GV: [0, 1], TV: [0, 2]}


class Run:
    """A history with explicit times (seconds): observer samples and feature steps."""

    def __init__(self) -> None:
        self.events: list[tuple[int, int, dict[str, Any]]] = []
        self.injected: list[str] = []  # features a generated bug changed (healthy_run)

    def _add(self, t: float, op: dict[str, Any]) -> None:
        self.events.append((round(t * SEC), len(self.events), {**op, "time": round(t * SEC)}))

    def sample(
        self,
        node: str,
        t: float,
        epoch: int | None,
        finalized: dict[str, int] | None = None,
        *,
        mode: str = "kraft",
        supported: dict[str, list[int]] | None = None,
        version: str = "3.9.2",
        started_ms: int | None = 1000,
        roles: tuple[str, ...] = ("broker",),
        broker_state: str | None = "RUNNING",
        type_: str = "ok",
    ) -> Run:
        features = None
        if epoch is not None:
            features = {
                "supported": SUPPORTED_39 if supported is None else supported,
                "finalized": {MV: 20} if finalized is None else finalized,
                "epoch": epoch,
                "mode": mode,
            }
        value = {
            "roles": list(roles),
            "raft": None,
            "broker_state": broker_state if "broker" in roles else None,
            "features": features,
            "features_error": None if features else "ApiVersions: connection refused",
            "version": version,
            "started_ms": started_ms,
        }
        self._add(t, {"type": "invoke", "f": "observe", "process": "observer", "node": node,
                      "value": None})  # fmt: skip
        done = {"type": type_, "f": "observe", "process": "observer", "node": node}
        done.update({"value": value} if type_ == "ok" else {"value": None, "error": "timeout"})
        self._add(t + 0.01, done)
        return self

    def step(
        self,
        t: float,
        levels: dict[str, Any],
        type_: str | None = "ok",
        *,
        action: str = "upgrade",
        dry_run: bool = False,
        unsafe: bool = False,
        took: float = 0.5,
        error: str | None = None,
        output: str | None = None,
        node: str = "n1",
    ) -> Run:
        """One feature step; `type_` None: it never completed."""
        params = {"action": action, "unsafe": unsafe, "dry_run": dry_run, "levels": levels}
        value = {"at_s": t, "step": "features", "node": node, "params": params}
        self._add(t, {"type": "invoke", "f": "features", "process": UPGRADE, "node": node,
                      "value": value})  # fmt: skip
        if type_ is None:
            return self
        done: dict[str, Any] = {"type": type_, "f": "features", "process": UPGRADE, "node": node}
        if type_ == "ok":
            done["value"] = {**value, "output": output or ""}
        else:
            text = error or "Could not do it"
            done.update({"value": {**value, "error": text}, "error": text})
        self._add(t + took, done)
        return self

    def nemesis(self, t: float, f: str, value: Any) -> Run:
        self._add(t, {"type": "invoke", "f": f, "process": "nemesis", "value": value})
        self._add(t + 0.05, {"type": "ok", "f": f, "process": "nemesis", "value": value})
        return self

    def roll(self, t: float, node: str, took: float = 2.0) -> Run:
        value = {"at_s": t, "step": "roll", "node": node}
        self._add(t, {"type": "invoke", "f": "roll", "process": UPGRADE, "node": node,
                      "value": value})  # fmt: skip
        self._add(t + took, {"type": "ok", "f": "roll", "process": UPGRADE, "node": node,
                             "value": value})  # fmt: skip
        return self

    def lines(self) -> list[dict[str, Any]]:
        ordered = [op for _, _, op in sorted(self.events, key=lambda e: (e[0], e[1]))]
        return [{"index": i, **op} for i, op in enumerate(ordered)]

    def jsonl(self) -> bytes:
        header = {"kchaos_history": 1, "run": "test", "started_wall": 0.0}
        return "".join(json.dumps(r) + "\n" for r in [header, *self.lines()]).encode()

    def findings(self) -> list[Finding]:
        rows = op_rows(to_table(parse_history(self.jsonl(), "<features>"))).to_pylist()
        upgrade = [r for r in rows if r["process"] == UPGRADE]
        return check_features(observe_samples_from_ops(rows), upgrade)

    def index(self, t: float, process: str, type_: str = "ok", node: str | None = None) -> int:
        """The index of the op of `process` completing (type_) or invoked at time `t`."""
        at = round(t * SEC)
        return next(
            op["index"]
            for op in self.lines()
            if op["process"] == process
            and op["type"] == type_
            and abs(op["time"] - at) < SEC // 1000
            and (node is None or op.get("node") == node)
        )


def sample_index(run: Run, node: str, t: float) -> int:
    return run.index(t + 0.01, "observer", node=node)


def kinds(run: Run) -> list[str]:
    return sorted(f.kind for f in run.findings())


def steady(run: Run, until: float, epoch: int = 10, level: int = 20, nodes=("b1", "b2")) -> int:
    """Samples of every node, every 0.5 s up to `until`, all at metadata.version `level`, the
    epoch growing (no-op records); returns the next epoch."""
    t = 0.0
    while t < until:
        for i, node in enumerate(nodes):
            run.sample(node, t + i * 0.02, epoch, {MV: level})
        epoch += 2
        t += 0.5
    return epoch


# -- 1. feature-epoch-regressed ------------------------------------------------------------


def test_an_epoch_going_back_within_one_jvm_is_reported():
    r = Run().sample("b1", 1, 100).sample("b1", 2, 120).sample("b1", 3, 110).sample("b1", 4, 90)
    (f,) = r.findings()
    assert f.kind == "feature-epoch-regressed"
    assert f.ops == (sample_index(r, "b1", 2), sample_index(r, "b1", 3))
    assert "epoch 120" in f.explanation and "lower epoch 110" in f.explanation
    assert "1 more of its samples" in f.explanation
    assert "KIP-584" in f.explanation and "increase monotonically" in f.data["rule"]


def test_a_restart_or_a_migration_may_serve_a_lower_epoch():
    r = (
        Run()
        .sample("b1", 1, 100, started_ms=1000)
        .sample("b1", 2, 120, started_ms=1000)
        .sample("b1", 3, 40, started_ms=5000)  # restarted: its own view is rebuilt
        .sample("b1", 4, 7, mode="zk", started_ms=5000)  # another mode's epoch: not compared
        .sample("b2", 5, 130, started_ms=None)  # no JVM start time: lifetime unknown
        .sample("b2", 6, 10, started_ms=None)
        .sample("b3", 7, -1)  # not valid (KIP-778: "valid only if ... >= 0")
    )
    assert r.findings() == []


# -- 2. feature-levels-diverged --------------------------------------------------------------


def test_two_nodes_at_one_epoch_with_different_levels_diverge():
    r = Run().sample("b1", 1, 200, {MV: 21}).sample("b2", 2, 200, {MV: 20, GV: 1})
    (f,) = r.findings()
    assert f.kind == "feature-levels-diverged"
    assert f.ops == (sample_index(r, "b1", 1), sample_index(r, "b2", 2))
    assert f.data["features"] == [GV, MV]
    assert "b1 shows group.version=0, metadata.version=21" in f.explanation
    assert "b2 shows group.version=1, metadata.version=20" in f.explanation
    assert "kraft epoch 200" in f.explanation and "KIP-584" in f.explanation


def test_mixed_versions_list_features_differently_without_diverging():
    r = (
        Run()
        # A 3.9 broker adds the Raft layer's kraft.version; a controller and a 3.8 broker do not
        # list it; group.version 0 is listed by nobody, or explicitly.
        .sample("b1", 1, 300, {MV: 21, KV: 1})
        .sample("c1", 2, 300, {MV: 21}, roles=("controller",))
        .sample("b2", 3, 300, {MV: 21, GV: 0}, version="3.8.1")
        # The same epoch number in ZooKeeper mode is another state.
        .sample("z1", 4, 300, {GV: 1}, mode="zk")
    )
    assert r.findings() == []


# -- 3. feature-update-lost ------------------------------------------------------------------


def test_an_acknowledged_level_seen_then_gone_at_a_later_epoch_is_lost():
    r = Run()
    steady(r, 5)  # metadata.version 20 at epochs 10-28
    r.step(5, {MV: 21})
    r.sample("b1", 6, 40, {MV: 21}).sample("b2", 6.5, 38, {MV: 20})  # b2 lags: fine
    r.sample("b2", 7, 50, {MV: 20})  # a later epoch without it: lost
    (f,) = r.findings()
    assert f.kind == "feature-update-lost"
    upgrade = r.index(5, UPGRADE, "invoke")
    seen, gone = sample_index(r, "b1", 6), sample_index(r, "b2", 7)
    assert f.ops == tuple(sorted({upgrade, r.index(5.5, UPGRADE), seen, gone}))
    assert f"feature step op {upgrade}" in f.explanation
    assert "metadata.version=21 at kraft epoch 40" in f.explanation
    assert "metadata.version=20 at the later epoch 50" in f.explanation
    assert "durable" in f.explanation


def test_lag_after_the_ack_and_a_later_downgrade_are_not_losses():
    r = Run()
    steady(r, 5)
    r.step(5, {MV: 21})
    # Lag: samples after the ack still at epochs from before it.
    r.sample("b1", 5.6, 29, {MV: 20}).sample("b1", 6, 40, {MV: 21}).sample("b2", 6.2, 30, {MV: 20})
    # A later downgrade explains the lower level at a later epoch.
    r.step(8, {MV: 20}, action="downgrade")
    r.sample("b2", 9, 60, {MV: 20}).sample("b1", 9.1, 60, {MV: 20})
    assert r.findings() == []


def test_an_unknown_earlier_step_may_land_after_the_ack():
    r = Run()
    steady(r, 5)
    r.step(4, {MV: 19}, "info", action="downgrade")  # may still be applied later
    r.step(5, {MV: 21})
    r.sample("b1", 6, 40, {MV: 21}).sample("b2", 7, 50, {MV: 19})
    assert r.findings() == []


def test_an_acknowledged_level_no_node_shows_at_the_end_is_lost():
    r = Run()
    steady(r, 5)
    r.step(5, {MV: 21})
    for t in (6, 9, 12):
        r.sample("b1", t, 30 + t, {MV: 20}).sample("b2", t + 0.1, 30 + t, {MV: 20})
    (f,) = r.findings()
    assert f.kind == "feature-update-lost"
    assert "no node shows it at the end of the run" in f.explanation
    assert f.data["nodes"] == ["b1", "b2"]
    assert sample_index(r, "b1", 12) in f.ops and sample_index(r, "b2", 12.1) in f.ops


def test_end_of_run_samples_too_close_to_the_ack_or_a_fault_say_nothing():
    quick = Run()
    steady(quick, 5)
    quick.step(5, {MV: 21})
    quick.sample("b1", 6, 40, {MV: 20}).sample("b2", 6.1, 40, {MV: 20})  # 0.5 s after the ok
    assert quick.findings() == []
    healed = Run()
    steady(healed, 5)
    healed.step(5, {MV: 21})
    healed.nemesis(10, "stop-partition", {"healed": True})
    healed.roll(8, "b2")
    healed.sample("b1", 12, 40, {MV: 20}).sample("b2", 12.1, 40, {MV: 20})  # 2 s after the heal
    assert SETTLE_NS > 2 * SEC and healed.findings() == []


# -- 4. feature-refused-took-effect ----------------------------------------------------------


def test_a_dry_run_that_took_effect():
    r = Run()
    steady(r, 5)
    r.step(5, {MV: 21}, dry_run=True, output="metadata.version can be upgraded to 21.")
    r.sample("b1", 6, 40, {MV: 21}).sample("b2", 6.1, 40, {MV: 21})
    (f,) = r.findings()
    assert f.kind == "feature-refused-took-effect"
    assert "was a dry run" in f.explanation and "--dry-run" in f.explanation
    assert "highest-epoch sample" in f.explanation and "kraft epoch 28" in f.explanation
    assert sample_index(r, "b1", 6) in f.ops and r.index(5, UPGRADE, "invoke") in f.ops
    assert "do not perform it" in f.explanation


def test_a_refused_downgrade_that_took_effect():
    r = Run()
    steady(r, 5, level=21)
    err = "Could not downgrade metadata.version to 20. Invalid update version 20 ..."
    r.step(5, {MV: 20}, "fail", action="downgrade", error=err)
    r.sample("b1", 6, 40, {MV: 20})
    (f,) = r.findings()
    assert f.kind == "feature-refused-took-effect"
    assert "refused (fail: Could not downgrade" in f.explanation


def test_a_dry_run_followed_by_the_real_step_or_behind_a_lagging_observer_is_fine():
    r = Run()
    steady(r, 5)
    r.step(5, {MV: 21}, dry_run=True)
    r.step(6, {MV: 21})
    r.sample("b1", 7, 40, {MV: 21})
    lagging = Run()
    steady(lagging, 5)
    lagging.step(5, {MV: 21})  # applied; the samples below 6 s still lag
    lagging.step(6, {MV: 21}, dry_run=True)
    lagging.sample("b1", 7, 40, {MV: 21})
    assert r.findings() == [] and lagging.findings() == []


def test_a_failed_step_of_several_features_on_kafka_3_may_apply_some():
    r = Run()
    steady(r, 5)
    out = (
        "metadata.version was upgraded to 21.\nCould not upgrade group.version to 1. Invalid "
        "update version 1 for feature group.version.\n1 out of 2 operation(s) failed."
    )
    r.step(5, {MV: 21, GV: 1}, "fail", error=out)
    r.sample("b1", 6, 40, {MV: 21})  # applied, as the tool said: no finding
    assert r.findings() == []
    r.sample("b1", 7, 50, {MV: 21, GV: 1})  # the one it named as refused
    (f,) = r.findings()
    assert f.kind == "feature-refused-took-effect" and f.data["feature"] == GV
    silent = Run()
    steady(silent, 5)
    silent.step(5, {MV: 21, GV: 1}, "fail", error="2 out of 2?")  # names neither: may be partial
    silent.sample("b1", 6, 40, {MV: 21})
    assert silent.findings() == []


# -- 5. feature-update-partial ---------------------------------------------------------------


def _partial(version: str, before: int = 21) -> Run:
    r = Run()
    t = 0.0
    while t < 5:
        r.sample("c1", t, 10 + int(t * 4), {MV: before}, roles=("controller",), version=version,
                 supported=SUPPORTED_40)  # fmt: skip
        t += 0.5
    r.step(5, {MV: 22, GV: 1}, "info", error="TimeoutException")
    for t in (12, 13):
        r.sample("c1", t, 60, {MV: 22}, roles=("controller",), version=version,
                 supported=SUPPORTED_40)  # fmt: skip
        r.sample("b1", t + 0.1, 61, {MV: 22}, version=version, supported=SUPPORTED_40)
    return r


def test_an_unknown_step_half_applied_on_kafka_4_is_partial():
    r = _partial("4.0.0")
    (f,) = r.findings()
    assert f.kind == "feature-update-partial"
    assert f.data["done"] == [MV] and f.data["undone"] == [GV]
    assert "metadata.version=22 as it asked" in f.explanation
    assert "but not group.version=1" in f.explanation and "Kafka 4.0+" in f.explanation
    assert r.index(5, UPGRADE, "invoke") in f.ops


def test_partial_is_not_claimed_on_kafka_3_or_when_nothing_changed():
    assert _partial("3.9.2").findings() == []  # 3.x answers each feature on its own
    assert _partial("4.0.0", before=22).findings() == []  # metadata.version was 22 already


# -- 6. unsupported-level-served -------------------------------------------------------------


def _serving(r: Run, node: str, start: float, stop: float, epoch: int = 500, **kw: Any) -> Run:
    t = start
    while t <= stop:
        r.sample(node, t, epoch, **kw)
        t += 0.25
    return r


def test_a_running_broker_serving_a_level_it_does_not_support():
    r = _serving(Run(), "b1", 1, 7, finalized={MV: 22})  # supports 1-21
    (f,) = r.findings()
    assert f.kind == "unsupported-level-served"
    assert "supports metadata.version 1-21 only" in f.explanation
    assert "RUNNING" in f.explanation and "KIP-778" in f.explanation
    assert f.ops == (sample_index(r, "b1", 1), sample_index(r, "b1", 7))
    assert f.data["level"] == 22 and f.data["supported"] == [1, 21]
    # A feature it does not list, while the answer lists features from level 0 (unfiltered).
    unknown = _serving(Run(), "b2", 1, 7, finalized={MV: 21, "share.version": 1})
    (g,) = unknown.findings()
    assert "does not support share.version at all" in g.explanation


def test_fenced_brief_restarting_or_filtered_answers_are_not_served_levels():
    r = Run()
    _serving(r, "b1", 1, 7, finalized={MV: 22}, broker_state="STARTING")  # registration refused
    _serving(r, "b2", 1.05, (GRACE_NS / SEC), 600, finalized={MV: 22})  # terminated in time
    _serving(r, "b2", 5.05, 12, 700, finalized={MV: 21}, started_ms=9000)  # restarted
    # ApiVersions < v4 leaves features from level 0 out: share.version's absence proves nothing.
    _serving(r, "b3", 1.1, 7, 800, finalized={MV: 21, "share.version": 1}, supported={MV: [1, 21]})
    # Paused half way: it had not run 5 s with the level when it answered last.
    _serving(r, "b4", 1.2, 4, 900, finalized={MV: 22})
    r.nemesis(4.1, "start-pause", {"frozen": ["b4"]}).nemesis(6, "stop-pause", {"resumed": True})
    _serving(r, "b4", 6.2, 8, 900, finalized={MV: 22})
    # A starting 4.0 controller's placeholder (metadata.version 1) at epoch -1.
    r.sample("c1", 1.15, -1, {MV: 1}, roles=("controller",), version="4.0.0",
             supported=SUPPORTED_40)  # fmt: skip
    assert r.findings() == []


# -- healthy runs, generated -----------------------------------------------------------------


def healthy_run(seed: int, bug: str | None = None) -> Run:
    """A valid run: one log of feature records (levels change only when a step applies them:
    ok steps within their call, unknown ones maybe and maybe late, refused and dry ones never,
    Kafka 3.x failures of several features partly), nodes that apply it in order with up to 3 s
    of lag, restart (new JVM, silent while down) and catch up at the end.

    `bug`: "lose" (a record 1-3 s after an acknowledged step's puts its features back), "dry"
    (dry runs apply their levels): what the rules must then find."""
    rng = random.Random(seed)
    mode = rng.choice(["kraft", "zk"])
    version = rng.choice(["3.9.2", "4.0.0"])
    atomic = version.startswith("4")
    supported = SUPPORTED_40 if atomic else SUPPORTED_39
    brokers = ["b1", "b2", "b3"]
    controllers = ["c1", "c2"] if mode == "kraft" else []
    state = {MV: 20, GV: 0, TV: 0}
    log: list[tuple[float, int, dict[str, int], bool]] = [(0.0, 5, dict(state), True)]
    # (when, levels, the entry it undoes (bug "lose")), applied in time order
    pending: list[tuple[float, dict[str, int], int | None]] = []
    r = Run()
    end = 30.0
    t = 1.0
    while t < end - 10:
        feats = rng.sample([MV, GV, TV], rng.choice([1, 1, 2]))
        ranges = {MV: (19, 21), GV: (0, 1), TV: (0, 2)}
        levels = {f: rng.randint(*ranges[f]) for f in feats}
        kind = rng.choice(["ok", "ok", "fail", "info", "dry"])
        took = rng.uniform(0.2, 1.5)
        text, applied = None, {}
        if kind == "ok":
            applied = levels
            pending.append((t + rng.uniform(0, took), levels, None))
            if bug == "lose" and rng.random() < 0.3:
                pending.append((pending[-1][0] + rng.uniform(1, 3), levels, len(pending) - 1))
        elif kind == "info" and rng.random() < 0.6:
            applied = levels if atomic else {f: v for f, v in levels.items() if rng.random() < 0.5}
            pending.append((t + rng.uniform(0, 8), applied, None))
        elif kind == "fail" and not atomic and len(levels) > 1:
            applied = {f: v for f, v in levels.items() if rng.random() < 0.5}
            pending.append((t + rng.uniform(0, took), applied, None))
            text = "\n".join(
                f"{f} was upgraded to {v}." if f in applied else f"Could not upgrade {f} to {v}."
                for f, v in levels.items()
            )
        elif kind == "dry" and bug == "dry":
            pending.append((t + rng.uniform(0, took), levels, None))
        type_ = "ok" if kind == "dry" else kind
        r.step(t, levels, type_, dry_run=kind == "dry", took=took, error=text)
        t += took + rng.uniform(0.1, 3)
    offset = 5
    before: dict[int, dict[str, int]] = {}
    for i in sorted(range(len(pending)), key=lambda i: pending[i][0]):
        when, levels, undoes = pending[i]
        before[i] = dict(state)
        if undoes is None:
            state = {**state, **levels}
        else:
            state = {**state, **{f: before[undoes][f] for f in levels}}
            r.injected += [f for f in levels if before[i][f] != state[f]]
        offset += 1 if mode == "zk" else rng.randint(1, 5)
        log.append((when, offset, dict(state), True))
    if mode == "kraft":  # no-op records between the feature records
        for k in range(int(end * 2)):
            log.append((k / 2 + 0.01, 0, {}, False))
        log.sort(key=lambda e: e[0])
        offset, current, rebuilt = 5, log[0][2], []
        for when, _, st_, feature in log:
            offset += 1
            current = st_ if feature else current
            rebuilt.append((when, offset, current, feature))
        log = rebuilt

    downs = {}  # node -> (down from, up at)
    for k, node in enumerate(rng.sample(brokers + controllers, rng.randint(0, 2))):
        start = 2 + 8 * k + rng.uniform(0, 4)  # one nemesis op at a time
        downs[node] = (start, start + rng.uniform(0.5, 4))
        r.nemesis(start, "start-kill", {"nodes": [node]})
        r.nemesis(start + 0.3, "stop-kill", {"nodes": [node]})

    last: dict[tuple[str, int], int] = {}  # (node, started_ms) -> log position served
    clock = 0.0
    while clock < end:
        for k, node in enumerate(brokers + controllers):
            at = clock + k * 0.02
            down = downs.get(node)
            if down and down[0] <= at < down[1]:
                r.sample(node, at, None, type_="fail")
                continue
            started = 1000 if not down or at < down[0] else 2000
            if down and down[1] <= at < down[1] + 0.5:
                r.sample(node, at, None, started_ms=started)  # ApiVersions not answering yet
                continue
            now = max(i for i, e in enumerate(log) if e[0] <= at)
            lagged = max([i for i, e in enumerate(log) if e[0] <= at - 3] or [0])
            lo = max(lagged, last.get((node, started), 0))
            pos = rng.randint(lo, now) if rng.random() < 0.5 else now
            last[node, started] = pos
            _, epoch, levels, _ = log[pos]
            finalized = {f: v for f, v in levels.items() if v and not (mode == "zk" and f == MV)}
            roles: tuple[str, ...] = ("controller",) if node in controllers else ("broker",)
            if node in controllers:  # its features publisher: the epoch of the last change
                epoch = max(e[1] for e in log[: pos + 1] if e[3])
            elif mode == "kraft":
                finalized[KV] = 1  # the Raft layer's, beside the image
            r.sample(node, at, epoch, finalized, mode=mode, supported=supported, version=version,
                     started_ms=started, roles=roles)  # fmt: skip
        clock += 0.2
    return r


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_healthy_runs_yield_no_finding(seed):
    assert healthy_run(seed).findings() == []


def test_the_generated_runs_can_fail_the_rules():
    """The generator reaches the rules: with a lost record or dry runs that apply, they find it."""
    lost = [healthy_run(seed, "lose") for seed in range(30)]
    found = [{f.kind for f in r.findings()} for r in lost]
    assert sum("feature-update-lost" in k for k in found) >= 5
    assert all(k == set() for r, k in zip(lost, found, strict=True) if not r.injected)
    dry = [{f.kind for f in healthy_run(seed, "dry").findings()} for seed in range(30)]
    assert sum("feature-refused-took-effect" in k for k in dry) >= 10


# -- end to end, and the new special process ------------------------------------------------


def test_kchaos_check_judges_feature_levels_in_a_run_directory(tmp_path):
    r = Run()
    steady(r, 5)
    r.step(5, {MV: 21})
    r.sample("b1", 6, 40, {MV: 21}).sample("b2", 7, 50, {MV: 20})
    r.roll(7.5, "b2")  # another kind of upgrade step: not judged, not a client op
    # Client ops beside them: the queue checks skip process "upgrade" like any special one.
    lines = r.lines()
    n = len(lines)
    lines += [
        {"index": n, "type": "invoke", "f": "send", "process": 0, "time": 8 * SEC,
         "value": [["send", 1, 7]]},
        {"index": n + 1, "type": "ok", "f": "send", "process": 0, "time": 8 * SEC + 1000,
         "value": [["send", 1, [0, 7]]]},
        {"index": n + 2, "type": "invoke", "f": "poll", "process": 1, "time": 9 * SEC,
         "value": [["poll"]]},
        {"index": n + 3, "type": "ok", "f": "poll", "process": 1, "time": 9 * SEC + 1000,
         "value": [["poll", {"1": [[0, 7]]}]]},
    ]  # fmt: skip
    header = {"kchaos_history": 1, "run": "test", "started_wall": 0.0}
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [header, *lines]))
    assert not is_client(UPGRADE)
    verdict = check(run)
    assert verdict.status == "invalid"
    assert [f.kind for f in verdict.findings] == ["feature-update-lost"]
    results = json.loads((run / "results.json").read_text())
    assert results["stats"]["feature_steps"] == 1
    assert (run / "report.html").exists()
    result = CliRunner().invoke(check_command, [str(run)])
    assert result.exit_code == 1, result.output
    assert "feature-update-lost" in result.output


def test_a_clean_run_with_features_is_valid(tmp_path: Path):
    r = Run()
    steady(r, 5)
    r.step(5, {MV: 21})
    r.sample("b1", 11, 40, {MV: 21}).sample("b2", 11.1, 41, {MV: 21})
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_bytes(r.jsonl())
    result = CliRunner().invoke(check_command, [str(run)])
    assert result.exit_code == 0, result.output
