"""Workloads: a Kafka client paired with a generator of operations (queue, observe, admin).

Knows Kafka clients and node addresses; never injects faults and never judges a history.
"""
