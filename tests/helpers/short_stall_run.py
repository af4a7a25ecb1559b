"""The ``streamkm`` command with the floor of ``/healthz``'s stall threshold
(:data:`streamkm.runtime.health.MIN_STALL_S`, 60 s) set to another number of seconds:
``python -m tests.helpers.short_stall_run SECONDS run -c service.toml``.

A test that pauses a service past the stall threshold then waits seconds instead of a minute;
everything else the service does is unchanged (the threshold is still the largest of the
floor and what the batching and Kafka settings need, see
:func:`streamkm.runtime.health.stall_after_s`).
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Set the floor to ``float(argv[0])`` and run ``streamkm`` with the other arguments."""
    from streamkm.runtime import health

    health.MIN_STALL_S = float(argv[0])
    from streamkm.cli import main as streamkm_main

    return streamkm_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
