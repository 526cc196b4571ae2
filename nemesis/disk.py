"""Disk faults, on the disk layer under the nodes' data (clusters/disk_layer.py, docs/disk.md).

``power-loss``: the nodes the target names lose power together. Every JVM is stopped from the
host first (SIGSTOP: nothing more reaches its disk), then each node's layer drops what no fsync
made durable, then every JVM is killed (SIGKILL: the container ends, its layer with it). Stop
starts every exited node again, on what its disk kept. The start records, per node, what the
drop took (its files and bytes, the name changes undone) and, per partition whose segment lost
written bytes, the offsets they held (``lost_offsets``: the record batches past each segment's
durable length, read while the JVMs are stopped and before the drop). A node not on the layer
is refused before anything is touched: ``--nemesis disk`` runs every node on it
(``--disk-layer``).

``corrupt``: on one node or a minority, one file of a class (``file_class``, nemesis/
disk_files.py) is damaged on the medium: one bit flipped, the file cut short, or rolled back
(``how``) to the copy it had ``age_s`` seconds earlier (the start snapshots it, waits, and puts
the copy back). The file, the offset and mask or the length are drawn from the step's seed over
what the node's layer holds, and the record says what was picked and the layer's answer: the
bytes before and after, the sizes. With ``restart`` the JVM is stopped before the damage (so that
it cannot overwrite it) and killed after it: the stop starts it again, and Kafka reads the file
as it starts (most of the classes are read only then). The damage is the fault's lasting effect,
as in Jepsen: nothing heals it.

``disk-full``: writes to the targets' data directory fail with ENOSPC (the layer's ``fail write
ENOSPC``) for the fault's span; the stop clears the rule on every node that still runs and
starts every exited node (Kafka halts a broker whose log directories have all failed).

The stop of both records what Kafka logged since the start (nemesis/kafka_said.py): the lines
that say it found a damaged file or lost a log directory, from every Kafka node (a follower is
where a leader's bad batch shows), once each restarted node has started or exited again.
"""

from __future__ import annotations

import random
import re
import time
from typing import Any

from clusters.capabilities import Controllable
from clusters.disk_layer import DiskLayerError, NoAnswer, ask, batches, mount_of
from clusters.layout import IMAGE_LAYOUT
from history.disk_faults import CORRUPT, CORRUPTED, DISK_FULL, KAFKA_SAID
from history.effects import DOWN, EFFECTS, RESTARTED, STALLED, effect
from nemesis import disk_files, kafka_said
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, before_touching
from nemesis.menu import Kind, Menu, Param, Pick
from nemesis.nodes import number, on_each, split_running, wait_for
from nemesis.process import restart_exited
from nemesis.targets import resolve

POWER_LOSS = "power-loss"
# Per node in a power loss's record (docs/history.md): {"<topic>-<partition>": [first, last]}.
LOST_OFFSETS = "lost_offsets"
BY = "power loss (SIGSTOP, unsynced writes dropped, SIGKILL)"
CRASH_BY = "SIGKILL after the damage (SIGSTOP before it), to be read at the restart"
FULL_BY = "writes to its data directory fail with ENOSPC (disk layer)"

# How a corruption damages the file it picks.
FLIP, TRUNCATE, ROLLBACK = "flip", "truncate", "rollback"
HOWS = (FLIP, TRUNCATE, ROLLBACK)
# Damage on a majority of replicas is not what Kafka's replication is meant to survive, and
# Jepsen's corruption faults hit a minority: a corrupt step refuses them.
CORRUPT_REFUSES = ("majority", "all")
# Rollback: seconds between the snapshot and putting it back; more than the 5 s a broker takes
# to write its high watermarks again (replica.high.watermark.checkpoint.interval.ms).
AGES_S = (6, 11)
DEFAULT_AGE_S = 6.0
MAX_AGE_S = 3600.0
# A restarted node has this long to start (or exit) before the stop reads what it logged.
START_WAIT_S = 60.0

