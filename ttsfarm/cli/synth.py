"""``ttsfarm synth`` (one audio file, in this process) and ``ttsfarm voices``."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click

from ttsfarm.cli.common import (
    FORMAT_METAVAR,
    describe,
    loudness_option,
    options_from,
    text_from,
    voice_options,
)
from ttsfarm.inputs import check_writable, format_for
from ttsfarm.jobs import JobRequest, check_format
from ttsfarm.settings import Settings


@click.command()
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
@loudness_option("-18")
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

    from synthesis.build import local_synthesizer
    from ttsfarm.progress import ProgressBar
    from ttsfarm.storage import LocalStorage
    from ttsfarm.synth_file import Tags, title_from

    to_stdout = str(output) == "-"
    text = text_from(text, text_file)
    audio_format = check_format(audio_format or "wav") if to_stdout else format_for(output, audio_format)
    options = options_from(voice, speaker, length_scale, settings)
    request = JobRequest(text, options, audio_format, loudness=loudness)
    tags = Tags(title or title_from(text), options.voice)
    if not to_stdout:
        check_writable(output)
    with (
        tempfile.TemporaryDirectory(prefix="ttsfarm-synth-") as folder,
        local_synthesizer(settings) as synthesizer,
    ):
        started = time.perf_counter()
        # the pipeline masters, encodes and tags the file, then copies it into place whole
        place = Path(folder) / f"out.{audio_format}" if to_stdout else output.resolve()
        storage, key = LocalStorage(place.parent), place.name
        with ProgressBar("synth", disable=quiet) as bar:
            result = synthesizer.synthesize(request, storage, key, progress=bar.update, tags=tags)
        elapsed = time.perf_counter() - started
        if to_stdout:
            sys.stdout.buffer.write(Path(result.location).read_bytes())
            sys.stdout.buffer.flush()
            result = replace(result, location="standard output")
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


@click.command()
@click.pass_obj
def voices(settings: Settings) -> None:
    """List the voices known by name."""
    from ttsfarm.voices import list_voices

    for voice in list_voices(settings.voices_dir):
        speakers = f"{voice.num_speakers} speakers" if voice.num_speakers > 1 else "1 speaker"
        click.echo(
            f"{voice.name:<16} {voice.language:<6} {voice.sample_rate} Hz  {speakers}  {voice.model_path}"
        )
