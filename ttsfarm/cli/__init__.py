"""The ``ttsfarm`` command: the edge where settings are read and every command is registered.

Each command lives in a module of this package and is added to :func:`main` below, by name;
the options they share are in ``options.py``, one name and one default per idea. Commands import
the engine, the farm client or the gateway only when they run, so that ``ttsfarm status`` stays
light.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import click

from ttsfarm.cli.bench import bench
from ttsfarm.cli.book import audiobook
from ttsfarm.cli.farm import cancel, fetch, status, submit, worker
from ttsfarm.cli.gateway import keys, serve
from ttsfarm.cli.synth import synth, voices
from ttsfarm.core.env_file import stack_environment
from ttsfarm.core.errors import TtsfarmError
from ttsfarm.core.redact import redact
from ttsfarm.core.settings import Settings


class _Group(click.Group):
    """Turns every ttsfarm error into one line on stderr and exit status 1, with any password
    taken out of the URLs it names."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TtsfarmError as error:
            raise click.ClickException(redact(str(error))) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The stack's .env (docker/env.example): its broker, storage and TTSFARM_* settings.",
)
@click.version_option(package_name="ttsfarm")
@click.pass_context
def main(ctx: click.Context, verbose: int, env_file: Path | None) -> None:
    """Batch text-to-speech on GPUs: local runs, or a farm of Celery workers."""
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if env_file is not None:
        try:
            os.environ.update(stack_environment(env_file))
        except TtsfarmError as error:
            raise click.ClickException(redact(str(error))) from None
    ctx.obj = Settings.load()


for _command in (synth, voices, submit, status, fetch, cancel, worker, audiobook, serve, keys, bench):
    main.add_command(_command)
