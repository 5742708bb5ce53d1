"""``python -m ttsfarm``: the same as the ``ttsfarm`` command."""

import sys

from ttsfarm.cli import main

sys.exit(main())
