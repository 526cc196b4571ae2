"""Checkers: pure functions from a history to findings (Spark for scale, networkx for cycles).

Must never import Docker, Kafka clients, nemeses or anything that runs a cluster.
"""
