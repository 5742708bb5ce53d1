"""``/healthz`` (this process answers) and ``/readyz`` (Redis answers and a worker is alive).
Neither needs a key, and neither says more than a count."""

from __future__ import annotations

import anyio
from fastapi import APIRouter

from gateway.auth import FarmDep
from gateway.errors import ApiError
from gateway.models import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, response_model_exclude_none=True)
async def healthz() -> Health:
    """The gateway process is up (the container health check)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"description": "Not ready"}})
async def readyz(farm: FarmDep) -> Health:
    """Ready for traffic: the farm's Redis answers and at least one worker answers a ping."""
    workers = await anyio.to_thread.run_sync(farm.workers, limiter=farm.probes)
    if workers < 1:
        raise ApiError(503, "no worker answered a ping: jobs would only queue", "no_workers")
    return Health(status="ready", workers=workers)
