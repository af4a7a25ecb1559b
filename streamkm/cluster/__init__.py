"""Online clustering estimators."""

from streamkm.cluster._minibatch_kernel_kmeans import MiniBatchKernelKMeans, StepReport

__all__ = ["MiniBatchKernelKMeans", "StepReport"]