MENU = Menu(
    "disk",
    (
        Kind(
            POWER_LOSS,
            "the nodes the target names lose power together: each JVM stopped, what no fsync "
            "made durable dropped from its disk, the JVM killed; stop starts every exited node "
            "again on what its disk kept",
        ),
        Kind(
            CORRUPT,
            "one file of a class damaged on one node or a minority: a bit flipped, the file cut "
            "short, or rolled back to its copy of age_s earlier; with restart the JVM is killed "
            "after the damage and the stop starts it, so that Kafka reads the file; the damage "
            "stays (docs/disk.md)",
            reads=("file_class", "how", "restart", "age_s", "flip_byte", "flip_bit"),
            draws=(
                Pick("file_class", disk_files.CLASS_NAMES),
                Pick("how", HOWS),
                Pick("restart", (1, 0)),
                Pick("age_s", AGES_S),
            ),
            drawn=False,
            effects=(DOWN,),
            refuses=CORRUPT_REFUSES,
        ),
        Kind(
            DISK_FULL,
            "writes to the targets' data directory fail with ENOSPC for the fault's span; stop "
            "clears it and starts every exited node",
            drawn=False,
            effects=(STALLED,),
        ),
    ),
    meaning="faults of the disk under the nodes' data, on kchaos's disk layer (docs/disk.md); "
    "--nemesis disk runs every node on it (and draws power-loss; corrupt and disk-full only "
    "where a spec names them)",
    params=(
        Param(
            "file_class", "corrupt: the class of file damaged", ", ".join(disk_files.CLASS_NAMES)
        ),
        Param("how", "corrupt: how it is damaged", ", ".join(HOWS)),
        Param(
            "restart",
            "corrupt: 1 kills the JVM after the damage (stop starts it: Kafka reads the file), "
            "0 leaves it running",
            "0 or 1",
            1,
        ),
        Param(
            "age_s",
            "corrupt rollback: seconds between the snapshot and its rollback",
            f"1 to {MAX_AGE_S:g}",
            DEFAULT_AGE_S,
        ),
        Param(
            "flip_byte",
            "corrupt flip: the byte flipped (modulo the file's extent), instead of a drawn one; "
            "never drawn, set in a stored plan to aim a flip",
            "0 or more",
        ),
        Param(
            "flip_bit",
            "corrupt flip: the bit of flip_byte flipped (0 the lowest), with flip_byte",
            "0 to 7",
        ),
    ),
    targets=("one", "minority", "majority", "all"),
    effects=(DOWN,),
    stop_effects=(RESTARTED,),
)


def _summary(dropped: dict[str, Any]) -> dict[str, Any]:
    """What a drop took from one node, as the history keeps it: every file with its bytes, and
    the offsets lost per partition where some were."""
    return {
        "files": {f["path"]: f["bytes"] for f in dropped.get("files", [])},
        "written": {f["path"]: f["written"] for f in dropped.get("files", []) if f["written"]},
        "bytes": dropped.get("dropped_bytes", 0),
        "written_bytes": dropped.get("dropped_written", 0),
        "names": [
            f"{n['op']} {n['path']}" + (f" -> {n['to']}" if n.get("to") else "")
            for n in dropped.get("names", [])
        ],
        **({"errors": dropped["errors"]} if dropped.get("errors") else {}),
        **({LOST_OFFSETS: dropped[LOST_OFFSETS]} if dropped.get(LOST_OFFSETS) else {}),
        **({"answer_lost": dropped["answer_lost"]} if dropped.get("answer_lost") else {}),
    }


# A partition's segment under a log directory: <dir>/<topic>-<partition>/<base offset>.log.
SEGMENT = re.compile(r"(?:^|/)(?P<partition>[^/]+-\d+)/(?P<base>\d{20})\.log$")


def pending_segments(status: dict[str, Any]) -> dict[str, int]:
    """The segment files a layer's ``status`` lists as pending, each with its durable length."""
    return {
        f["path"]: int(f["durable_size"])
        for f in status.get("files", [])
        if SEGMENT.search(f["path"]) and f["size"] > f["durable_size"]
    }


