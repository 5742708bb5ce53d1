"""Running another checkout of the project beside this one, for an A/B in one run."""

from __future__ import annotations

import os
from pathlib import Path


def checkout_env(checkout: Path) -> dict[str, str]:
    """The environment for a process that imports ``checkout``'s packages before any other:
    its folder first on ``PYTHONPATH``, the rest of the path kept (where the libraries are)."""
    path = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}
