"""Public import path of :mod:`streamkm.io.sources` (connectors import it from here)."""

# public import path; defined in streamkm.io.sources
from streamkm.io.sources import *  # noqa: F403
from streamkm.io.sources import __all__  # noqa: F401
