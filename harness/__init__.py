"""The run interpreter and the command line: turns a spec and a seed into a plan, drives clients
and nemeses against a cluster, owns the history file while a run lasts, and calls the checkers.

Knows the interfaces of clusters/, workloads/, nemesis/ and checkers/, not their insides: which
workloads and fault packages exist, and what each brings to a plan and a run, it asks their
registries. ``plan`` decides (when faults happen; the packages' menus say what), ``interpreter``
does, with ``workers`` (clients), ``faults`` (fault steps, heal), ``migration`` (the migration
topology's steps) and ``wrapup`` (history kept, cluster collected, verdict).
"""
