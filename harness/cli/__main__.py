"""``python -m harness.cli``: the ``kchaos`` command."""

from harness.cli import main

main()
