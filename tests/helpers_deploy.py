"""What the deployment tests share: the container's health check, loaded as a module."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_healthcheck() -> ModuleType:
    """``docker/healthcheck.py``, which the image installs as ``ttsfarm-healthcheck``."""
    spec = importlib.util.spec_from_file_location("ttsfarm_healthcheck", ROOT / "docker" / "healthcheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
