"""``python -m warpsci``: the ``warpsci`` command (and what torchrun's ``-m warpsci`` runs)."""

import sys

from warpsci.cli import main

if __name__ == "__main__":
    sys.exit(main())
