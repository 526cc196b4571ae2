"""Campaigns (``kchaos campaign``): many runs over a matrix of options, Jepsen's ``test-all``.

``spec`` (a campaign spec and its matrix, each cell checked as ``--plan-only`` checks a run),
``runner`` (each cell its own bounded ``kchaos run --spec`` process) and ``report``
(campaign.json, junit.xml, summary.txt, campaign.html, pure functions of the record). A cell is
a process, not a call: this room imports nothing of run/ (nor of cli/), only the spec
(harness/ root).
"""
