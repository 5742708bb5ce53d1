"""``ttsfarm synth`` (one audio file, or one per line, in this process) and ``ttsfarm voices``."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click

from ttsfarm.cli.common import describe, options_from, text_from
from ttsfarm.cli.options import (
    FORMAT_METAVAR,
    loudness_option,
    sentence_silence_option,
    text_file_option,
    voice_options,
)
from ttsfarm.inputs import check_writable, format_for
from ttsfarm.jobs import JobRequest, check_format, check_sentence_silence
from ttsfarm.settings import Settings


@click.command()
@click.argument("text", required=False)
@text_file_option
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path, allow_dash=True),
    help="Audio file to write ('-' for standard output); with --lines or --jsonl, the folder.",
)
@click.option(
    "--format", "audio_format", metavar=FORMAT_METAVAR, help="Default: from the file name; wav for '-'."
)
@voice_options
@click.option("--noise-scale", type=float, help="Generator noise, 0 to 2 (0: the same audio every run).")
@click.option("--noise-w", "--noise-w-scale", "noise_w", type=float, help="Phoneme length noise, 0 to 2.")
@sentence_silence_option
@loudness_option()
@click.option("--title", help="Title tag (default: the first words of the text).")
@click.option(
    "--lines", is_flag=True, help="Speak each line of the input into its own file in the folder -o."
)
@click.option(
    "--jsonl",
    "--json-input",
    "json_lines",
    is_flag=True,
    help='As --lines, each line a JSON object: {"id": "utt1", "text": "...", "speaker": 0, ...}.',
)
@click.option("--fail-fast", is_flag=True, help="With --lines: stop at the first bad line (default: go on).")
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
    noise_scale: float | None,
    noise_w: float | None,
    sentence_silence: float | None,
    loudness: float | None,
    title: str | None,
    lines: bool,
    json_lines: bool,
    fail_fast: bool,
    quiet: bool,
) -> None:
    """Speak TEXT (or a file, or standard input) into one audio file, in this process; with
    --lines or --jsonl, each line of the input into its own file in the folder -o names."""
    import tempfile
    import time

    from synthesis.build import local_synthesizer
    from ttsfarm.progress import ProgressBar
    from ttsfarm.storage import LocalStorage
    from ttsfarm.synth_file import Tags, title_from

    options = replace(
        options_from(voice, speaker, length_scale, settings), noise_scale=noise_scale, noise_w=noise_w
    )
    check_sentence_silence(sentence_silence)
    if lines or json_lines:
        from ttsfarm.cli.lines import synth_lines

        if text is not None:
            raise click.UsageError(
                "with --lines or --jsonl, give the lines with -f FILE or on standard input, not as TEXT"
            )
        if title is not None:
            raise click.UsageError("--title names one file: with --lines or --jsonl each file has its own")
        audio_format = check_format(audio_format or "wav")
        synth_lines(
            settings,
            text_file,
            output,
            options,
            audio_format,
            loudness,
            sentence_silence,
            json_lines,
            fail_fast,
            quiet,
        )
        return
    if fail_fast:
        raise click.UsageError("--fail-fast goes with --lines or --jsonl")
    to_stdout = str(output) == "-"
    text = text_from(text, text_file)
    audio_format = check_format(audio_format or "wav") if to_stdout else format_for(output, audio_format)
    request = JobRequest(text, options, audio_format, loudness=loudness, sentence_silence=sentence_silence)
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
