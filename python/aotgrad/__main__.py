"""``python -m aotgrad``: the command line, :mod:`aotgrad.tools.cli`."""

from __future__ import annotations

import sys

from .tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
