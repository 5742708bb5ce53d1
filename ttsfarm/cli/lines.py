"""``ttsfarm synth --lines`` and ``--jsonl``: one audio file per input line, as dataset builders
use piper, with a manifest of what was made.

The lines are read and checked first; a bad one (not JSON, no text, a bad option) is reported by
its line number and the others go on. Then the lines are spoken as concurrent jobs of one
in-process :class:`~synthesis.pipeline.Synthesizer`, whose batcher puts segments of different
lines into one batch. Each file is stored whole or not at all.
"""

from __future__ import annotations

import csv
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Sized
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from ttsfarm.cli.common import speed
from ttsfarm.core.errors import Cancelled, InvalidInput, TtsfarmError, raise_if_cancelled
from ttsfarm.core.files import atomic_target
from ttsfarm.core.inputs import check_writable, read_text_file
from ttsfarm.core.jobs import JobRequest, JobResult, SynthesisOptions
from ttsfarm.core.settings import Settings
from ttsfarm.core.voices import Voice, resolve_voice

if TYPE_CHECKING:
    from synthesis.pipeline import Synthesizer

MANIFEST_NAME: Final = "manifest.csv"
"""Written into the output folder: ``id,file,duration,speaker,text``, one row per file made, in
the order of the input."""
MANIFEST_COLUMNS: Final = ("id", "file", "duration", "speaker", "text")

LINE_OPTIONS: Final = ("speaker", "length_scale", "noise_scale", "noise_w")
"""The synthesis options a JSON line may set for itself (``speaker_id``, piper's name, is
``speaker``); the command's options apply where a line sets none."""
LINE_KEYS: Final = ("id", "text", *LINE_OPTIONS, "speaker_id", "sentence_silence")

MIN_LINES_IN_FLIGHT: Final = 2
"""Lines spoken at once on a CPU (batches of one): the next line's text is segmented while the
engine speaks the one before. Elsewhere a batch's worth for every batch runner."""
FAILED_LINES_NAMED: Final = 10
"""How many failed line numbers the closing error names before it only counts them."""

_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
"""An id that can name a file anywhere: ASCII letters, digits, ``.``, ``_``, ``-``, not first."""


@dataclass(frozen=True)
class Line:
    """One input line to speak into the file ``{name}.{format}``."""

    number: int
    name: str
    request: JobRequest


@dataclass(frozen=True)
class LineError:
    number: int
    message: str

    def __str__(self) -> str:
        return f"line {self.number}: {self.message}"


def read_lines(
    text: str, json_lines: bool, request: Callable[[str, dict[str, Any]], JobRequest]
) -> tuple[list[Line], list[LineError]]:
    """The lines of ``text`` that can be spoken, and an error for each that cannot, in order.
    Blank lines are skipped (as piper does); each other line is text, or with ``json_lines`` a
    JSON object: ``{"id": "utt001", "text": "...", "speaker": 0, "length_scale": 1.1}``.
    ``request(text, overrides)`` makes a line's job from its text and the options it sets. A
    line without an id is named by its line number."""
    numbered = [(n, raw.strip()) for n, raw in enumerate(text.splitlines(), 1) if raw.strip()]
    width = len(str(numbered[-1][0])) if numbered else 1
    lines: list[Line] = []
    errors: list[LineError] = []
    taken: dict[str, int] = {}  # file names in lower case: a folder on macOS or Windows ignores case
    for number, raw in numbered:
        try:
            fields = _json_line(raw) if json_lines else {"text": raw}
            name = _line_id(fields.pop("id", None)) or f"{number:0{width}d}"
            if name.casefold() in taken:
                raise InvalidInput(f"the id {name!r} names the file of line {taken[name.casefold()]} already")
            line_text = fields.pop("text")
            made = request(line_text, fields)
        except TtsfarmError as error:
            errors.append(LineError(number, str(error)))
            continue
        taken[name.casefold()] = number
        lines.append(Line(number, name, made))
    return lines, errors


