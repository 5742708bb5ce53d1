"""``python -m ttsfarm``: the same as the ``ttsfarm`` command."""

import sys

from ttsfarm.cli import main

if __name__ == "__main__":  # not when a spawned process imports this module
    sys.exit(main())
