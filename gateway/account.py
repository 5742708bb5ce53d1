"""``/v1/keys/me``: what the caller's API key may know of itself."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from gateway.auth import ApiKeyName, CallerLimits, FarmDep
from gateway.errors import ApiError
from gateway.models import KeyView

router = APIRouter(prefix="/v1/keys", tags=["jobs"])


@router.get("/me", response_model=KeyView)
async def me(key_name: ApiKeyName, limits: CallerLimits, farm: FarmDep) -> KeyView:
    """The key's name, its limits, and the secret that signs its jobs' callbacks."""
    if not farm.settings.gateway_auth:
        raise ApiError(400, "API keys are off on this gateway: there is no key, and no callbacks", "no_keys")
    secret = await run_in_threadpool(farm.keys.callback_secret, key_name)
    jobs, chars = farm.quotas.limits_of(limits)
    return KeyView(
        name=key_name,
        callback_secret=secret,
        jobs_in_flight=jobs,
        chars_per_day=chars,
        priority=limits.priority,
    )
