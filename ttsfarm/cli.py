"""The ``ttsfarm`` command. Imports of the engine are deferred so farm commands stay light."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from ttsfarm.errors import TtsfarmError
from ttsfarm.inputs import check_writable, format_for, read_text_file
from ttsfarm.jobs import JobRequest, JobResult, SynthesisOptions, check_text
from ttsfarm.settings import Settings


class _Group(click.Group):
    """Turns every ttsfarm error into one line on stderr and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TtsfarmError as error:
            raise click.ClickException(str(error)) from None


@click.group(cls=_Group)
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.version_option(package_name="ttsfarm")
@click.pass_context
def main(ctx: click.Context, verbose: int) -> None:
    """Batch text-to-speech on GPUs: local runs, or a farm of Celery workers."""
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ctx.obj = Settings.load()


def options_from(
    voice: str | None, speaker: int | None, length_scale: float | None, settings: Settings
) -> SynthesisOptions:
    return SynthesisOptions(voice=voice or settings.voice, speaker=speaker, length_scale=length_scale)


def describe(result: JobResult, seconds: float | None = None) -> str:
    speed = f", {result.duration / seconds:.1f}x real time" if seconds else ""
    return (
        f"{result.location}: {result.duration:.1f} s of {result.format} audio at "
        f"{result.sample_rate} Hz, {result.size / 1024:.0f} KiB, {len(result.segments)} segments{speed}"
    )


def voice_options(func: Any) -> Any:
    func = click.option("--voice", help="Voice name (see `ttsfarm voices`) or a Piper .onnx path.")(func)
    func = click.option("--speaker", type=int, help="Speaker id of a multi-speaker voice.")(func)
    func = click.option("--length-scale", type=float, help="Speaking rate: >1 slower, <1 faster.")(func)
    return func


@main.command()
@click.argument("text", required=False)
@click.option("-f", "--file", "text_file", help="Read the text from this UTF-8 file ('-' for stdin).")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path), help="Audio file to write.")
@click.option("--format", "audio_format", help="wav, flac, mp3 or ogg (default: from the file name).")
@voice_options
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.pass_obj
def synth(
    settings: Settings,
    text: str | None,
    text_file: str | None,
    output: Path,
    audio_format: str | None,
    voice: str | None,
    speaker: int | None,
    length_scale: float | None,
    quiet: bool,
) -> None:
    """Speak TEXT (or a file) into one audio file, in this process."""
    import time

    from ttsfarm.progress import ProgressBar
    from ttsfarm.storage import LocalStorage
    from worker.local import local_synthesizer

    if (text is None) == (text_file is None):
        raise click.UsageError("give the text as an argument or with -f FILE, not both")
    text = check_text(read_text_file(text_file) if text_file else text or "")
    request = JobRequest(
        text, options_from(voice, speaker, length_scale, settings), format_for(output, audio_format)
    )
    check_writable(output)
    with local_synthesizer(settings) as synthesizer:
        started = time.perf_counter()
        with ProgressBar("synth", disable=quiet) as bar:
            result = synthesizer.synthesize(
                request, LocalStorage(output.parent), output.name, progress=bar.update
            )
        elapsed = time.perf_counter() - started
        stats = synthesizer.batcher.stats
        providers = sorted({engine.provider for engine in synthesizer.batcher.engines.values()})
    click.echo(describe(result, elapsed))
    if not quiet:
        click.echo(
            f"engine: {', '.join(providers)}; batches: {stats.batches}, "
            f"mean size {stats.mean_batch_size:.2f}, padding {stats.padding_ratio:.1%}",
            err=True,
        )


@main.command()
@click.pass_obj
def voices(settings: Settings) -> None:
    """List the voices known by name."""
    from ttsfarm.voices import list_voices

    for voice in list_voices(settings.voices_dir):
        speakers = f"{voice.num_speakers} speakers" if voice.num_speakers > 1 else "1 speaker"
        click.echo(
            f"{voice.name:<16} {voice.language:<6} {voice.sample_rate} Hz  {speakers}  {voice.model_path}"
        )


# Command groups that live in their own modules register themselves on import.
# One import per module, each on its own line.
from ttsfarm import cli_book  # noqa: E402,F401,I001
from ttsfarm import cli_farm  # noqa: E402,F401
from ttsfarm import cli_bench  # noqa: E402,F401
from ttsfarm import cli_gateway  # noqa: E402,F401

if __name__ == "__main__":  # pragma: no cover - `python -m ttsfarm.cli`
    # Command modules registered themselves on the imported ``ttsfarm.cli``, not on __main__.
    from ttsfarm.cli import main as registered_main

    sys.exit(registered_main())
