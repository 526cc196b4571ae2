"""Fault injection: network partitions, process kills and pauses, clock skew and packet faults,
expressed as operations on node handles from clusters/ and recorded in the history.

Knows node handles, not Docker. Knows nothing about checkers or Kafka clients.

``api`` is the interface the harness drives; ``registry.build`` makes the packages (``partition``,
``process`` for kill and pause, ``clock``, ``packet``); ``heal.heal_cluster`` undoes all of them.
``grudge`` and ``targets`` are the pure parts: who is cut off from whom, and who a selector names.
"""
