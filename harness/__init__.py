"""The run interpreter and the command line: turns a spec and a seed into a plan, drives clients
and nemeses against a cluster, owns the history file while a run lasts, and calls the checkers.

Knows the interfaces of clusters/, workloads/, nemesis/ and checkers/, not their insides.
"""
