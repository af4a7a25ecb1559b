"""The engine's thread setting: how many threads a mini-batch step may use.

A step splits its batch into row chunks; each chunk's kernel block (a GEMM plus the numba
transform) and its partial sums are computed by one thread, with BLAS itself held to one
thread during the step, so n engine threads run n GEMMs side by side and never
n x (BLAS threads). The numba kernels release the GIL. With one thread the chunks run
inline (no pool, no hand-off).

The default is :data:`DEFAULT_NUM_THREADS` (chosen from the 1 vs 2 thread measurement in
docs/benchmarks.md, engine section), capped at the CPUs this process may run on; the
environment variable ``STREAMKM_NUM_THREADS`` overrides it at import time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from streamkm.exceptions import ParameterError

__all__ = ["DEFAULT_NUM_THREADS", "get_num_threads", "set_num_threads", "num_threads",
           "run_row_chunks", "row_chunks"]

DEFAULT_NUM_THREADS = 2
_CHUNK_ELEMENTS = 1 << 21  # kernel-block entries per chunk (16 MiB in float64)
_MIN_CHUNK_ROWS = 64  # below this a chunk's GEMM repacks the support rows too often


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _check(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError(f"the number of threads must be an integer >= 1, got {n!r}")
    return n


def _from_environment() -> int:
    value = os.environ.get("STREAMKM_NUM_THREADS")
    if value is None:
        return min(DEFAULT_NUM_THREADS, _available_cpus())
    try:
        return _check(int(value))
    except ValueError:
        raise ParameterError(
            f"STREAMKM_NUM_THREADS must be an integer >= 1, got {value!r}") from None


_state: dict[str, Any] = {"n": None, "pool": None, "blas": None}


def get_num_threads() -> int:
    """Threads a mini-batch step may use (see :func:`set_num_threads`)."""
    if _state["n"] is None:
        _state["n"] = _from_environment()
    return int(_state["n"])


def set_num_threads(n: int | None) -> None:
    """Let every mini-batch step use ``n`` threads (``None``: back to the default).

    Applies process-wide to all models. BLAS is held to one thread inside a step whatever
    its own setting, so the engine's ``n`` is the whole thread budget of a step.
    """
    _state["n"] = _from_environment() if n is None else _check(n)


@contextmanager
def num_threads(n: int) -> Iterator[None]:
    """Context manager: steps inside the block use ``n`` threads."""
    previous = get_num_threads()
    set_num_threads(n)
    try:
        yield
    finally:
        set_num_threads(previous)


def row_chunks(n_rows: int, n_cols: int, threads: int) -> list[tuple[int, int]]:
    """Row ranges covering ``n_rows``: each chunk's (rows x n_cols) block stays near
    2^21 entries, at least ``_MIN_CHUNK_ROWS`` rows, and there are at least ``threads``
    chunks when the rows allow it."""
    by_size = math.ceil(n_rows * max(n_cols, 1) / _CHUNK_ELEMENTS)
    n_chunks = max(by_size, threads)
    n_chunks = max(1, min(n_chunks, math.ceil(n_rows / _MIN_CHUNK_ROWS)))
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
