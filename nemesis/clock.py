"""Clock faults with libfaketime: skew a node's realtime clock, strobe it, reset it.

libfaketime works by LD_PRELOAD, so it is in a JVM only if the JVM started under it: the first
clock fault on a node writes FAKETIME_ENV (which the entrypoint sources) and restarts the node,
and says so in the history. From then on the offset lives in a timestamp file the preloaded
library re-reads at most once a second (FAKETIME_CACHE_DURATION=1), so bumps, strobes and
resets act on the running JVM without a restart. Monotonic time is left alone
(FAKETIME_DONT_FAKE_MONOTONIC=1): Java 17 hangs when its monotonic clock jumps, and it keeps
Kafka's timeouts honest, which is what docs/nemesis.md explains, with why
FAKETIME_FORCE_MONOTONIC_FIX=0 is needed for the JVM not to spin.

The files are where the node keeps its configuration (``layout_of``: a container's /etc/kafka,
a host's under its install directory), and "the JVM" is the node's own process (``proc_dir``:
PID 1 of a container, the supervisor's pid on a host, whose PID 1 is init).
"""

from __future__ import annotations

import random
import shlex
from typing import Any

from clusters.capabilities import Exec, Host, Process, Shell, layout_of, proc_dir
from clusters.layout import IMAGE_LAYOUT, Layout
from history.effects import EFFECTS, RESTARTED, SKEWED, effect
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, before_touching
from nemesis.menu import Interval, Kind, Menu, Param, Pick
from nemesis.nodes import number, on_each, run, split_running, wait_for
from nemesis.targets import resolve

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
OFFSET_FILE = IMAGE_LAYOUT.faketime_offset
STROBE_PID = "/tmp/kchaos-strobe.pid"


# FAKETIME_FORCE_MONOTONIC_FIX=0: on glibc >= 2.30 libfaketime otherwise rebases the deadline of
# every timed wait on a monotonic condition variable onto its *faked* monotonic clock, which with
# DONT_FAKE_MONOTONIC lies decades away from the JVM's real one: each wait times out at once and
# the JVM's sleeping threads spin. That made Kafka start 6-10x slower; with 0 the JVM's own
# deadline is passed through unchanged (bench/bench_faketime.py measures both).
def env_text(layout: Layout = IMAGE_LAYOUT) -> str:
    """What the entrypoint sources before the JVM starts, for a node of ``layout``."""
    return f"""export LD_PRELOAD={LIBFAKETIME}
export FAKETIME_DONT_FAKE_MONOTONIC=1
export FAKETIME_FORCE_MONOTONIC_FIX=0
export FAKETIME_TIMESTAMP_FILE={layout.faketime_offset}
export FAKETIME_CACHE_DURATION=1
"""


ENV_TEXT = env_text()
DEFAULT_DELTA_S = 60.0
DEFAULT_PERIOD_S = 2.0
# Twice libfaketime's re-read interval (FAKETIME_CACHE_DURATION=1): a period of one re-read can
# alias to the same phase at every read, and the JVM would see no strobe at all.
MIN_PERIOD_S = 2.0
DEFAULT_DURATION_S = 10.0
# Finite bounds, so a hand-written or edited plan cannot ask for NaN, infinity or a sleep that
# outlives any run: an offset of up to a year either way (a plan draws minutes), a strobe
# period up to an hour, and a strobe no longer than the longest run (7 days, harness/spec.py).
MAX_DELTA_S = 365 * 24 * 3600.0
MAX_PERIOD_S = 3600.0
MAX_DURATION_S = 7 * 24 * 3600.0

