"""Public import path of :mod:`streamkm.io.registry` (connectors import it from here)."""

# public import path; defined in streamkm.io.registry
from streamkm.io.registry import *  # noqa: F403
from streamkm.io.registry import __all__  # noqa: F401
