"""The observer: every Kafka node's own view of the quorum, sampled over JMX all run long.

Samples are operations of process "observer", so they must not overlap: nodes are sampled one
after another, each with a short timeout, so that a paused node costs one timeout per round, not
the cadence of the others. A sample that times out is `info`; a node that refuses is `fail`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from clusters.jmx import JmxUnavailable, sample_kafka
from clusters.topology import Topology
from history.format import OBSERVER

CADENCE_S = 0.25
SAMPLE_TIMEOUT_S = 0.5


class Observer:
    def __init__(self, topology: Topology, recorder: Any, cadence_s: float = CADENCE_S) -> None:
        self.nodes = [n for n in topology.nodes if not n.is_zookeeper]
        self.recorder = recorder
        self.cadence_s = cadence_s
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="observer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def sample(self, spec) -> None:
        self.recorder.invoke("observe", None, OBSERVER, spec.name)
        try:
            value = sample_kafka(spec.ip, spec.roles, timeout=SAMPLE_TIMEOUT_S)
        except JmxUnavailable as exc:
            text = str(exc)
            # Refused: the JVM is down and said so; anything else may still be in flight.
            kind = "fail" if "ConnectionError" in text else "info"
            self.recorder.record(kind, "observe", None, OBSERVER, spec.name, text)
            return
        self.recorder.ok("observe", value, OBSERVER, spec.name)
        self.samples += 1

    def _loop(self) -> None:
        next_round = time.monotonic()
        while not self._stop.is_set():
            for spec in self.nodes:
                if self._stop.is_set():
                    return
                self.sample(spec)
            next_round += self.cadence_s
            # Behind schedule (a node timed out): start the next round now rather than catch up.
            next_round = max(next_round, time.monotonic())
            self._stop.wait(next_round - time.monotonic())