def lost_offsets(
    walked: list[dict[str, Any]], dropped: list[dict[str, Any]]
) -> dict[str, list[int | None]]:
    """Per partition ("<topic>-<partition>"), [first, last] offset of the record batches its
    segments lost: ``walked`` is ``kchaos-disk batches``' answer from before the drop (each
    segment's batches past its durable length then), ``dropped`` the drop's ``files`` (what
    each file lost, and the length it kept, ``size_after``). A bound is None where it cannot be
    told: the walk stopped before it (a header that is no batch's), or more became durable
    between the walk and the drop (the layer's writeback), so the first lost batch is later."""
    kept = {f["path"]: int(f.get("size_after", 0)) for f in dropped}
    spans: dict[str, list[tuple[str, int | None, int | None]]] = {}
    for w in walked:
        found = SEGMENT.search(str(w.get("path", "")))
        if found is None or w["path"] not in kept:
            continue  # not a segment, or it lost nothing in the drop
        start = int(w.get("from", 0))
        if "batches" not in w:  # unreadable
            first = last = None
        else:
            if not w.get("lost") and "error" not in w:
                continue
            first, last = w.get("first"), w.get("last")
            if "error" in w:
                # The walk stopped early: what lies past where it stopped is unknown.
                last = None
                if int(w.get("walked_to", 0)) <= start:
                    first = None
            if kept[w["path"]] > start:
                first = None
        spans.setdefault(found["partition"], []).append((found["base"], first, last))
    out: dict[str, list[int | None]] = {}
    for partition, segments in sorted(spans.items()):
        segments.sort()
        out[partition] = [segments[0][1], segments[-1][2]]
    return out


def corrupt_params(step: FaultStep) -> dict[str, Any]:
    """A corrupt step's parameters, checked; defaults filled in (restart 1, age_s 6)."""
    if step.target in CORRUPT_REFUSES:
        raise NemesisError(
            f"disk corrupt hits one node or a minority, not '{step.target}': damage on a "
            "majority of replicas is beyond what replication is meant to survive"
        )
    file_class, how = step.params.get("file_class"), step.params.get("how")
    if file_class not in disk_files.CLASS_NAMES:
        raise NemesisError(
            f"disk corrupt file_class must be one of {', '.join(disk_files.CLASS_NAMES)}, "
            f"got {file_class!r}"
        )
    if how not in HOWS:
        raise NemesisError(f"disk corrupt how must be one of {', '.join(HOWS)}, got {how!r}")
    restart = step.params.get("restart", 1)
    if restart not in (0, 1) or isinstance(restart, float):
        raise NemesisError(f"disk corrupt restart must be 0 or 1, got {restart!r}")
    age_s = number(step.params, "age_s", DEFAULT_AGE_S)
    if not 1 <= age_s <= MAX_AGE_S:  # also refuses NaN
        raise NemesisError(f"disk corrupt age_s must be 1 to {MAX_AGE_S:g} s, got {age_s:g}")
    out = {"file_class": file_class, "how": how, "restart": bool(restart), "age_s": age_s}
    aim = {k: step.params[k] for k in ("flip_byte", "flip_bit") if k in step.params}
    if aim:
        # A pinned flip (a bit outside a batch's CRC, say): every replay hits the same field.
        byte, bit = aim.get("flip_byte"), aim.get("flip_bit")
        if how != FLIP or len(aim) != 2:
            raise NemesisError("disk corrupt flip_byte and flip_bit go together, with how flip")
        if not isinstance(byte, int) or isinstance(byte, bool) or byte < 0:
            raise NemesisError(f"disk corrupt flip_byte must be an integer >= 0, got {byte!r}")
        if bit not in range(8) or isinstance(bit, (bool, float)):
            raise NemesisError(f"disk corrupt flip_bit must be 0 to 7, got {bit!r}")
        out.update(aim)
    return out


