"""Where kchaos keeps what it downloads and builds, outside the checkout and outside containers."""

import os
from pathlib import Path


def cache_dir() -> Path:
    """Cache root: ``$KCHAOS_CACHE``, else ``$XDG_CACHE_HOME/kchaos`` or ``~/.cache/kchaos``."""
    explicit = os.environ.get("KCHAOS_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kchaos"
