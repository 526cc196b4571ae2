"""The run interpreter and the command line: turns a spec and a seed into a plan, drives clients
and nemeses against a cluster, owns the history file while a run lasts, and calls the checkers.

Knows the interfaces of clusters/, workloads/, nemesis/, steps/ and checkers/, not their
insides: which workloads, fault packages and planned step families exist, and what each brings
to a plan and a run, it asks their registries. ``plan`` decides (when faults happen; the
packages' menus say what; each step family plans its own steps), ``interpreter`` does, with
``workers`` (clients), ``faults`` (fault steps, heal), the step families' drivers (steps/) and
``wrapup`` (history kept, cluster collected, verdict).
"""
