"""A tiny real nemesis for testing the interpreter: stops one node's JVM with SIGSTOP.

Not the project's pause nemesis (that lives on branch nemesis): just enough real fault to see the
interpreter start, stop, record and heal faults against a live cluster.
"""

from __future__ import annotations

import random
from typing import Any

from nemesis.api import FaultContext, FaultStep


class FreezeNemesis:
    fault = "pause"

    def __init__(self) -> None:
        self.frozen: set[str] = set()

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        name = random.Random(step.seed).choice(sorted(ctx.nodes))
        ctx.nodes[name].pause()
        self.frozen.add(name)
        return {"kind": step.kind, "frozen": [name], "signal": "SIGSTOP"}

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        name = random.Random(step.seed).choice(sorted(ctx.nodes))
        ctx.nodes[name].resume()
        self.frozen.discard(name)
        return {"kind": step.kind, "resumed": [name], "signal": "SIGCONT"}

    def heal_all(self, ctx: FaultContext) -> list[str]:
        done = []
        for name, node in sorted(ctx.nodes.items()):
            if node.is_paused_by_signal():
                node.resume()
                done.append(f"sent SIGCONT to {name}")
        self.frozen.clear()
        return done
