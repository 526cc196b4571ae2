"""One run, carried out: a plan in, a history, a run directory and a verdict out.

``interpreter`` (``Run``) holds the cluster and hands the run to ``supervisor``, which forks the
client host and watches it; ``recovery`` finishes what a crashed client host left; ``outcome``
is what either side returns. Inside the client host: ``readiness`` (the cluster up and
answering), ``workers`` (the clients, with their lanes), ``faults`` (fault steps and healing),
``recorder`` (the one history and its clock), ``progress`` (the live display), ``wrapup``
(history kept, cluster collected, verdict) and ``rundir`` (the run directory). Reads the spec
and the plan (harness/ root); imports nothing of cli/ or campaign/.
"""
