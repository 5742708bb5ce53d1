"""API keys on every ``/v1`` request: ``Authorization: Bearer KEY``, as OpenAI's clients send it."""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gateway.errors import ApiError
from gateway.farm import Farm, get_farm

ANONYMOUS: Final = "anonymous"
_bearer = HTTPBearer(auto_error=False, description="An API key from `ttsfarm keys add NAME`.")


def require_key(
    farm: Annotated[Farm, Depends(get_farm)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    request: Request,
) -> str:
    """The name of the caller's key, after its rate limit; 401 or 429 otherwise. A client
    address that sent too many wrong keys this minute gets 429 before its key is looked at. With
    ``gateway_auth`` off every caller is ``anonymous`` and unlimited (the layer in front limits)."""
    if not farm.settings.gateway_auth:
        return ANONYMOUS
    if credentials is None or not credentials.credentials:
        raise ApiError(
            401,
            "missing API key: send the header 'Authorization: Bearer KEY' "
            "(an operator makes keys with `ttsfarm keys add NAME`)",
            "missing_api_key",
            {"WWW-Authenticate": "Bearer"},
        )
    address = f"failed:{request.client.host if request.client else 'unknown'}"
    wait = farm.failures.spent(address)
    if wait is not None:
        raise ApiError(
            429,
            f"too many wrong API keys from this address: retry in {wait} s",
            "too_many_wrong_keys",
            {"Retry-After": str(wait)},
        )
    name = farm.keys.verify(credentials.credentials)
    if name is None:
        farm.failures.hit(address)
        raise ApiError(
            401,
            "invalid API key: it is wrong or was revoked",
            "invalid_api_key",
            {"WWW-Authenticate": "Bearer"},
        )
    retry_after = farm.limiter.hit(name)
    if retry_after is not None:
        raise ApiError(
            429,
            f"rate limit reached: {farm.limiter.per_minute} requests a minute for this key; "
            f"retry in {retry_after} s",
            "rate_limited",
            {"Retry-After": str(retry_after)},
        )
    return name


ApiKeyName = Annotated[str, Depends(require_key)]
FarmDep = Annotated[Farm, Depends(get_farm)]