class DiskNemesis:
    fault = "disk"
    menu = MENU

    def __init__(self) -> None:
        # Each started corrupt or disk-full step's targets and marks in the nodes' output (by
        # kind and seed), for its stop: the stop of a step is carried out by the instance that
        # started it.
        self._started: dict[tuple[str, int], tuple[list[str], dict[str, int], tuple[str, ...]]] = {}
        # Per node, the last corrupt step that damaged a file of it and killed its JVM: the
        # damage may keep it from starting for good (``kept_down``).
        self._lasting: dict[str, dict[str, Any]] = {}

    def check(self, step: FaultStep) -> dict[str, Any]:
        self.menu.check_keys(step)
        if step.kind == CORRUPT:
            return corrupt_params(step)
        return {}

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        with before_touching():
            params = self.check(step)
            found = resolve(ctx, step.target, random.Random(step.seed), step.params)
            nodes = [ctx.nodes[t] for t in found.targets]
            running, down = split_running(nodes)
            check_on_layer(running)
        if step.kind != POWER_LOSS:
            marks = kafka_said.marks(_kafka_nodes(ctx))
            self._started[(step.kind, step.seed)] = (found.targets, marks, ())
        if step.kind == CORRUPT:
            out = _corrupt(ctx, step, params, running)
            # The stop keeps what Kafka logged naming the damaged files (as its log names them:
            # under the log directory).
            paths = {c["path"].removeprefix("data/") for c in out.get(CORRUPTED, {}).values()}
            self._started[(step.kind, step.seed)] = (found.targets, marks, tuple(sorted(paths)))
            if params["restart"]:
                for node, hit in out.get(CORRUPTED, {}).items():
                    self._lasting[node] = {
                        "fault": self.fault,
                        "kind": CORRUPT,
                        "seed": step.seed,
                        "at_s": step.at_s,
                        "file": hit["path"],
                        "file_class": params["file_class"],
                        "how": params["how"],
                        "mark": marks.get(node, 0),
                    }
        elif step.kind == DISK_FULL:
            out = _fill(running)
        else:
            out = lose_power(running)
            aimed = [n.name for n in nodes]
            out[EFFECTS] = [effect(DOWN, aimed, out["exited_after_s"], by=BY)]
        if down:
            out["not_running"] = down
        return {"kind": step.kind, **found.record(), **out}

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": step.kind}
        targets, marks, names = self._started.pop((step.kind, step.seed), ([], {}, ()))
        if step.kind == DISK_FULL:
            # What Kafka did with the full disk: a broker whose log directories all failed halts.
            out["exited"] = sorted(n for n in targets if not ctx.nodes[n].is_running())
            out["healed"] = _heal_rules(ctx)
        # Every exited node, not only this step's: stop means "heal", as in Jepsen.
        restarted = restart_exited(ctx)
        out["restarted"] = restarted
        if step.kind in (CORRUPT, DISK_FULL):
            started = [ctx.nodes[n] for n in restarted if not ctx.nodes[n].spec.is_zookeeper]
            if started:
                out["after_restart"] = kafka_said.wait_started(started, marks, START_WAIT_S)
            out[KAFKA_SAID] = kafka_said.said(_kafka_nodes(ctx), marks, names)
        return {**out, EFFECTS: [effect(RESTARTED, restarted)]}

    def kept_down(self, ctx: FaultContext, node: str) -> dict[str, Any] | None:
        """The corrupt step whose damage, with its JVM killed after it, may keep ``node`` from
        starting (nemesis/api.py ``Lasting``): its file and what Kafka logged since the damage
        (``kafka_said``, the lines that say why it would not start); None when no such step
        damaged the node."""
        lasting = self._lasting.get(node)
        if lasting is None:
            return None
        rec = {k: v for k, v in lasting.items() if k != "mark"}
        name = lasting["file"].removeprefix("data/")
        said = kafka_said.said([ctx.nodes[node]], {node: lasting["mark"]}, (name,))
        return {**rec, KAFKA_SAID: said.get(node, {})}

    def heal_all(self, ctx: FaultContext) -> list[str]:
        """A node whose layer lost power but whose JVM still runs (a power loss cut short) is
        killed, every fail rule (a full disk) is cleared, and every exited node started again.
        A corruption is left as it is: it is the fault's lasting effect."""
        said = []
        for node in ctx.nodes.values():
            if not node.is_running():
                continue
            try:
                status = _again_if_lost(node, "status")
            except DiskLayerError:
                continue  # not on the layer, or its layer is gone with its JVM
            if not status["powered"]:
                _kill(node)
                said.append(f"{node.name}: killed the JVM of a powered-off disk")
            elif status.get("failing"):
                cleared = _again_if_lost(node, "heal")["cleared"]
                said.append(f"{node.name}: cleared {cleared} disk fail rule(s)")
        return said + [f"{n}: started exited node" for n in restart_exited(ctx)]


def _kafka_nodes(ctx: FaultContext) -> list[Controllable]:
    return [n for n in ctx.nodes.values() if not n.spec.is_zookeeper]