def _json_line(raw: str) -> dict[str, Any]:
    try:
        fields = json.loads(raw)
    except json.JSONDecodeError as error:
        raise InvalidInput(f"not valid JSON: {error.msg} at column {error.colno}") from None
    if not isinstance(fields, dict):
        raise InvalidInput(f'not a JSON object: give {{"text": "..."}}, not {type(fields).__name__}')
    unknown = sorted(set(fields) - set(LINE_KEYS))
    if unknown:
        raise InvalidInput(f"unknown key {unknown[0]!r}: a line takes {', '.join(LINE_KEYS)}")
    if "text" not in fields:
        raise InvalidInput('no "text" to speak')
    if "speaker_id" in fields:
        if "speaker" in fields:
            raise InvalidInput('give "speaker" or "speaker_id" (piper\'s name for it), not both')
        fields["speaker"] = fields.pop("speaker_id")
    return fields


def _line_id(value: object) -> str | None:
    if value is None:
        return None
    name = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(name, str) or not _ID.fullmatch(name):
        raise InvalidInput(
            f"the id {value!r} cannot name a file: use up to 100 ASCII letters, digits, '.', '_' and "
            "'-', starting with a letter or digit"
        )
    return name


def line_request(
    voice: Voice,
    options: SynthesisOptions,
    audio_format: str,
    loudness: float | None,
    sentence_silence: float | None,
) -> Callable[[str, dict[str, Any]], JobRequest]:
    """Makes a line's job: the command's settings, with the options the line sets instead,
    checked against ``voice`` (a speaker it lacks fails the line as it is read)."""

    def request(text: str, overrides: dict[str, Any]) -> JobRequest:
        silence = overrides.pop("sentence_silence", sentence_silence)
        line_options = replace(options, **overrides)
        voice.speaker_id(line_options.speaker)
        return JobRequest(text, line_options, audio_format, loudness=loudness, sentence_silence=silence)

    return request


@dataclass(frozen=True)
class Made:
    line: Line
    result: JobResult


def speak_lines(
    synthesizer: Synthesizer,
    lines: list[Line],
    folder: Path,
    fail_fast: bool,
    on_line: Callable[[Line, JobResult | TtsfarmError], None],
) -> tuple[list[Made], list[LineError]]:
    """Speak every line into its own file in ``folder``, several lines at once so that their
    segments share batches; what was made (in input order) and the lines that failed.
    ``on_line`` hears of each line as it ends. With ``fail_fast`` the first failure stops the
    lines still running or waiting: they make nothing."""
    from ttsfarm.core.synth_file import Tags, title_from
    from ttsfarm.storage import LocalStorage

    storage = LocalStorage(folder)
    stop = threading.Event()

    def speak(line: Line) -> JobResult:
        request = line.request
        raise_if_cancelled(stop.is_set)  # a line still waiting when --fail-fast stopped the rest
        tags = Tags(title_from(request.text), request.options.voice)
        key = f"{line.name}.{request.format}"
        return synthesizer.synthesize(request, storage, key, tags=tags, cancelled=stop.is_set)

    batcher = synthesizer.batcher
    in_flight = max(batcher.max_batch * batcher.runners, MIN_LINES_IN_FLIGHT)
    made: list[Made] = []
    errors: list[LineError] = []
    pool = ThreadPoolExecutor(max_workers=min(in_flight, len(lines) or 1), thread_name_prefix="ttsfarm-line")
    try:
        futures: dict[Future[JobResult], Line] = {pool.submit(speak, line): line for line in lines}
        for future in as_completed(futures):
            line = futures[future]
            if future.cancelled():
                continue
            try:
                result = future.result()
            except TtsfarmError as error:
                if isinstance(error, Cancelled) and stop.is_set():  # --fail-fast stopped it
                    continue
                errors.append(LineError(line.number, str(error)))
                on_line(line, error)
                if fail_fast:
                    stop.set()
                    for waiting in futures:
                        waiting.cancel()
                continue
            made.append(Made(line, result))
            on_line(line, result)
    finally:
        stop.set()  # on an interrupt too: the lines running stop at their next segment
        pool.shutdown(wait=True, cancel_futures=True)
    made.sort(key=lambda m: m.line.number)
    errors.sort(key=lambda e: e.number)
    return made, errors


def write_manifest(folder: Path, made: list[Made]) -> Path:
    """``manifest.csv`` in ``folder``, whole or not at all: id, file, duration, speaker, text."""
    path = folder / MANIFEST_NAME
    with atomic_target(path) as temp, temp.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(MANIFEST_COLUMNS)
        for item in made:
            request, result = item.line.request, item.result
            speaker = "" if request.options.speaker is None else request.options.speaker
            name = Path(result.location).name
            writer.writerow((item.line.name, name, f"{result.duration:.3f}", speaker, request.text))
    return path


