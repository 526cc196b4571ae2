"""Fault injection: network partitions, process kills and pauses, clock skew, packet faults and
faults inside the JVM (Byteman rules), expressed as operations on node handles from clusters/
and recorded in the history.

Knows node handles, not Docker. Knows nothing about checkers or Kafka clients.

``api`` is the interface the harness drives; each package module (``partition``, ``process`` for
kill and pause, ``clock``, ``packet``, ``jvm``) declares its ``MENU`` (``menu``: kinds, targets,
parameters, topologies, and how a plan draws a fault); ``registry`` names the packages, builds
them and collects their menus; ``items`` checks what ``--nemesis`` names against the menus and
the topology; ``heal.heal_cluster`` undoes all of them. ``grudge`` and ``targets`` are the pure
parts: who is cut off from whom, and who a selector names (and may name, on a topology).
"""
