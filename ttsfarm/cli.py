"""The ``ttsfarm`` command. Imports of the engine are deferred so farm commands stay light."""

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import click

from ttsfarm.errors import TtsfarmError
from ttsfarm.inputs import check_writable, format_for, read_text_file
from ttsfarm.jobs import AUDIO_FORMATS, JobRequest, JobResult, SynthesisOptions, check_format, check_text
from ttsfarm.settings import Settings


class _Group(click.Group):
    """Turns every ttsfarm error into one line on stderr and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TtsfarmError as error:
            raise click.ClickException(str(error)) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
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


def text_from(text: str | None, text_file: str | None) -> str:
    """The text to speak: the argument, the file (``-`` for stdin), or else standard input
    when something is piped in (as piper reads it)."""
    if text is not None and text_file is not None:
        raise click.UsageError("give the text as an argument or with -f FILE, not both")
    if text is None and text_file is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError(
                "give the text to speak as an argument, with -f FILE, or on standard input "
                "(echo 'Hello.' | ttsfarm synth -o hello.wav)"
            )
        text_file = "-"
    return check_text(read_text_file(text_file) if text_file else text or "")


def speed(audio_seconds: float, seconds: float) -> str:
    """How fast against real time, in words that cannot be read backwards."""
    if seconds <= 0 or audio_seconds <= 0:
        return ""
    ratio = audio_seconds / seconds
    if ratio >= 1:
        return f"{ratio:.1f}x faster than real time"
    return f"{1 / ratio:.1f}x slower than real time"


def describe(result: JobResult, seconds: float | None = None) -> str:
    pace = speed(result.duration, seconds) if seconds else ""
    speed_note = f"; made in {seconds:.1f} s, {pace}" if pace else ""
    return (
        f"{result.location}: {result.duration:.1f} s of {result.format} audio at "
        f"{result.sample_rate} Hz, {result.size / 1024:.0f} KiB, {len(result.segments)} segments{speed_note}"
    )


def voice_options(func: Any) -> Any:
    func = click.option("--voice", help="Voice name (see `ttsfarm voices`) or a Piper .onnx path.")(func)
    func = click.option("--speaker", type=int, help="Speaker id of a multi-speaker voice.")(func)
    func = click.option("--length-scale", type=float, help="Speaking rate: >1 slower, <1 faster.")(func)
    return func


FORMAT_METAVAR: Final = "[" + "|".join(AUDIO_FORMATS) + "]"
"""``--format`` shows its choices; a wrong one gets the one-line error of ``check_format``."""
LOUDNESS_RANGE: Final = (-40.0, -10.0)


def _loudness(ctx: click.Context, param: click.Parameter, value: str) -> float | None:
    if value.strip().lower() == "off":
        return None
    try:
        lufs = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number of LUFS such as -18, nor 'off'") from None
    low, high = LOUDNESS_RANGE
    if not low <= lufs <= high:
        raise click.BadParameter(f"{value} is outside {low:g} to {high:g} LUFS")
    return lufs


@main.command()
@click.argument("text", required=False)
@click.option("-f", "--file", "text_file", help="Read the text from this UTF-8 file ('-' for stdin).")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path, allow_dash=True),
    help="Audio file to write ('-' for standard output).",
)
@click.option(
    "--format", "audio_format", metavar=FORMAT_METAVAR, help="Default: from the file name; wav for '-'."
)
@voice_options
@click.option(
    "--loudness",
    default="-18",
    show_default=True,
    callback=_loudness,
    metavar="LUFS|off",
    help="Normalise to this loudness, true peaks under -1 dBTP (as audiobooks); 'off': the voice's level.",
)
@click.option("--title", help="Title tag (default: the first words of the text).")
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
    loudness: float | None,
    title: str | None,
    quiet: bool,
) -> None:
    """Speak TEXT (or a file, or standard input) into one audio file, in this process."""
    import tempfile
    import time

    from ttsfarm.progress import ProgressBar
    from ttsfarm.storage import LocalStorage
    from ttsfarm.synth_file import Tags, finish, title_from
    from worker.local import local_synthesizer

    to_stdout = str(output) == "-"
    text = text_from(text, text_file)
    audio_format = check_format(audio_format or "wav") if to_stdout else format_for(output, audio_format)
    options = options_from(voice, speaker, length_scale, settings)
    request = JobRequest(text, options, "flac")  # lossless until it is finished below
    if not to_stdout:
        check_writable(output)
    with (
        tempfile.TemporaryDirectory(prefix="ttsfarm-synth-") as folder,
        local_synthesizer(settings) as synthesizer,
    ):
        started = time.perf_counter()
        with ProgressBar("synth", disable=quiet) as bar:
            spoken = synthesizer.synthesize(request, LocalStorage(folder), "spoken.flac", progress=bar.update)
        target = Path(folder) / f"out.{audio_format}" if to_stdout else output
        tags = Tags(title or title_from(text), options.voice)
        result = finish(Path(spoken.location), spoken, target, audio_format, loudness, tags)
        if to_stdout:
            result = replace(result, location="standard output")
        elapsed = time.perf_counter() - started
        if to_stdout:
            sys.stdout.buffer.write(target.read_bytes())
            sys.stdout.buffer.flush()
        stats = synthesizer.batcher.stats
        providers = sorted({engine.provider for engine in synthesizer.batcher.engines.values()})
    level = "the voice's own loudness" if loudness is None else f"normalised to {loudness:g} LUFS"
    click.echo(f"{describe(result, elapsed)}; {level}", err=to_stdout)
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
