"""Limits: requests per key per minute (in Redis, shared by every gateway) and body size."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Final

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.errors import error_body
from ttsfarm.core.jobs import MAX_TEXT_CHARS
from ttsfarm.farm.registry import KEY_PREFIX, connect, reach

WINDOW_SECONDS: Final = 60
RATE_PREFIX: Final = f"{KEY_PREFIX}gateway:rate:"
FAILED_KEYS_PER_MINUTE: Final = 20
"""Wrong or revoked API keys one client address may send in a minute; past that its requests are
answered 429 before any key is checked, so keys cannot be guessed at speed."""


class RateLimiter:
    """A fixed window per key: at most ``per_minute`` requests in each clock minute. One atomic
    INCR per request in the farm's Redis, so the limit holds across any number of gateways.
    A burst of up to twice the limit can straddle a minute's edge; that is the price of one
    command per request."""

    def __init__(self, url: str, per_minute: int, tls: Mapping[str, str] | None = None) -> None:
        self.url, self.per_minute = url, per_minute
        self._redis = connect(url, tls)

    def hit(self, name: str) -> int | None:
        """Count one request of ``name``: ``None`` if allowed, else seconds until it may retry."""
        if self.per_minute <= 0:
            return None
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        pipe = self._redis.pipeline()
        pipe.incr(f"{RATE_PREFIX}{name}:{window}")
        pipe.expire(f"{RATE_PREFIX}{name}:{window}", WINDOW_SECONDS * 2)
        count, _ = reach(self.url, pipe.execute)
        return None if int(count) <= self.per_minute else self._until_next(now)

    def spent(self, name: str) -> int | None:
        """Without counting a request: ``None`` if ``name`` has requests left this minute, else
        seconds until it has."""
        if self.per_minute <= 0:
            return None
        now = time.time()
        count = reach(self.url, self._redis.get, f"{RATE_PREFIX}{name}:{int(now // WINDOW_SECONDS)}")
        return None if int(count or 0) < self.per_minute else self._until_next(now)

    @staticmethod
    def _until_next(now: float) -> int:
        window = int(now // WINDOW_SECONDS)
        return max(1, int((window + 1) * WINDOW_SECONDS - now + 0.999))


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once a body passes the limit. An HTTPException, so that FastAPI
    lets it through (it turns other errors raised while reading a body into a 400)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(
            413,
            f"the request body is over {max_bytes:,} bytes: send less "
            f"(a job takes at most {MAX_TEXT_CHARS:,} characters of text)",
        )


class BodyLimit:
    """ASGI middleware: a request whose body passes ``max_bytes`` is answered 413 without being
    read further, whether it declares its length or streams it in chunks."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(error_body(413, BodyTooLarge(self.max_bytes).detail)).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
