"""The run interpreter and the command line: turns a spec and a seed into a plan, drives clients
and nemeses against a cluster, owns the history file while a run lasts, and calls the checkers.

Knows the interfaces of clusters/, workloads/, nemesis/, steps/ and checkers/, not their
insides: which workloads, fault packages and planned step families exist, and what each brings
to a plan and a run, it asks their registries. Its rooms:

- ``cli/``: the ``kchaos`` command group and each command's module;
- ``run/``: one run carried out (``interpreter`` does what the plan says, with ``workers``
  for the clients, ``faults`` for fault steps and healing, the step families' drivers from
  steps/, and ``wrapup``: history kept, cluster collected, verdict);
- ``campaign/``: many runs over a matrix, each cell its own ``kchaos run`` process;
- ``shrink/``: a failing run's plan made smaller, each try its own ``kchaos run --replay``.

At the root, what those rooms share: ``spec`` (what a run is asked, from the options'
declarations), ``plan`` (what it decides in advance: when faults happen, the packages' menus
saying what, each step family planning its own steps), ``console`` (terminal output),
``exit_codes`` and ``signals`` (Ctrl-C and SIGTERM for whoever supervises child processes).
The root imports none of the rooms; run/, campaign/ and shrink/ import neither each other nor
cli/ (tests/unit/test_layering.py).
"""
