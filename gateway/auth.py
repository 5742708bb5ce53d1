"""API keys on every ``/v1`` request: ``Authorization: Bearer KEY``, as OpenAI's clients send it.

A request with a body has its key checked before the body is read (:class:`KeyFirst`): a caller
without a valid key never gets the gateway to buffer what it sends, and a body that trickles in
is cut off after ``gateway_body_seconds`` (30 s).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Final

import anyio
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import ApiError, error_body
from gateway.farm import Farm, get_farm
from gateway.keys import ApiKey, KeyLimits

ANONYMOUS: Final = ApiKey("anonymous", "", 0.0)
"""Every caller with ``gateway_auth`` off: no limits of its own."""
CALLER: Final = "caller"
"""Where the caller's key, once checked, is kept in the request's state."""
BEARER: Final = "bearer "
_bearer = HTTPBearer(auto_error=False, description="An API key from `ttsfarm keys add NAME`.")


def caller_for(farm: Farm, key: str | None, address: str) -> ApiKey:
    """What is kept of ``key``, after its rate limit; :class:`ApiError` 401 or 429 otherwise. An
    ``address`` that sent too many wrong keys this minute gets 429 before its key is looked at.
    With ``gateway_auth`` off every caller is ``anonymous`` and unlimited (the layer in front
    limits)."""
    if not farm.settings.gateway_auth:
        return ANONYMOUS
    if not key:
        raise ApiError(
            401,
            "missing API key: send the header 'Authorization: Bearer KEY' "
            "(an operator makes keys with `ttsfarm keys add NAME`)",
            "missing_api_key",
            {"WWW-Authenticate": "Bearer"},
        )
    failures = f"failed:{address}"
    wait = farm.failures.spent(failures)
    if wait is not None:
        raise ApiError(
            429,
            f"too many wrong API keys from this address: retry in {wait} s",
            "too_many_wrong_keys",
            {"Retry-After": str(wait)},
        )
    found = farm.keys.verify(key)
    if found is None:
        farm.failures.hit(failures)
        raise ApiError(
            401,
            "invalid API key: it is wrong or was revoked",
            "invalid_api_key",
            {"WWW-Authenticate": "Bearer"},
        )
    retry_after = farm.limiter.hit(found.name)
    if retry_after is not None:
        raise ApiError(
            429,
            f"rate limit reached: {farm.limiter.per_minute} requests a minute for this key; "
            f"retry in {retry_after} s",
            "rate_limited",
            {"Retry-After": str(retry_after)},
        )
    return found


def require_caller(
    farm: Annotated[Farm, Depends(get_farm)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    request: Request,
) -> ApiKey:
    """The caller's key (:func:`caller_for`), checked here or, for a request with a body, already
    by :class:`KeyFirst`: its record is read once per request."""
    checked = getattr(request.state, CALLER, None)
    if isinstance(checked, ApiKey):
        return checked
    key = credentials.credentials if credentials else None
    caller = caller_for(farm, key, request.client.host if request.client else "unknown")
    setattr(request.state, CALLER, caller)
    return caller


def require_key(caller: Annotated[ApiKey, Depends(require_caller)]) -> str:
    """The name of the caller's key."""
    return caller.name


def caller_limits(caller: Annotated[ApiKey, Depends(require_caller)]) -> KeyLimits:
    """The caller's key's own limits (``gateway.keys.KeyLimits``)."""
    return caller.limits


class KeyFirst:
    """ASGI middleware: a ``/v1`` request with a body has its key checked before a byte of the
    body is read, and its body must arrive within ``gateway_body_seconds``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        if not str(scope["path"]).startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        farm = scope["app"].state.farm
        headers = dict(scope["headers"])
        given = headers.get(b"authorization", b"").decode("latin-1")
        key = given[len(BEARER) :].strip() if given.lower().startswith(BEARER) else None
        address = scope["client"][0] if scope.get("client") else "unknown"
        try:
            caller = await anyio.to_thread.run_sync(caller_for, farm, key, address)
        except ApiError as error:
            await _answer(send, error.status, error.message, error.code, error.headers)
            return
        scope.setdefault("state", {})[CALLER] = caller
        limit = farm.settings.gateway_body_seconds
        deadline = anyio.current_time() + limit
        body_done = False

        async def timed_receive() -> Message:
            nonlocal body_done
            if body_done:  # later reads wait for a disconnect: no deadline on those
                return await receive()
            with anyio.move_on_after(max(deadline - anyio.current_time(), 0)):
                message = await receive()
                body_done = message["type"] != "http.request" or not message.get("more_body", False)
                return message
            raise BodyTooSlow(limit)

        await self.app(scope, timed_receive, send)


class BodyTooSlow(HTTPException):
    """Raised from ``receive`` when a body is still arriving at its deadline. An HTTPException,
    so that FastAPI lets it through as a 408 (it turns other errors raised while reading a body
    into a 400)."""

    def __init__(self, limit: float) -> None:
        super().__init__(408, f"the request body did not arrive within {limit:g} s: send it at once")


async def _answer(
    send: Send, status: int, message: str, code: str | None, extra: dict[str, str] | None = None
) -> None:
    body = json.dumps(error_body(status, message, code)).encode()
    headers: list[Any] = [(b"content-type", b"application/json")]
    headers.append((b"content-length", str(len(body)).encode()))
    headers += [(name.lower().encode(), value.encode()) for name, value in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


ApiKeyName = Annotated[str, Depends(require_key)]
CallerLimits = Annotated[KeyLimits, Depends(caller_limits)]
FarmDep = Annotated[Farm, Depends(get_farm)]
