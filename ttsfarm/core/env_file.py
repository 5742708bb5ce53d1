"""The stack's ``.env`` (from ``docker/env.example``) read for the host's ``ttsfarm`` command, so an
operator submits from the host with the settings the containers have: ``ttsfarm --env-file .env``.

Compose builds each service's broker URL from ``REDIS_PASSWORD``, ``REDIS_HOST``, ``REDIS_PORT``
and ``REDIS_DB``; the same URL is built here. ``TTSFARM_*`` and ``AWS_*`` values are taken as they
are. Variables already set in the environment win, as they do for Compose.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from dotenv import dotenv_values

from ttsfarm.core.errors import SettingsError

PASSED_ON = ("TTSFARM_", "AWS_")


def stack_environment(path: str | Path, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables ``path`` gives the host command, without those ``environ`` sets already."""
    path = Path(path)
    if not path.is_file():
        raise SettingsError(f"--env-file {path}: no such file (make it with: cp docker/env.example .env)")
    values = {key: value or "" for key, value in dotenv_values(path).items()}
    found = {key: value for key, value in values.items() if key.startswith(PASSED_ON)}
    if "TTSFARM_BROKER_URL" not in found and values.get("REDIS_PASSWORD"):
        password = quote(values["REDIS_PASSWORD"], safe="")
        host, port = values.get("REDIS_HOST") or "127.0.0.1", values.get("REDIS_PORT") or "6379"
        found["TTSFARM_BROKER_URL"] = f"redis://:{password}@{host}:{port}/{values.get('REDIS_DB') or '0'}"
    return {key: value for key, value in found.items() if key not in environ}
