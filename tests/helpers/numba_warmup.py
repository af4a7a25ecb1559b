"""Compile streamkm's numba kernels into their on-disk cache (``cache=True``, next to the
sources): ``python -m tests.helpers.numba_warmup``.

In a fresh checkout nothing is cached yet, and the first minute of a parallel run would
compile the same kernels in every worker and every ``streamkm run`` it starts at once.
:mod:`tests.helpers.parallel` runs this in the background while the workers collect; what it
does not reach compiles on first use as before. It changes no result, only when the
compilation happens.
"""

from __future__ import annotations

import numpy as np


def main() -> None:
    from streamkm import MiniBatchKernelKMeans
    from streamkm.batch import KMeans, WardAgglomerative
    from streamkm.batch.kmeans_1d import kmeans_1d
    from streamkm.kernels import kernel_names

    rng = np.random.default_rng(0)
    x64 = rng.normal(size=(300, 3))
    for x in (x64, x64.astype(np.float32)):
        for kernel in kernel_names():
            model = MiniBatchKernelKMeans(3, kernel=kernel, batch_size=64, random_state=0)
            model.fit(x).predict(x)
            model.partial_fit(x[:64])
        # gamma="auto"'s decision (heat, anchor and kernel Lloyd runs) needs >= 500 rows
        MiniBatchKernelKMeans(3, random_state=0).fit(np.vstack([x, x + 0.5]))
        KMeans(3, random_state=0).fit(x).predict(x)
        WardAgglomerative(3).fit(x)
    kmeans_1d(x64[:, 0], 3)


if __name__ == "__main__":
    main()