def check_on_layer(nodes: list[Controllable]) -> None:
    """NemesisError naming the first node whose layer does not answer (call it inside
    ``before_touching``: a refusal then touches nothing)."""
    for node in nodes:
        try:
            _again_if_lost(node, "ping")
        except DiskLayerError as exc:
            raise NemesisError(
                f"{node.name} is not on the disk layer (run with --disk-layer): {exc}"
            ) from None


def lose_power(nodes: list[Controllable]) -> dict[str, Any]:
    """The running ``nodes`` lose power together (each on the layer: ``check_on_layer``); the
    record's part every power loss has (docs/history.md): ``dropped`` (per node, what its drop
    took, with ``lost_offsets``), ``exited_after_s``, ``offsets_read_s``, and
    ``offsets_unread`` and ``drop_failed`` where those went wrong."""
    # The order makes the loss coordinated: no target writes once any has lost power.
    on_each(nodes, _stop)
    dropped = on_each(nodes, _drop)
    took = on_each(nodes, _kill)
    out: dict[str, Any] = {
        "dropped": {n: _summary(d) for n, d in dropped.items() if "error" not in d},
        "exited_after_s": took,
        # What reading the lost offsets added to the time the JVMs stood stopped.
        "offsets_read_s": {n: d["offsets_read_s"] for n, d in dropped.items() if "error" not in d},
    }
    unread = {n: d["offsets_error"] for n, d in dropped.items() if d.get("offsets_error")}
    if unread:
        out["offsets_unread"] = unread
    failed = {n: d["error"] for n, d in dropped.items() if "error" in d}
    if failed:
        # Killed all the same: a crash, not a power loss, on those nodes.
        out["drop_failed"] = failed
    return out


def _fill(running: list[Controllable]) -> dict[str, Any]:
    def fail(node: Controllable) -> dict[str, Any]:
        # A Kafka node's log directory (the metadata log is in it); a ZooKeeper's whole dataDir.
        prefix = () if node.spec.is_zookeeper else (_data_prefix(node),)
        try:
            # Asked again if the answer is lost: a second rule the same is harmless.
            return {"failing": _again_if_lost(node, "fail", "write", "ENOSPC", *prefix)["failing"]}
        except DiskLayerError as exc:
            return {"error": str(exc)}

    done = on_each(running, fail)
    full = sorted(n for n, d in done.items() if "error" not in d)
    out: dict[str, Any] = {"full": {n: d["failing"] for n, d in done.items() if n in full}}
    failed = {n: d["error"] for n, d in done.items() if "error" in d}
    if failed:
        out["failed"] = failed
    return {**out, EFFECTS: [effect(STALLED, [n.name for n in running], full, by=FULL_BY)]}


def _data_prefix(node: Controllable) -> str:
    """The log directory, as a path under the layer's mountpoint (``data``)."""
    mount = mount_of(node.spec).mountpoint
    return IMAGE_LAYOUT.data_dir[len(mount) + 1 :]


def _heal_rules(ctx: FaultContext) -> dict[str, int]:
    """Clears the fail rules of every running node on the layer: how many each had."""
    out = {}
    for node in ctx.nodes.values():
        if not node.is_running():
            continue
        try:
            out[node.name] = _again_if_lost(node, "heal")["cleared"]
        except DiskLayerError:
            continue  # not on the layer, or gone with its JVM meanwhile
    return {n: c for n, c in out.items() if c}


def _corrupt(
    ctx: FaultContext, step: FaultStep, params: dict[str, Any], running: list[Controllable]
) -> dict[str, Any]:
    hints = ctx.hints
    topic = hints.get("topic")
    leaders = hints.get("partition_leaders") or {}

    def one(node: Controllable) -> dict[str, Any]:
        led = frozenset(int(p) for p, leader in leaders.items() if leader == node.name)
        return _corrupt_one(node, step.seed, params, topic, led)

    done = on_each(running, one)
    out: dict[str, Any] = {**params, CORRUPTED: {}}
    for name, got in done.items():
        out.setdefault(got.pop("outcome"), {})[name] = got
    if not out[CORRUPTED]:
        # Nothing of the class on any target (or the layer refused): the cluster is as it was.
        out.pop(CORRUPTED)
    killed = {n: got["exited_after_s"] for n, got in done.items() if "exited_after_s" in got}
    effects = []
    if killed:
        effects.append(effect(DOWN, sorted(killed), sorted(killed), by=CRASH_BY))
    return {**out, EFFECTS: effects}


