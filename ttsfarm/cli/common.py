"""Pieces the ttsfarm commands share: the text to speak, arguments as typed, one-line results
(their options are in ``ttsfarm.cli.options``)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Final

import click

from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.inputs import read_text_file
from ttsfarm.core.jobs import JobResult, SynthesisOptions, check_text
from ttsfarm.core.settings import Settings

_ESCAPED_BYTE: Final = re.compile("[\udc80-\udcff]")
"""How ``surrogateescape`` carries a byte that is not UTF-8 (0x80..0xFF) in a ``str``."""


def options_from(
    voice: str | None, speaker: int | None, length_scale: float | None, settings: Settings
) -> SynthesisOptions:
    return SynthesisOptions(voice=voice or settings.voice, speaker=speaker, length_scale=length_scale)


def typed(value: str, what: str) -> str:
    """An argument as typed, once it is UTF-8. Python decodes the command line with
    ``surrogateescape``: a byte that is not UTF-8 (Latin-1's é, 0xE9) arrives as U+DC80..U+DCFF,
    and :class:`InvalidInput` names that byte and where it is."""
    escaped = _ESCAPED_BYTE.search(value)
    if escaped:
        raise InvalidInput(
            f"{what} has a byte 0x{ord(escaped.group()) - 0xDC00:02X} at character {escaped.start() + 1} "
            f"that is not UTF-8: save or pass {what} as UTF-8"
        )
    return value


def utf8(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click's callback for an option that is text: its value as typed, once it is UTF-8."""
    return None if value is None else typed(value, f"the {param.human_readable_name}")


def text_from(text: str | None, text_file: str | None) -> str:
    """The text to speak: the argument, the file (``-`` for stdin), or else standard input
    when something is piped in (as piper reads it)."""
    if text is not None:
        typed(text, "the text")
    if text is not None and text_file is not None:
        raise click.UsageError("give the text as an argument or with -f FILE, not both")
    if text is None and text_file is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError(
                "give the text to speak as an argument, with -f FILE, or on standard input "
                "(echo 'Hello.' | ttsfarm synth -o hello.wav)"
            )
        text_file = "-"
    if text is not None and _names_a_file(text):
        raise click.UsageError(
            f"{text!r} is a file, and the argument is the text itself: use -f {shlex.quote(text)} "
            "to speak what the file holds (or add a word to speak its name)"
        )
    return check_text(read_text_file(text_file) if text_file else text or "")


def _names_a_file(text: str) -> bool:
    """A one-word argument that is the path of an existing file: ``ttsfarm synth notes.txt``
    would speak "notes dot t x t" into the output and report success."""
    if any(c.isspace() for c in text):
        return False
    try:
        return Path(text).is_file()  # as typed: the shell has expanded any ~ that was meant
    except OSError:  # a name too long to be a path
        return False


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
    count = len(result.segments)
    segments = f"{count} segment{'' if count == 1 else 's'}"
    return (
        f"{result.location}: {result.duration:.1f} s of {result.format} audio at "
        f"{result.sample_rate} Hz, {result.size / 1024:.0f} KiB, {segments}{speed_note}"
    )