# Offsets a plan draws: seconds to minutes either way, the range where Kafka's timeouts and the
# Raft timers (which read the wall clock) notice. Strobes flip by less: their effect is the flip.
BUMPS = (-300, -30, -5, 5, 30, 300)
MENU = Menu(
    "clock",
    kinds=(
        Kind(
            "bump",
            "set the targets' clock offset (a restart only the first time, to load libfaketime)",
            reads=("delta_s",),
            draws=(Pick("delta_s", BUMPS),),
        ),
        Kind(
            "strobe",
            "flip the targets' offset between +delta_s and 0 every period_s, for duration_s",
            reads=("delta_s", "period_s", "duration_s"),
            # The strobe lasts the fault's interval; its stop step ends it anyway.
            draws=(
                Pick("delta_s", (0.05, 0.5, 5)),
                Pick("period_s", (2, 3)),
                Interval("duration_s", at_least=1.0),
            ),
        ),
        Kind("reset", "every faked node back to offset 0, without a restart"),
        Kind(
            "restart-skewed",
            "set the targets' offset and restart them, so Kafka starts under the skewed clock",
            reads=("delta_s",),
            draws=(Pick("delta_s", BUMPS),),
        ),
    ),
    meaning="skew realtime clocks with libfaketime; stop resets offsets to 0, heal unloads it",
    # A node's first skew restarts its JVM, to load libfaketime.
    effects=(SKEWED, RESTARTED),
    params=(
        Param(
            "delta_s",
            "clock offset in seconds, fractional and negative allowed",
            f"-{MAX_DELTA_S:g} to {MAX_DELTA_S:g} (a year either way)",
            DEFAULT_DELTA_S,
        ),
        Param(
            "period_s",
            "strobe: seconds at +delta_s, then at 0",
            f"{MIN_PERIOD_S:g} to {MAX_PERIOD_S:g} (libfaketime re-reads the offset once a second)",
            DEFAULT_PERIOD_S,
        ),
        Param(
            "duration_s",
            "strobe: seconds the flipping goes on unless stopped first",
            f"> 0, up to {MAX_DURATION_S:g} (7 days)",
            DEFAULT_DURATION_S,
        ),
    ),
    targets=("one", "minority", "all"),
    # reset sets every faked node back to 0, whatever the step's target.
    target_kinds=("bump", "strobe", "restart-skewed"),
)


def offset_text(delta_s: float) -> str:
    """libfaketime's relative form: "+30", "-2.5" seconds."""
    return f"{delta_s:+g}\n"


def faked(node: Exec) -> bool:
    """True when the running JVM was started under libfaketime with our offset file."""
    environ = node.exec(["cat", f"{proc_dir(node)}/environ"], timeout=10).stdout
    return f"FAKETIME_TIMESTAMP_FILE={layout_of(node).faketime_offset}" in environ.split("\0")


def restart(node: Process) -> float:
    """Kill and start: the JVM re-execs through the entrypoint, which sources FAKETIME_ENV."""
    node.stop(timeout=0)
    node.start()
    return wait_for(f"{node.name} to run again", node.is_running, timeout=60)


def set_offset(node: Shell, delta_s: float) -> None:
    # Written beside and renamed, so the library never reads a half-written offset.
    offset = layout_of(node).faketime_offset
    node.put_file(offset + ".new", offset_text(delta_s))
    run(node, ["mv", "-f", offset + ".new", offset])


def skew(node: Host, delta_s: float, force_restart: bool = False) -> bool:
    """Sets the node's offset; restarts it if its JVM is not under libfaketime yet (or asked)."""
    stop_strobe(node)
    set_offset(node, delta_s)
    if force_restart or not faked(node):
        node.put_file(layout_of(node).faketime_env, env_text(layout_of(node)))
        restart(node)
        return True
    return False


def start_strobe(node: Exec, delta_s: float, period_s: float, duration_s: float) -> None:
    """Flips the offset between +delta and 0 every period, inside the node, for duration_s."""
    flips = max(1, int(duration_s / period_s / 2))
    on, off = shlex.quote(offset_text(delta_s)), shlex.quote(offset_text(0))
    offset = layout_of(node).faketime_offset
    new = offset + ".new"
    loop = (
        f"i=0; while [ $i -lt {flips} ]; do i=$((i+1)); "
        f"printf {on} > {new}; mv -f {new} {offset}; sleep {period_s:g}; "
        f"printf {off} > {new}; mv -f {new} {offset}; sleep {period_s:g}; done"
    )
    # Detached, its output closed, so the exec returns while the loop runs on in the node.
    script = f"nohup sh -c {shlex.quote(loop)} >/dev/null 2>&1 & echo $! > {STROBE_PID}"
    run(node, ["sh", "-c", script])


def stop_strobe(node: Exec) -> bool:
    got = node.exec(["cat", STROBE_PID])
    if not got.ok:
        return False
    node.exec(["kill", got.stdout.strip()])
    node.exec(["rm", "-f", STROBE_PID])
    return True


def has_env(node: Exec) -> bool:
    return node.exec(["test", "-f", layout_of(node).faketime_env]).ok


def unfake(node: Host) -> bool:
    """Removes every trace of clock faults; restarts the node if its JVM ran under them."""
    stop_strobe(node)
    if not (has_env(node) or faked(node)):
        return False
    layout = layout_of(node)
    offset = layout.faketime_offset
    run(node, ["rm", "-f", layout.faketime_env, offset, offset + ".new"])
    restart(node)
    return True


