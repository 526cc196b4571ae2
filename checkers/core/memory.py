"""How the check asks the C allocators for memory: fresh pages are what cost on a VM.

Every page a process touches for the first time is a kernel fault, and on a virtual machine
whose host reclaims idle guest memory (this one runs DAMON-based reclaim) each fault costs
several microseconds. A check reads its history in parts of about a million rows and works on
batches of keys, so it allocates and frees the same part-sized arrays hundreds of times; with
glibc's defaults many of those go back to the kernel (heap trimmed, or mapped and unmapped)
and fault in again. Measured at 10M ops: 1.11M faults without `reused_memory`, 0.78M with it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

# mallopt(3) parameters and glibc's defaults for them.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_DEFAULT_TRIM, _DEFAULT_MMAP = 128 * 1024, 128 * 1024
# The largest threshold glibc accepts on 64-bit (HEAP_MAX_SIZE / 2): arrays below it come from
# the heap and are reused; the history-sized arrays above it are mapped and unmapped as before.
_PART_SIZED = 32 * 1024 * 1024
_NEVER = 2**31 - 1  # mallopt takes a C int: the largest trim threshold it can be given


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    if libc is None or not hasattr(libc, "mallopt") or not hasattr(libc, "malloc_trim"):
        return None
    return libc


@contextmanager
def reused_memory() -> Iterator[None]:
    """Inside: freed part-sized arrays stay with the process and are reused; after: what is
    free goes back to the kernel (malloc_trim, in a thread of its own), and glibc's default
    thresholds are set again (as fixed values: once a threshold is set, glibc no longer moves
    it by itself).
    Process-wide while it lasts; a no-op where the C library is not glibc."""
    _no_hugepage_advice()
    libc = _libc()
    if libc is None or libc.mallopt(_M_MMAP_THRESHOLD, _PART_SIZED) != 1:
        yield
        return
    libc.mallopt(_M_TRIM_THRESHOLD, _NEVER)
    arrow_pool = pa.default_memory_pool()
    # Arrow's own default (mimalloc) commits fresh memory for every part it decodes and gives
    # it back a second later: 0.3 s more kernel time than glibc at 1M ops (median of 10).
    # Every buffer keeps the pool it came from, so switching back later is safe.
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(arrow_pool)
        libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM)
        libc.mallopt(_M_MMAP_THRESHOLD, _DEFAULT_MMAP)
        # Handing the free pages back walks every arena (35 ms after a 1M-op check): the
        # verdict need not wait for it.
        threading.Thread(target=libc.malloc_trim, args=(0,), daemon=True).start()


_worker_set = False


def worker_memory() -> None:
    """reused_memory's settings for the rest of the process, once: for a Spark engine's Python
    worker, which lives to run kchaos's per-bucket functions. Without them a fresh worker ran
    each bucket at half the speed of a reused one (10M ops: 17.5 s against 8.1 s of checks)."""
    global _worker_set
    if _worker_set:
        return
    _worker_set = True
    _no_hugepage_advice()
    libc = _libc()
    if libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, _PART_SIZED) == 1:
        libc.mallopt(_M_TRIM_THRESHOLD, _NEVER)
        pa.set_memory_pool(pa.system_memory_pool())


def _no_hugepage_advice() -> None:
    """numpy advises the kernel to back big arrays with huge pages. With transparent huge pages
    in `madvise` mode every fresh array then faults through direct compaction: at 10M ops that
    was 9.5 s of kernel time against 5.6 s without the advice (1M: no difference), far more than
    the fewer TLB misses save. Process-wide, so set once, by whoever checks."""
    setter = getattr(getattr(np, "_core", None), "multiarray", None)
    if setter is not None and hasattr(setter, "_set_madvise_hugepage"):
        setter._set_madvise_hugepage(False)
