"""checkers.core.memory: while a check runs, freed part-sized arrays are reused, not faulted in
again; after it, the process allocates as before."""

import resource

import numpy as np
import pytest

from checkers.core.memory import _libc, reused_memory

pytestmark = pytest.mark.skipif(_libc() is None, reason="needs glibc's mallopt")


def _faults_of_churn() -> int:
    """Page faults of allocating, filling and freeing a 16 MB array ten times."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        a = np.ones(2_000_000)
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_part_sized_arrays_are_reused_inside_and_given_back_after():
    with reused_memory():
        inside = _faults_of_churn()
    outside = _faults_of_churn()
    # Ten fresh 16 MB arrays are ~40k faults; reused, only the first one's ~4k.
    assert outside > 30_000
    assert inside < outside / 3


def test_settings_are_restored_when_the_check_fails():
    with pytest.raises(RuntimeError), reused_memory():
        raise RuntimeError("a check that crashed")
    assert _faults_of_churn() > 30_000


def test_arrow_decodes_into_glibc_inside_and_its_own_pool_after():
    import pyarrow as pa

    before = pa.default_memory_pool().backend_name
    system = pa.system_memory_pool()
    with reused_memory():
        held = system.bytes_allocated()
        array = pa.array(list(range(100_000)))  # built by Arrow, in the default pool
        assert system.bytes_allocated() >= held + 800_000
    assert pa.default_memory_pool().backend_name == before
    assert array.to_pylist()[-1] == 99_999  # a buffer outlives the switch back
    with pytest.raises(RuntimeError), reused_memory():
        raise RuntimeError("a check that crashed")
    assert pa.default_memory_pool().backend_name == before