def input_text(text_file: str | None) -> tuple[str, str]:
    """The lines to speak, from ``-f FILE`` or standard input, and where they came from."""
    if text_file is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError("give the lines with -f FILE or on standard input")
        text_file = "-"
    return read_text_file(text_file), "standard input" if text_file == "-" else text_file


def synth_lines(
    settings: Settings,
    text_file: str | None,
    folder: Path,
    options: SynthesisOptions,
    audio_format: str,
    loudness: float | None,
    sentence_silence: float | None,
    json_lines: bool,
    fail_fast: bool,
    quiet: bool,
) -> None:
    """``ttsfarm synth --lines``/``--jsonl``: read and check the lines, speak them, write the
    manifest, report; exit status 1 if any line failed."""
    from synthesis.build import local_synthesizer
    from ttsfarm.core.progress import show, terminal_bar

    if str(folder) == "-" or folder.is_file():
        raise click.UsageError(f"with --lines or --jsonl, -o names a folder, not {str(folder)!r}")
    check_writable(folder / MANIFEST_NAME)
    voice = resolve_voice(options.voice, settings.voices_dir)
    voice.speaker_id(options.speaker)  # the command's own: one error, not one per line
    text, source = input_text(text_file)
    request = line_request(voice, options, audio_format, loudness, sentence_silence)
    lines, bad = read_lines(text, json_lines, request)
    for error in bad:
        click.echo(f"{source}, {error}", err=True)
    if not lines and not bad:
        raise InvalidInput(f"{source} has no lines to speak")
    if bad and fail_fast:
        raise click.ClickException(f"{_count(bad, 'bad line')} (--fail-fast): nothing was spoken")
    made: list[Made] = []
    failed: list[LineError] = []
    started = time.perf_counter()
    with local_synthesizer(settings) as synthesizer:
        if lines:
            with terminal_bar("lines", "line", len(lines), 0, quiet) as bar:
                audio = [0.0]

                def on_line(line: Line, outcome: JobResult | TtsfarmError) -> None:
                    if isinstance(outcome, TtsfarmError):
                        bar.write(f"{source}, {LineError(line.number, str(outcome))}", file=sys.stderr)
                    else:
                        audio[0] += outcome.duration
                    bar.update()
                    show(bar, f"{audio[0]:.0f} s audio")

                made, failed = speak_lines(synthesizer, lines, folder, fail_fast, on_line)
        elapsed = time.perf_counter() - started
        stats = synthesizer.batcher.stats
        providers = sorted({engine.provider for engine in synthesizer.batcher.engines.values()})
    manifest = write_manifest(folder, made) if made else None
    click.echo(_summary(folder, made, manifest, elapsed))
    if not quiet and stats.batches:
        click.echo(
            f"engine: {', '.join(providers)}; batches: {stats.batches}, "
            f"mean size {stats.mean_batch_size:.2f}, padding {stats.padding_ratio:.1%}",
            err=True,
        )
    failures = sorted(bad + failed, key=lambda e: e.number)
    if failures:
        numbers = ", ".join(str(e.number) for e in failures[:FAILED_LINES_NAMED])
        more = ", ..." if len(failures) > FAILED_LINES_NAMED else ""
        stopped = "; stopped there (--fail-fast)" if fail_fast else ""
        total = len(lines) + len(bad)
        named = f"line{'' if len(failures) == 1 else 's'} {numbers}{more}"
        raise click.ClickException(f"{len(failures)} of {total} lines failed ({named}){stopped}")


def _summary(folder: Path, made: list[Made], manifest: Path | None, elapsed: float) -> str:
    if not made:
        return f"{folder}: no files made"
    audio = sum(item.result.duration for item in made)
    first = made[0].result
    pace = speed(audio, elapsed)
    return (
        f"{folder}: {_count(made, 'file')}, {audio:.1f} s of {first.format} audio at "
        f"{first.sample_rate} Hz; made in {elapsed:.1f} s{', ' + pace if pace else ''}; "
        f"manifest {manifest}"
    )


def _count(items: Sized, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"
