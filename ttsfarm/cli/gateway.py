"""Gateway commands: ``serve`` (the HTTP gateway) and ``keys`` (its API keys)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import click

from ttsfarm.cli.options import log_level_option
from ttsfarm.core.errors import SettingsError
from ttsfarm.core.job_limits import PRIORITIES
from ttsfarm.core.settings import NO_BROKER_MESSAGE, Settings

if TYPE_CHECKING:
    from gateway.keys import KeyLimits, KeyStore

DEFAULT_PORT: Final = 8000
HEAD_BYTES: Final = 16 * 1024
"""Largest request line and headers one request may send; more closes the connection."""
CONNECTIONS: Final = 1000
"""Connections and tasks one gateway process serves at once; past them it answers 503."""
KEEP_ALIVE_SECONDS: Final = 5
"""How long an idle connection is kept open for the client's next request."""


def _farm_settings(settings: Settings) -> Settings:
    if not settings.farm_mode:
        raise SettingsError(NO_BROKER_MESSAGE)
    return settings


def _keys(settings: Settings) -> KeyStore:
    from gateway.keys import KeyStore

    settings = _farm_settings(settings)
    return KeyStore(settings.backend_url or "", settings.redis_tls())


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int, help="Port to listen on.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1), help="Server processes.")
@log_level_option
@click.pass_obj
def serve(settings: Settings, host: str, port: int, workers: int, log_level: str) -> None:
    """Serve the HTTP gateway: jobs, OpenAI's speech API and a test page, behind API keys."""
    import uvicorn

    _farm_settings(settings)
    common = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "proxy_headers": True,
        # h11, not httptools: its parser holds a request's head to a size (httptools has no limit,
        # and one unfinished 300 MB header line grew the process by 386 MiB)
        "http": "h11",
        "h11_max_incomplete_event_size": HEAD_BYTES,
        "limit_concurrency": CONNECTIONS,
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
    }
    if workers == 1:
        from gateway.app import create_app

        uvicorn.run(create_app(settings), **common)  # type: ignore[arg-type]
    else:  # each process builds its app from the same environment
        uvicorn.run("gateway.app:app_from_env", factory=True, workers=workers, **common)  # type: ignore[arg-type]


@click.group()
def keys() -> None:
    """API keys of the HTTP gateway (kept in the farm's Redis as SHA-256 hashes)."""


def limit_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options that give a key limits of its own (unset: the gateway's settings)."""
    command = click.option(
        "--priority",
        type=click.Choice(PRIORITIES),
        default=PRIORITIES[0],
        show_default=True,
        help="The highest priority of the key's jobs: bulk keeps them behind every interactive job.",
    )(command)
    command = click.option(
        "--chars-per-day",
        type=click.IntRange(min=0),
        help="Characters a day (UTC); 0: no limit. Unset: TTSFARM_GATEWAY_KEY_CHARS_PER_DAY.",
    )(command)
    return click.option(
        "--jobs",
        "jobs_in_flight",
        type=click.IntRange(min=0),
        help="Jobs queued or running at once; 0: no limit. Unset: TTSFARM_GATEWAY_KEY_JOBS.",
    )(command)


@keys.command("add")
@click.argument("name")
@limit_options
@click.pass_obj
def keys_add(
    settings: Settings, name: str, jobs_in_flight: int | None, chars_per_day: int | None, priority: str
) -> None:
    """Make a key called NAME and print it: once, it is not kept anywhere."""
    from gateway.keys import KeyLimits

    key = _keys(settings).add(name, KeyLimits(jobs_in_flight, chars_per_day, priority))
    click.echo(key)
    click.echo(f"key {name!r} added: store it now, it cannot be shown again", err=True)


@keys.command("limits")
@click.argument("name")
@limit_options
@click.pass_obj
def keys_limits(
    settings: Settings, name: str, jobs_in_flight: int | None, chars_per_day: int | None, priority: str
) -> None:
    """Give the key called NAME these limits, in place of those it had."""
    from gateway.keys import KeyLimits

    limits = KeyLimits(jobs_in_flight, chars_per_day, priority)
    _keys(settings).set_limits(name, limits)
    click.echo(f"key {name!r}: {_limits_text(limits)}")


@keys.command("list")
@click.pass_obj
def keys_list(settings: Settings) -> None:
    """List the keys: name, id, when each was made and its limits (never the key)."""
    found = _keys(settings).list_keys()
    for key in found:
        made = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(key.created_at))
        click.echo(f"{key.name:<24} tfk_{key.key_id}_...  {made}  {_limits_text(key.limits)}")
    if not found:
        click.echo("no keys yet: ttsfarm keys add NAME", err=True)


def _limits_text(limits: KeyLimits) -> str:
    def shown(value: int | None) -> str:
        return "settings" if value is None else "no limit" if value == 0 else f"{value:,}"

    jobs, chars = shown(limits.jobs_in_flight), shown(limits.chars_per_day)
    return f"jobs {jobs}, characters a day {chars}, priority {limits.priority}"


@keys.command("revoke")
@click.argument("name")
@click.pass_obj
def keys_revoke(settings: Settings, name: str) -> None:
    """Remove the key called NAME: requests that send it are refused from now on."""
    _keys(settings).revoke(name)
    click.echo(f"key {name!r} revoked")
