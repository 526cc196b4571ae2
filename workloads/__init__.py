"""Workloads: a Kafka client paired with a generator of operations (queue, admin, observe).

Knows Kafka clients and node addresses; never injects faults and never judges a history.
``api`` is the interface the harness drives, ``registry.WORKLOADS`` names the workloads a run can
choose, and ``observe`` is the observer every run has beside them.
"""
