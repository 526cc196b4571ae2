"""Fault injection: network partitions, process kills and pauses, clock skew and packet faults,
expressed as operations on node handles from clusters/ and recorded in the history.

Knows node handles, not Docker. Knows nothing about checkers or Kafka clients.
"""
