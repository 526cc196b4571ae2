"""Ctrl-C and SIGTERM handled for a block, by whoever supervises child processes."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

STOPPING = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def handling(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` for SIGINT and SIGTERM in the block, the previous handlers after it. Only the
    main thread may set handlers: elsewhere (a test's thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, handler) for s in STOPPING}
    try:
        yield
    finally:
        for s, previous in before.items():
            signal.signal(s, previous)
