"""The engine's thread setting: how many threads a mini-batch step may use.

A step splits its batch into row chunks; each chunk's kernel block (a GEMM plus the numba
transform) and its partial sums are computed by one thread, with BLAS itself held to one
thread during the step, so n engine threads run n GEMMs side by side and never
n x (BLAS threads). The numba kernels release the GIL. With one thread the chunks run
inline (no pool, no hand-off).

By default a kernel block gets one thread per whole :data:`PARALLEL_BLOCK_ELEMENTS` values
(2^24, about 16.8 million) it holds, at least one, at most the CPUs this process may run on,
and only one while the machine is oversubscribed (its 1-minute load average at or above its
CPU count). A second thread pays only when it has a core to itself and enough work to cover
the hand-off and the smaller GEMMs; measured up to 16 million values it never did, quiet or
loaded, so every block measured runs on one thread (docs/benchmarks.md, engine table 7).
:func:`set_num_threads` or the environment variable ``STREAMKM_NUM_THREADS`` fix the count
instead, for every block.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from streamkm.exceptions import ParameterError

__all__ = ["PARALLEL_BLOCK_ELEMENTS", "get_num_threads", "set_num_threads", "num_threads",
           "block_threads", "run_row_chunks", "row_chunks"]

#: Kernel-block values per thread below which the automatic setting adds no thread.
PARALLEL_BLOCK_ELEMENTS = 1 << 24
_CHUNK_ELEMENTS = 1 << 21  # kernel-block entries per chunk (16 MiB in float64)
_MIN_CHUNK_ROWS = 64  # below this a chunk's GEMM repacks the support rows too often


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask; the CPU count elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _check(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError(f"the number of threads must be an integer >= 1, got {n!r}")
    return n


def _from_environment() -> int | None:
    """The fixed count of ``STREAMKM_NUM_THREADS``; ``None`` (automatic) when unset."""
    value = os.environ.get("STREAMKM_NUM_THREADS")
    if value is None:
        return None
    try:
        return _check(int(value))
    except ValueError:
        raise ParameterError(
            f"STREAMKM_NUM_THREADS must be an integer >= 1, got {value!r}") from None


# "n": the fixed count, None for automatic; "read": the environment was consulted.
_state: dict[str, Any] = {"n": None, "read": False, "pool": None, "blas": None}


def _fixed() -> int | None:
    if not _state["read"]:
        _state["n"], _state["read"] = _from_environment(), True
    return _state["n"]


def get_num_threads() -> int:
    """Most threads a mini-batch step may use: the fixed count of :func:`set_num_threads`
    (or ``STREAMKM_NUM_THREADS``), else the CPUs this process may run on (the automatic
    setting uses fewer for small blocks, see :func:`block_threads`)."""
    fixed = _fixed()
    return available_cpus() if fixed is None else int(fixed)


def set_num_threads(n: int | None) -> None:
    """Let every mini-batch step use ``n`` threads (``None``: back to the default, which is
    ``STREAMKM_NUM_THREADS`` if set, else automatic).

    Applies process-wide to all models. BLAS is held to one thread inside a step whatever
    its own setting, so the engine's ``n`` is the whole thread budget of a step.
    """
    _state["n"], _state["read"] = (_from_environment() if n is None else _check(n)), True


def block_threads(n_rows: int, n_cols: int) -> int:
    """Threads for one (``n_rows`` x ``n_cols``) kernel block: the fixed count if one is set,
    else one per whole :data:`PARALLEL_BLOCK_ELEMENTS` values, at least 1, at most the CPUs
    this process may run on, and 1 while the load average is at or above that count."""
    fixed = _fixed()
    if fixed is not None:
        return int(fixed)
    whole = (n_rows * max(n_cols, 1)) // PARALLEL_BLOCK_ELEMENTS
    if whole < 2:
        return 1
    cpus = available_cpus()
    if _load_average() >= cpus:
        return 1
    return min(whole, cpus)


def _load_average() -> float:
    """The machine's 1-minute load average (0 where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


@contextmanager
def num_threads(n: int) -> Iterator[None]:
    """Context manager: steps inside the block use ``n`` threads."""
    previous = _fixed()
    set_num_threads(n)
    try:
        yield
    finally:
        _state["n"] = previous  # automatic again if it was


def row_chunks(n_rows: int, n_cols: int) -> list[tuple[int, int]]:
    """Row ranges covering ``n_rows``: each chunk's (rows x n_cols) block stays near
    2^21 entries and holds at least ``_MIN_CHUNK_ROWS`` rows.

    The chunks depend on the block's shape only, never on the thread count: a row's kernel
    values come from a matrix product whose last bits depend on the shape it is computed in
    (float32 GEMM), and the thread count follows the machine's load, so chunks that followed
    it would make a model depend on how busy the machine was. A block small enough for one
    chunk runs on one thread, where a second does not pay."""
    by_size = math.ceil(n_rows * max(n_cols, 1) / _CHUNK_ELEMENTS)
    n_chunks = max(1, min(by_size, math.ceil(n_rows / _MIN_CHUNK_ROWS)))
    step = math.ceil(n_rows / n_chunks)
    return [(lo, min(n_rows, lo + step)) for lo in range(0, n_rows, step)]


def _pool(threads: int) -> ThreadPoolExecutor:
    pool = _state["pool"]
    if pool is None or pool._max_workers != threads:
        if pool is not None:
            pool.shutdown(wait=True)
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="streamkm")
        _state["pool"] = pool
    return pool


def _blas_limiter() -> Any:
    """A threadpoolctl controller for BLAS (created once: the scan of loaded libraries is
    the expensive part)."""
    if _state["blas"] is None:
        from threadpoolctl import ThreadpoolController

        _state["blas"] = ThreadpoolController()
    return _state["blas"]


@contextmanager
def step_threads() -> Iterator[int]:
    """Context of one engine step: BLAS held to one thread; yields the step's threads."""
    with _blas_limiter().limit(limits=1, user_api="blas"):
        yield get_num_threads()


def run_row_chunks(work: Callable[[int, int, int], None], chunks: list[tuple[int, int]],
                   threads: int) -> None:
    """Call ``work(index, lo, hi)`` for every chunk, on up to ``threads`` threads.

    ``work`` must write only its own rows of shared outputs. Exceptions propagate.
    """
    if threads <= 1 or len(chunks) <= 1:
        for index, (lo, hi) in enumerate(chunks):
            work(index, lo, hi)
        return
    futures = [_pool(threads).submit(work, index, lo, hi)
               for index, (lo, hi) in enumerate(chunks)]
    for future in futures:
        future.result()
