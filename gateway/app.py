"""The gateway's ASGI app, built from settings passed in; nothing is built at import.

uvicorn --factory gateway.app:app_from_env     # what `ttsfarm serve --workers N` runs
create_app(settings)                           # what `ttsfarm serve` and the tests run
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Final

import anyio
from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from gateway import account, health, jobs, speech
from gateway.auth import KeyFirst
from gateway.callbacks import CallbackSender
from gateway.errors import install_handlers
from gateway.farm import Farm, WorkerCount, voice_map
from gateway.keys import KeyStore
from gateway.limits import FAILED_KEYS_PER_MINUTE, BodyLimit, RateLimiter
from gateway.quotas import Quotas
from producer.client import Client
from ttsfarm.core.errors import BrokerUnavailable
from ttsfarm.core.settings import Settings
from ttsfarm.core.voices import list_voices

log = logging.getLogger(__name__)

TITLE: Final = "ttsfarm gateway"
DESCRIPTION: Final = """Submit text-to-speech jobs to the farm, follow them and fetch their audio over HTTP;
or speak short texts in one call with OpenAI's speech API. Every /v1 request needs
`Authorization: Bearer KEY` (keys come from `ttsfarm keys add NAME`). Errors are JSON:
`{"error": {"message", "type", "code"}}`."""

PAGE_HEADERS: Final = {
    # The page talks to this origin only, and plays the audio it fetched as a blob.
    "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; media-src blob:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def build_farm(settings: Settings, client: Client | None = None) -> Farm:
    """Connect to the farm: its Client (one path with every other producer), keys, voices."""
    client = client or Client(settings)
    url = client.settings.backend_url or ""
    client.storage  # noqa: B018 - opened once here; boto3 clients are shared safely across threads
    voices = {voice.name: voice for voice in list_voices(settings.voices_dir)}
    keys = KeyStore(url, client.settings.redis_tls())
    farm = Farm(
        settings=settings,
        client=client,
        keys=keys,
        callbacks=CallbackSender(
            url,
            client.statuses,
            lambda status: jobs.view(status).model_dump_json().encode(),
            keys.callback_secret,
            client.settings.redis_tls(),
        ),
        limiter=RateLimiter(url, settings.gateway_rate_limit, client.settings.redis_tls()),
        voices=voices,
        waits=anyio.CapacityLimiter(settings.gateway_speech_waits),
        workers=WorkerCount(client),
        failures=RateLimiter(url, FAILED_KEYS_PER_MINUTE, client.settings.redis_tls()),
        probes=anyio.CapacityLimiter(1),
        quotas=Quotas(
            url,
            settings.gateway_key_jobs,
            settings.gateway_key_chars_per_day,
            settings.gateway_key_speech_waits,
            client.settings.redis_tls(),
        ),
        voice_map=voice_map(settings.gateway_voices, voices, settings.voice),
    )
    try:
        if settings.gateway_auth and not farm.keys.list_keys():
            log.warning("no API keys yet: every /v1 request is refused until one is added (ttsfarm keys add)")
    except BrokerUnavailable as error:  # start all the same: /readyz says not ready until Redis answers
        log.warning("%s", error)
    if not settings.gateway_auth:
        log.warning("API keys are off (TTSFARM_GATEWAY_AUTH=false): anyone who reaches this port can submit")
    return farm


def create_app(settings: Settings) -> FastAPI:
    """The gateway for ``settings``; it connects to the farm when the server starts it."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        farm = await anyio.to_thread.run_sync(build_farm, settings)
        app.state.farm = farm
        farm.callbacks.start()
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(farm.callbacks.stop)
            farm.client.close()

    app = FastAPI(
        title=TITLE,
        description=DESCRIPTION,
        version="1",
        lifespan=lifespan,
        # Swagger UI and ReDoc load their scripts from a CDN; the OpenAPI document is served as is.
        docs_url=None,
        redoc_url=None,
        # A path with a trailing slash is a 404 naming the endpoints, not a redirect built from
        # the request's Host header, which a client chooses.
        redirect_slashes=False,
    )
    install_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=settings.gateway_max_body_bytes)
    app.add_middleware(KeyFirst)  # outermost: the key before the body
    app.include_router(jobs.router)
    app.include_router(account.router)
    app.include_router(speech.router)
    app.include_router(health.router)
    page = files("gateway").joinpath("static/index.html").read_text(encoding="utf-8")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def test_page() -> HTMLResponse:
        return HTMLResponse(page, headers=PAGE_HEADERS)

    return app


def app_from_env() -> FastAPI:
    """The gateway for the settings in the environment (``configs/``, ``TTSFARM_*``)."""
    return create_app(Settings.load())
