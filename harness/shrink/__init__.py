"""``kchaos shrink``: a failing run's plan made smaller while it still fails (docs/shrink.md).

``candidates`` (pure: smaller valid plans from a plan, through the nemesis menus and the step
registry), ``search`` (delta debugging and greedy passes over them, judged by an injected runner
that replays a plan and says which failing kinds it found), ``suspects`` (which fault units
the original run's findings point at: what ddmin tries first), ``replay`` (that runner for real: a
``kchaos run --replay`` process per try) and ``report`` (shrink.json's reading, shrink.html).
A shrink imports neither a run nor a campaign: each try is its own ``kchaos run`` process.
"""
