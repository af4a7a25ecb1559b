"""Compile streamkm's numba kernels into their on-disk cache (``cache=True``, next to the
sources): ``python -m tests.helpers.numba_warmup``.

In a fresh checkout nothing is cached yet, and the first minute of a parallel run would
compile the same kernels in every worker and every ``streamkm run`` it starts at once.
:mod:`tests.helpers.parallel` runs this in the background while the workers collect; what it
does not reach compiles on first use as before. It changes no result, only when the
compilation happens.

The rows are three well separated blobs, so that every kernel fits them (the level-set
kernel needs density valleys between the clusters). Each part runs on its own: one that
raises is named on stderr, the others still run, and the exit status is 1.
"""

from __future__ import annotations

import json
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np


def warmup_rows(n: int = 300, dim: int = 3, seed: int = 0) -> np.ndarray:
    """``n`` rows of three unit-variance blobs 10 apart in ``dim`` dimensions (float64)."""
    rng = np.random.default_rng(seed)
    centers = 10.0 * np.eye(3, dim)
    return centers[np.arange(n) % 3] + rng.normal(size=(n, dim))


def read_file_rows(fmt: str, dtype: type) -> None:
    """Read a few rows of ``fmt`` (``"json"`` or ``"csv"``) as ``dtype`` from a file the way
    ``streamkm run`` does: whole blocks of lines parsed at once."""
    from streamkm.io.batcher import Batcher
    from streamkm.io.decoding import RecordDecoder
    from streamkm_connectors.file_tailer import FileTailSource

    rows = warmup_rows(40)
    lines = ([json.dumps({"id": f"r{i}", "x": r.tolist()}) for i, r in enumerate(rows)]
             if fmt == "json" else [",".join(map(repr, r.tolist())) for r in rows])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"in.{fmt}"
        path.write_text("\n".join(lines) + "\n")
        part = FileTailSource([str(path)]).build_part(str(path), None)
        decoder = RecordDecoder(format=fmt, dim=rows.shape[1], dtype=dtype)
        batcher = Batcher({str(path): part}, decoder, dim=rows.shape[1], batch_size=64,
                          max_wait_s=0.0, poll_interval_s=0.001, dtype=dtype)
        try:
            batch = batcher.collect(min_valid=1, wait=lambda _s: True)
            assert batch is not None and len(batch.ids) == rows.shape[0], batch
        finally:
            part.close()


def parts() -> list[tuple[str, Callable[[], object]]]:
    """The warm-up's parts: ``(name, call)``, each compiling what it uses: every kernel's
    fit, predict and step in float64 and float32, the ``gamma="auto"`` decision, the batch
    estimators, and the file reader's JSON and CSV block parsers."""
    from streamkm import MiniBatchKernelKMeans
    from streamkm.batch import KMeans, WardAgglomerative
    from streamkm.batch.kmeans_1d import kmeans_1d
    from streamkm.kernels import kernel_names

    x64 = warmup_rows()
    found: list[tuple[str, Callable[[], object]]] = []
    for x in (x64, x64.astype(np.float32)):
        dtype = x.dtype.name

        def kernel_part(x: np.ndarray = x, kernel: str = "") -> None:
            model = MiniBatchKernelKMeans(3, kernel=kernel, batch_size=64, random_state=0)
            model.fit(x).predict(x)
            model.partial_fit(x[:64])

        for kernel in kernel_names():
            found.append((f"{kernel} {dtype}",
                          lambda part=kernel_part, kernel=kernel: part(kernel=kernel)))
        # gamma="auto"'s decision (heat, anchor and kernel Lloyd runs) needs >= 500 rows
        found.append((f"gamma auto {dtype}", lambda x=x: MiniBatchKernelKMeans(
            3, random_state=0).fit(np.vstack([x, x + 0.5]))))
        found.append((f"KMeans {dtype}",
                      lambda x=x: KMeans(3, random_state=0).fit(x).predict(x)))
        found.append((f"Ward {dtype}", lambda x=x: WardAgglomerative(3).fit(x)))
    found.append(("kmeans_1d", lambda: kmeans_1d(x64[:, 0], 3)))
    for fmt in ("json", "csv"):
        for dtype in (np.float64, np.float32):
            found.append((f"read {fmt} {np.dtype(dtype).name}",
                          lambda fmt=fmt, dtype=dtype: read_file_rows(fmt, dtype)))
    return found


def main() -> int:
    """Run every part; 1 if any raised (each failure is printed on stderr), else 0."""
    failed = []
    for name, call in parts():
        try:
            call()
        except Exception:  # noqa: BLE001 -- a warm-up part's failure must not stop the rest
            failed.append(name)
            print(f"numba warm-up: {name} failed:\n{traceback.format_exc()}", file=sys.stderr)
    if failed:
        print(f"numba warm-up: {len(failed)} part(s) failed: {', '.join(failed)}",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
