"""Public import path of :mod:`streamkm.io.sinks` (connectors import it from here)."""

# public import path; defined in streamkm.io.sinks
from streamkm.io.sinks import *  # noqa: F403
from streamkm.io.sinks import __all__  # noqa: F401
