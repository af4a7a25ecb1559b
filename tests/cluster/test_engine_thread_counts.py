"""A step's results do not depend on how many threads ran it: the thread count follows the
machine's load (one thread while the load average is at or above the CPU count), so a
restarted service, or the same stream on another day, must not learn a different model or
report a different objective because the machine was busier."""

from __future__ import annotations

import numpy as np
import pytest

from streamkm import MiniBatchKernelKMeans, num_threads

pytestmark = pytest.mark.unit


def _warm(dtype, tau):
    rng = np.random.default_rng(0)
    means = rng.normal(size=(4, 8)) * 3
    model = MiniBatchKernelKMeans(4, tau=tau, gamma="median", random_state=0, tol=0.0)
    for _ in range(6):
        model.step((means[rng.integers(4, size=1024)] + rng.normal(size=(1024, 8))).astype(dtype))
    batch = (means[rng.integers(4, size=1024)] + rng.normal(size=(1024, 8))).astype(dtype)
    return model, batch


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tau", [250, 600])
def test_a_step_gives_the_same_bits_on_one_thread_and_on_two(dtype, tau):
    # 1,024 rows against 1,000 support rows (a block of one chunk) and against 2,400 (two
    # chunks, which two threads run side by side)
    model, batch = _warm(dtype, tau)
    arrays, meta = model.get_state()
    results = []
    for threads in (1, 2):
        twin = MiniBatchKernelKMeans.from_state(arrays, meta)
        with num_threads(threads):
            report = twin.step(batch)
        results.append((report, twin.get_state()[0]))
    (one, state_one), (two, state_two) = results
    assert one.objective == two.objective
    np.testing.assert_array_equal(one.labels, two.labels)
    np.testing.assert_array_equal(one.sq_distances, two.sq_distances)
    assert state_one.keys() == state_two.keys()
    for key in state_one:
        np.testing.assert_array_equal(state_one[key], state_two[key], err_msg=key)
