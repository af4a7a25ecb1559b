"""Online clustering estimators."""

from streamkm.cluster._minibatch_kernel_kmeans import MiniBatchKernelKMeans
from streamkm.model import StepReport

__all__ = ["MiniBatchKernelKMeans", "StepReport"]
