"""Engine-only helpers shared by the estimators: validation, sparse input, random state,
threads, the kernel Lloyd loop, randomized SVD, raw rows, npz state I/O."""