def _corrupt_one(
    node: Controllable, seed: int, params: dict[str, Any], topic: str | None, led: frozenset[int]
) -> dict[str, Any]:
    """One target's damage: its file picked, the layer's answer, and whether it was killed.
    ``outcome`` says which of the start record's maps it goes in."""
    how, file_class = params["how"], params["file_class"]
    rng = disk_files.node_stream(seed, node.name)
    try:
        files = _listing(node)
    except NemesisError as exc:
        return {"outcome": "failed", "error": str(exc)}
    chosen = disk_files.choose_file(files, file_class, rng, topic, led, need_bytes=how != ROLLBACK)
    if chosen is None:
        what = disk_files.BY_NAME[file_class].meaning
        return {
            "outcome": "not_found",
            "why": f"no {what}" + ("" if how == ROLLBACK else " with bytes in it"),
        }
    got: dict[str, Any] = disk_files.described(chosen)
    path = chosen.file.path
    try:
        snapshot = f"kchaos-{seed}"
        if how == ROLLBACK:
            got["snapshot"] = _again_if_lost(node, "snapshot", path, snapshot)["size"]
            got["snapshot_wall"] = round(time.time(), 3)
            time.sleep(params["age_s"])
        if params["restart"]:
            got["stopped_after_s"] = _stop(node)
        if disk_files.class_of(path) == "index":
            # Kafka writes its indexes through a memory map: pages it dirtied reach the layer
            # only when written back, which could undo the damage afterwards.
            node.exec(["sync", f"{mount_of(node.spec).mountpoint}/{path}"], timeout=30)
            got["synced_first"] = True
        got.update(_damage(node, params, path, chosen, files, rng, snapshot))
    except (DiskLayerError, NemesisError) as exc:
        got.update(outcome="failed", error=str(exc))
    else:
        got["outcome"] = CORRUPTED
    if params["restart"]:
        # Killed whatever happened: a JVM left stopped would look like another fault.
        got["exited_after_s"] = _kill(node)
    return got


def _damage(
    node: Controllable,
    params: dict[str, Any],
    path: str,
    chosen: disk_files.Chosen,
    files: list[disk_files.Listed],
    rng: random.Random,
    snapshot: str,
) -> dict[str, Any]:
    """The layer's command and its answer (the bytes it changed)."""
    how = params["how"]
    span = disk_files.extent(chosen.file, files)
    backing = f"{mount_of(node.spec).state_dir}/root/{path}"
    if how == FLIP:
        offset, mask = disk_files.flip_at(rng, span)
        if "flip_byte" in params:
            offset, mask = params["flip_byte"] % span, 1 << params["flip_bit"]
        try:
            answer = ask(node, "corrupt", "flip", path, str(offset), str(mask))
        except NoAnswer as exc:
            # A flip done twice is undone: not asked again; the byte is read instead.
            od = ["od", "-An", "-tu1", "-j", str(offset), "-N", "1", backing]
            now = node.exec(od, timeout=30).stdout.strip()
            return {"offset": offset, "mask": mask, "answer_lost": str(exc), "now": now}
        return {
            "offset": offset,
            "mask": mask,
            "before": answer["before"],
            "after": answer["after"],
        }
    if how == TRUNCATE:
        size = disk_files.truncate_to(rng, span)
        answer = _again_if_lost(node, "corrupt", "truncate", path, str(size))
        return {"size_before": answer["size_before"], "size_after": answer["size_after"]}
    copy = f"{mount_of(node.spec).state_dir}/snapshots/{snapshot}"
    same = node.exec(["cmp", "-s", backing, copy], timeout=60)
    answer = _again_if_lost(node, "rollback", path, snapshot)
    return {
        "size_before": answer["size_before"],
        "size_after": answer["size_after"],
        # Whether the file had changed since the snapshot (cmp: 0 the same, 1 different).
        "changed": {0: False, 1: True}.get(same.exit_code),
    }


