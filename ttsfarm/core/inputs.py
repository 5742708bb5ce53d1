"""Reading user input (text files, output paths) with errors that say what to fix."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.jobs import check_format


def read_text_file(path: str) -> str:
    """The UTF-8 text of ``path`` (``-`` reads standard input)."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except FileNotFoundError:
        raise InvalidInput(f"file {path} does not exist") from None
    except IsADirectoryError:
        raise InvalidInput(f"{path} is a folder, not a text file") from None
    except OSError as error:
        raise InvalidInput(f"cannot read {path}: {error.strerror}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InvalidInput(
            f"{path} is not UTF-8 text (bad byte at offset {error.start}): convert it to UTF-8"
        ) from None


def format_for(output: Path, explicit: str | None) -> str:
    """The audio format: the one asked for, else the output file's extension."""
    if explicit:
        return check_format(explicit)
    if not output.suffix:
        raise InvalidInput(f"cannot tell the format of {output}: add an extension or --format")
    return check_format(output.suffix)


def check_writable(output: Path) -> None:
    """Fail now, before any synthesis, if ``output`` cannot be written."""
    if output.is_dir():
        raise InvalidInput(f"{output} is a folder: give a file name")
    folder = output.parent if str(output.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".ttsfarm-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise InvalidInput(f"cannot write to {folder}: {error.strerror}") from None
