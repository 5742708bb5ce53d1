"""``ttsfarm synth`` (one audio file, or one per line, in this process) and ``ttsfarm voices``."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ttsfarm.cli.common import describe, options_from, text_from
from ttsfarm.cli.options import (
    FORMAT_METAVAR,
    loudness_option,
    sentence_silence_option,
    text_file_option,
    voice_options,
)
from ttsfarm.core.inputs import check_writable, format_for
from ttsfarm.core.jobs import JobRequest, check_format, check_sentence_silence
from ttsfarm.core.settings import Settings

if TYPE_CHECKING:
    from typing import BinaryIO

    import numpy as np


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
    "--format",
    "audio_format",
    metavar=FORMAT_METAVAR,
    help="Default: from the file name; wav for '-'. With -o -, 'pcm' streams raw 16-bit samples "
    "(wav and mp3 stream too with --loudness off).",
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
    from ttsfarm.core.progress import ProgressBar
    from ttsfarm.core.synth_file import Tags, title_from
    from ttsfarm.storage import LocalStorage

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
    streamed = streamed_kind(to_stdout, audio_format, loudness)
    if streamed in ("pcm", "mp3"):
        audio_format, loudness = "wav", None  # the file made beside the stream, and dropped
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
        rate = synthesizer.voice(options.voice).sample_rate
        with StdoutStream(streamed, rate) as listener, ProgressBar("synth", disable=quiet) as bar:
            result = synthesizer.synthesize(
                request, storage, key, progress=bar.update, tags=tags, listener=listener if streamed else None
            )
        elapsed = time.perf_counter() - started
        if streamed:
            result = replace(result, location="standard output", format=streamed, size=listener.written)
        elif to_stdout:
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


def streamed_kind(to_stdout: bool, audio_format: str | None, loudness: float | None) -> str | None:
    """How ``synth -o -`` streams the audio as it is made: ``pcm`` (raw 16-bit samples, as
    piper's ``--output-raw``), ``wav`` (a header with open lengths, then the samples) or ``mp3``
    (encoded as it comes) with ``--loudness off``, since mastering needs the whole; or ``None``:
    written whole at the end."""
    if not to_stdout:
        if audio_format == "pcm":
            raise click.UsageError("--format pcm streams raw samples to standard output: give -o -")
        return None
    if audio_format == "pcm":
        if loudness is not None and loudness_given():
            raise click.UsageError("pcm streams the voice's own level as it is made: leave out --loudness")
        return "pcm"
    kind = audio_format or "wav"
    return kind if loudness is None and kind in ("wav", "mp3") else None


def loudness_given() -> bool:
    context = click.get_current_context()
    return context.get_parameter_source("loudness") is not click.core.ParameterSource.DEFAULT


class StdoutStream:
    """Writes the samples to standard output as the pipeline writes them (``kind``, from
    :func:`streamed_kind`; ``None``: nothing): 16-bit PCM, after an open-length WAV header for
    ``wav``, or encoded by ffmpeg on the way for ``mp3``. As a context manager it sends the
    encoder's last frames at a clean end, and stops it otherwise."""

    def __init__(self, kind: str | None, sample_rate: int) -> None:
        self.out = sys.stdout.buffer
        self.header = kind == "wav"
        self.sample_rate = sample_rate
        self._written = 0
        self._encoded: EncodedStdout | None = (
            EncodedStdout(kind, sample_rate, self.out) if kind == "mp3" else None
        )

    def __call__(self, samples: np.ndarray) -> None:
        from ttsfarm.core.pcm import open_wav_header, pcm16

        if self._encoded is not None:
            self._encoded.send(pcm16(samples))
            return
        if self.header:
            self._write(open_wav_header(self.sample_rate))
            self.header = False
        self._write(pcm16(samples))

    def _write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()
        self._written += len(data)

    @property
    def written(self) -> int:
        """Bytes sent to standard output so far."""
        return self._encoded.written if self._encoded is not None else self._written

    def __enter__(self) -> StdoutStream:
        return self

    def __exit__(self, error_type: type[BaseException] | None, *rest: object) -> None:
        if self._encoded is not None:
            self._encoded.end(whole=error_type is None)


class EncodedStdout:
    """PCM blocks encoded as ``codec`` by one ffmpeg process, what it makes copied to ``out`` by a
    thread of its own as soon as it is made."""

    def __init__(self, codec: str, sample_rate: int, out: BinaryIO) -> None:
        import threading

        from ttsfarm.core.transcoder import Transcoder, pcm_input

        self.out = out
        self.written = 0
        self._encoder = Transcoder(codec, pcm_input(sample_rate))
        self._failure: Exception | None = None
        self._copier = threading.Thread(target=self._copy, name="stdout-copy", daemon=True)
        self._copier.start()

    def send(self, block: bytes) -> None:
        self._encoder.write(block)  # ffmpeg gone: the copier has the reason, end() raises it

    def _copy(self) -> None:
        try:
            while data := self._encoder.read():
                self.out.write(data)
                self.out.flush()
                self.written += len(data)
        except Exception as error:  # raised again by end(), in the command's thread
            self._failure = error

    def end(self, whole: bool) -> None:
        """Send the last frames (``whole``), or stop the encoder where the audio was cut short."""
        if whole:
            self._encoder.end_input()
        else:
            self._encoder.close()
        self._copier.join()
        self._encoder.close()
        if whole and self._failure is not None:
            raise self._failure


@click.command()
@click.pass_obj
def voices(settings: Settings) -> None:
    """List the voices known by name."""
    from ttsfarm.core.voices import list_voices

    for voice in list_voices(settings.voices_dir):
        speakers = f"{voice.num_speakers} speakers" if voice.num_speakers > 1 else "1 speaker"
        click.echo(
            f"{voice.name:<16} {voice.language:<6} {voice.sample_rate} Hz  {speakers}  {voice.model_path}"
        )