class ClockNemesis:
    fault = "clock"
    menu = MENU

    def check(self, step: FaultStep) -> dict[str, float]:
        MENU.check_keys(step)
        if step.kind == "reset":
            return {}
        params = {"delta_s": number(step.params, "delta_s", DEFAULT_DELTA_S)}
        if not -MAX_DELTA_S <= params["delta_s"] <= MAX_DELTA_S:  # also refuses NaN
            raise NemesisError(
                f"clock delta_s must be between -{MAX_DELTA_S:g} and {MAX_DELTA_S:g} s (a year "
                f"either way), got {params['delta_s']:g}"
            )
        if step.kind == "strobe":
            params["period_s"] = number(step.params, "period_s", DEFAULT_PERIOD_S)
            params["duration_s"] = number(step.params, "duration_s", DEFAULT_DURATION_S)
            if not params["period_s"] <= MAX_PERIOD_S:
                raise NemesisError(
                    f"clock strobe period_s must be at most {MAX_PERIOD_S:g} s, got "
                    f"{params['period_s']:g}"
                )
            if params["period_s"] < MIN_PERIOD_S:
                raise NemesisError(
                    f"clock strobe period_s must be at least 2 s, got {params['period_s']:g}: "
                    "libfaketime re-reads the offset once a second (FAKETIME_CACHE_DURATION=1), "
                    "so a shorter period can alias to no strobe at all"
                )
            if not 0 < params["duration_s"] <= MAX_DURATION_S:  # also refuses NaN
                raise NemesisError(
                    f"clock strobe duration_s must be positive and at most {MAX_DURATION_S:g} s "
                    f"(7 days), got {params['duration_s']:g}"
                )
        return params

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        # Parameters and targets first: a step that cannot be done must change no node.
        with before_touching():
            params = self.check(step)
            if step.kind == "reset":
                return self._reset(ctx, step)
            found = resolve(ctx, step.target or "one", random.Random(step.seed), step.params)
        delta = params["delta_s"]
        nodes, down = split_running(ctx.nodes[t] for t in found.targets)
        out: dict[str, Any] = {"kind": step.kind, **found.record(), "delta_s": delta}
        if down:
            out["not_running"] = down
        if step.kind == "strobe":
            restarted = on_each(nodes, lambda n: skew(n, 0))
            period, duration = params["period_s"], params["duration_s"]
            on_each(nodes, lambda n: start_strobe(n, delta, period, duration))
            out.update(period_s=period, duration_s=duration)
        else:
            forced = step.kind == "restart-skewed"
            restarted = on_each(nodes, lambda n: skew(n, delta, force_restart=forced))
        out["restarted"] = sorted(n for n, r in restarted.items() if r)
        out[EFFECTS] = [effect(SKEWED, found.targets, by="libfaketime")]
        if out["restarted"]:
            out[EFFECTS].append(effect(RESTARTED, out["restarted"], by="libfaketime"))
        return out

    def prepare(self, ctx: FaultContext) -> list[str]:
        """Starts every node's JVM under libfaketime at offset 0, before a run.

        The harness calls it before the workload and waits for readiness, so the run's clock
        faults change offsets without restarts the plan did not ask for.
        """
        running = [n for n in ctx.nodes.values() if n.is_running()]
        done = on_each(running, lambda n: skew(n, 0))
        return [f"{n}: restarted under libfaketime" for n, r in sorted(done.items()) if r]

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        return self._reset(ctx, step)

    def _reset(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        # Offsets go back to zero without a restart; the preload stays until heal_all.
        running = [n for n in ctx.nodes.values() if n.is_running()]

        def reset(node: Shell) -> bool:
            stop_strobe(node)
            if not faked(node):
                return False
            set_offset(node, 0)
            return True

        done = on_each(running, reset)
        reset_ = sorted(n for n, r in done.items() if r)
        out: dict[str, Any] = {"kind": step.kind, "delta_s": 0, "reset": reset_}
        if step.action == "start":  # a reset kind: the offsets jump back, a skew all the same
            out[EFFECTS] = [effect(SKEWED, reset_, by="libfaketime")]
        return out

    def heal_all(self, ctx: FaultContext) -> list[str]:
        running = [n for n in ctx.nodes.values() if n.is_running()]
        done = on_each(running, unfake)
        return [f"{n}: removed libfaketime and restarted" for n, r in sorted(done.items()) if r]
