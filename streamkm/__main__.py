"""``python -m streamkm``: the ``streamkm`` command."""

from __future__ import annotations

import sys

from streamkm.cli import main

if __name__ == "__main__":
    sys.exit(main())
