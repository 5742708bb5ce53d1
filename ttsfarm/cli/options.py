"""The options the ttsfarm commands share: one name and one default per idea.

An option that was renamed keeps its old name as a hidden alias (:func:`renamed`), which still
works and says on stderr to use the new one, so that scripts written for it do not break.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final, TypeVar, cast

import click
from click.core import ParameterSource

from ttsfarm.cli.common import utf8
from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.jobs import AUDIO_FORMATS, DEFAULT_LOUDNESS, LOUDNESS_RANGE, check_loudness
from ttsfarm.core.settings import Settings

Command = TypeVar("Command", bound=Callable[..., Any])


def voice_option(func: Command) -> Command:
    """``--voice``: a voice by name or a Piper ``.onnx`` path (default: the voice setting)."""
    return click.option(
        "--voice", callback=utf8, help="Voice name (see `ttsfarm voices`) or a Piper .onnx path."
    )(func)


def voice_options(func: Command) -> Command:
    """``--voice``, ``--speaker`` and ``--length-scale``, as every command that speaks takes them."""
    func = click.option("--length-scale", type=float, help="Speaking rate: >1 slower, <1 faster.")(func)
    func = click.option("--speaker", type=int, help="Speaker id of a multi-speaker voice.")(func)
    return voice_option(func)  # listed first: click lists options in the reverse of this order


def text_file_option(func: Command) -> Command:
    """``-f FILE``: the text to speak, from a file (``-`` for standard input)."""
    return click.option(
        "-f",
        "--file",
        "text_file",
        metavar="FILE",
        help="Read the text from this UTF-8 file ('-' for stdin).",
    )(func)


def sentence_silence_option(func: Command) -> Command:
    """``--sentence-silence SECONDS``, piper's option: the pause after each sentence."""
    return click.option(
        "--sentence-silence",
        type=float,
        metavar="SECONDS",
        help="Silence after each sentence, 0 to 2 (as piper's; default: 0.3, 0.6 after a paragraph).",
    )(func)


FORMAT_METAVAR: Final = "[" + "|".join(AUDIO_FORMATS) + "]"
"""``--format`` shows its choices; a wrong one gets the one-line error of ``check_format``."""


LOG_LEVELS: Final = ("debug", "info", "warning", "error", "critical")


def deprecated(old: str, new: str) -> None:
    """One line on stderr for an option used under a name it no longer has."""
    click.echo(f"ttsfarm: {old} is deprecated: use {new}", err=True)


def renamed(old: str, new: str, **option: Any) -> Callable[[Command], Command]:
    """Keeps ``old``, the former name of the option ``new``, working for the scripts that use
    it: hidden from --help, it says on stderr to use ``new`` and hands its value to ``new``'s
    parameter. ``option`` is what ``new`` is declared with (its type and callback), no default."""
    hidden = f"{_dest(old)}_renamed"
    target = _dest(new)

    def decorate(func: Command) -> Command:
        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(hidden)
            if value is not None:
                if click.get_current_context().get_parameter_source(target) is ParameterSource.COMMANDLINE:
                    raise click.UsageError(f"give {new} or {old} (its old name), not both")
                deprecated(old, new)
                kwargs[target] = value
            return func(*args, **kwargs)

        return click.option(old, hidden, hidden=True, **option)(cast(Command, command))

    return decorate


def _dest(name: str) -> str:
    return name.lstrip("-").replace("-", "_")


def _loudness(off: bool) -> Callable[[click.Context, click.Parameter, str | None], float | None]:
    """Click's callback for ``--loudness``: a float in range, or None for ``off`` (where ``off``
    is allowed)."""

    def parse(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
        if value is None:  # the hidden old name, not given
            return None
        if value.strip().lower() == "off":
            if off:
                return None
            raise click.BadParameter(
                f"a book's chapters are always brought to one loudness: give one such as {DEFAULT_LOUDNESS:g}"
            )
        try:
            lufs = float(value)
        except ValueError:
            nor_off = ", nor 'off'" if off else ""
            raise click.BadParameter(
                f"{value!r} is not a number of LUFS such as {DEFAULT_LOUDNESS:g}{nor_off}"
            ) from None
        try:
            return check_loudness(lufs)  # the rule every job's loudness follows
        except InvalidInput:
            low, high = LOUDNESS_RANGE
            or_off = ", or 'off'" if off else ""
            raise click.BadParameter(
                f"{value} is outside {low:g} to {high:g} LUFS: give one such as {DEFAULT_LOUDNESS:g}{or_off}"
            ) from None

    return parse


def loudness_option(off: bool = True) -> Callable[[Command], Command]:
    """``--loudness LUFS|off``: master the audio to that loudness, true peaks under -1 dBTP;
    ``off`` keeps the voice's own level (not for books: ``off=False``). One default,
    :data:`DEFAULT_LOUDNESS`, for every command. The value reaches the command as a float or
    None."""
    return click.option(
        "--loudness",
        default=f"{DEFAULT_LOUDNESS:g}",
        show_default=True,
        callback=_loudness(off),
        metavar="LUFS|off" if off else "LUFS",
        help="Normalise to this loudness, true peaks under -1 dBTP (as audiobooks); 'off': the voice's level."
        if off
        else "Loudness of every chapter, true peaks under -1 dBTP.",
    )


def target_lufs_alias(func: Command) -> Command:
    """``--target-lufs``, the audiobook's former name of ``--loudness``."""
    return renamed("--target-lufs", "--loudness", callback=_loudness(off=False))(func)


def log_level_option(func: Command) -> Command:
    """``-l/--log-level``, as ``worker`` and ``serve`` both take it; in lower case, however typed."""
    return click.option(
        "-l",
        "--log-level",
        type=click.Choice(LOG_LEVELS, case_sensitive=False),
        default="info",
        show_default=True,
        help="How much to log.",
    )(func)


def device_options(func: Command) -> Command:
    """``--gpu N`` and ``--cpu``: the device of a command that runs the engine here."""
    func = click.option("--cpu", is_flag=True, help="Run on the CPU even where there is a GPU.")(func)
    return click.option(
        "--gpu",
        type=click.IntRange(min=0),
        metavar="N",
        help="Run on this GPU, or stop (default: the settings).",
    )(func)


def on_device(settings: Settings, gpu: int | None, cpu: bool) -> Settings:
    """``settings`` with ``--gpu N`` or ``--cpu`` in place: a GPU asked for by number is used
    or the command stops, never the CPU instead."""
    if gpu is not None and cpu:
        raise click.UsageError("give --gpu N or --cpu, not both")
    provider = "cpu" if cpu else "cuda" if gpu is not None else None
    return settings.with_options(gpu=gpu, provider=provider)