def _again_if_lost(node: Controllable, *words: str) -> dict[str, Any]:
    """A command that does the same done twice (ping, a truncation to a size, a rollback, a
    snapshot, heal), asked again when its answer was lost (seen under load: a docker exec whose
    output never came back), up to three times."""
    for _ in range(2):
        try:
            return ask(node, *words)
        except NoAnswer:
            continue
    return ask(node, *words)


def _listing(node: Controllable) -> list[disk_files.Listed]:
    """The node's files under its mountpoint, from the layer's backing directory."""
    root = f"{mount_of(node.spec).state_dir}/root"
    for _ in range(3):
        result = node.exec(["find", root, "-type", "f", "-printf", "%P\\t%s\\t%b\\n"], timeout=60)
        files = disk_files.parse_listing(result.stdout)
        # A Kafka node always holds meta.properties: nothing listed is an exec whose output was
        # lost (seen under load), asked again.
        if files:
            return files
    detail = result.stderr.strip()[-200:] or f"nothing listed (exit code {result.exit_code})"
    raise NemesisError(f"{node.name}: cannot list {root}: {detail}")


def _stop(node: Controllable) -> float:
    node.pause()
    return wait_for(f"{node.name} to stop", node.is_paused_by_signal, timeout=30)


def _drop(node: Controllable) -> dict[str, Any]:
    """The node's drop, with the offsets it took: its pending segments' batches past their
    durable lengths, read first (the JVM is stopped: nothing changes them). A walk that fails
    leaves the drop as it was, said in ``offsets_error``."""
    t0 = time.monotonic()
    walked: list[dict[str, Any]] | None = None
    before: dict[str, Any] | None = None
    error = None
    try:
        before = _again_if_lost(node, "status")
        walked = _walk(node, pending_segments(before))
    except DiskLayerError as exc:
        error = str(exc)
    read_s = round(time.monotonic() - t0, 3)
    try:
        try:
            dropped = ask(node, "drop", timeout=120)
        except NoAnswer as exc:
            dropped = _drop_answer_lost(node, before, str(exc))
    except DiskLayerError as exc:
        return {"error": str(exc) + (f"; before it, {error}" if error else "")}
    files = dropped.get("files", [])
    if walked is None:
        # Every dropped segment's partition lost something: what, unknown.
        walked = [{"path": f["path"]} for f in files]
    return {
        **dropped,
        LOST_OFFSETS: lost_offsets(walked, files),
        "offsets_read_s": read_s,
        **({"offsets_error": error} if error else {}),
    }


def _walk(node: Controllable, segments: dict[str, int]) -> list[dict[str, Any]]:
    """``batches`` of the segments, asked again when Docker loses the exec's output (it reads
    only, from files the stopped JVM does not change)."""
    for _ in range(2):
        try:
            return batches(node, segments)
        except NoAnswer:
            continue
    return batches(node, segments)


def _drop_answer_lost(
    node: Controllable, before: dict[str, Any] | None, lost: str
) -> dict[str, Any]:
    """The drop's answer when Docker lost the exec's output (seen under load: exit code 0, so
    the layer answered ok, and nothing printed). The layer says whether its power is off: if so
    the drop was done, and what it took is what the status read just before it listed as
    pending (the JVM stood stopped in between; only the writeback could have made more durable
    meanwhile), recorded with ``answer_lost``; if not, the drop is asked once more."""
    if _again_if_lost(node, "status")["powered"]:
        return ask(node, "drop", timeout=120)
    files = [
        {
            "path": f["path"],
            "bytes": f["bytes"],
            "written": f["written"],
            "size_before": f["size"],
            "size_after": f["durable_size"],
        }
        for f in (before or {}).get("files", [])
    ]
    return {
        "ok": True,
        "powered": False,
        "files": files,
        "dropped_files": len(files),
        "dropped_bytes": sum(f["bytes"] for f in files),
        "dropped_written": sum(f["written"] for f in files),
        "names": (before or {}).get("names", []),
        "answer_lost": lost + ("" if before else "; the status before it was not read either"),
    }


def _kill(node: Controllable) -> float:
    node.kill()
    return wait_for(f"{node.name} to exit", lambda: not node.is_running(), timeout=30)
