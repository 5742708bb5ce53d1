"""Lossy pieces that join without a gap: a chapter is encoded on its own, where it was mastered,
and the book's ``.m4b`` and ``.mp3`` are the chapters' pieces joined by stream copy.

An encoder delays its input (AAC by 1,024 samples of priming, LAME by 576, and an MP3 decoder
adds 529) and ends on a whole frame. A chapter's length is a multiple of every frame size
(:data:`FRAME_ALIGNMENT`), and each piece is encoded from the chapter with as many samples left
out at its start as the delay puts back, and as many at its end as make the frames end with the
chapter: chapter ``k`` then starts in the joined book exactly where the chapters before it end.
The samples left out are silence (a chapter opens and closes with silence), and two pieces meet
in silence, so a join has neither a gap nor a click.

ffmpeg is the binary the imageio-ffmpeg wheel ships (no system ffmpeg needed).
"""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import imageio_ffmpeg
import numpy as np

from ttsfarm.core.errors import Cancelled, PermanentError
from ttsfarm.core.files import atomic_target, sha256_file
from ttsfarm.core.finishing import BITRATE, FRAME_ALIGNMENT
from ttsfarm.core.jobs import EncodedPiece
from ttsfarm.core.loudness import integrated_loudness, quick_true_peak

log = logging.getLogger(__name__)

ENCODE_TIMEOUT_SECONDS: Final = 6 * 3600
STOP_POLL_SECONDS: Final = 0.2
"""How often a running ffmpeg is checked for a stop."""


@dataclass(frozen=True)
class PieceCodec:
    """How one kind of piece is encoded and where its samples go."""

    name: str
    book_format: str
    """The book file its pieces are joined into."""
    raw_format: str
    """ffmpeg's muxer of the bare stream a piece is kept in (no header a join would repeat)."""
    raw_input: str
    """ffmpeg's demuxer of that stream."""
    content_type: str
    head: int
    """Samples of the chapter left out at the start: the delay puts as many back."""
    tail: int
    """Samples left out at the end, so that the last frame ends where the chapter ends."""
    encoder: tuple[str, ...]
    level: float = 1.0
    """What the encoder multiplies the level by: its input is divided by it first."""
    headroom: float = 0.0
    """dB under the ceiling that the chapter's peaks are limited to before this encoder: what it
    raises true peaks by in speech."""


PIECE_CODECS: Final = {
    # AAC: 1,024 samples of priming; with them a piece of N - 1,024 samples fills N / 1,024
    # frames. The book's MP4 has no edit list, so players play the priming as the chapter's
    # first (silent) samples. The fast coder: 2.2-2.5x quicker than the default two-loop search
    # and scored alike (docs/audiobook.md, "How the book is finished").
    "aac": PieceCodec(
        "aac", "m4b", "adts", "aac", "audio/aac", 1_024, 0, ("-c:a", "aac", "-aac_coder", "fast")
    ),
    # MP3: LAME delays by 576 and a decoder by 529 (1,105 in all), and LAME pads the end; with
    # 1,152 left out a piece fills N / frame frames. The book's mp3 has no Xing header, so no
    # player drops any of them: the chapter's sample 1,105 comes out at 1,105.
    "mp3": PieceCodec(
        "mp3",
        "mp3",
        "mp3",
        "mp3",
        "audio/mpeg",
        1_105,
        47,
        # LAME's quality 7 (ffmpeg's compression level): quicker than its default and scored alike
        # (docs/audiobook.md); its peaks rise less (ten minutes at -1.3 dBTP came out at -1.12
        # against -0.61 dBTP with the default, the level restored)
        ("-c:a", "libmp3lame", "-compression_level", "7", "-write_xing", "0", "-id3v2_version", "0"),
        level=0.95,  # LAME's output is 0.446 dB under its input, at every rate and bitrate
        headroom=0.3,
    ),
}


def aligned_length(samples: int) -> int:
    """The least multiple of :data:`FRAME_ALIGNMENT` that holds ``samples``."""
    return -(-samples // FRAME_ALIGNMENT) * FRAME_ALIGNMENT


def encode_piece(
    chapter: Path,
    frames: int,
    rate: int,
    codec: PieceCodec,
    target: Path,
    should_stop: Callable[[], bool] | None = None,
) -> EncodedPiece:
    """Encode ``chapter`` (``frames`` samples, a multiple of :data:`FRAME_ALIGNMENT`) as a piece
    of ``codec`` at ``target``, and measure its decoded loudness and true peak."""
    if frames % FRAME_ALIGNMENT:
        raise ValueError(f"a chapter of {frames} samples is not a whole number of frames")
    with atomic_target(target) as temp:
        run_ffmpeg(_encode_arguments(chapter, frames, codec, temp), f"encode {codec.name}", should_stop)
        decoded = decode(temp, rate, codec.raw_input, should_stop)
        if len(decoded) != frames:
            raise PermanentError(
                f"the {codec.name} encoder made {len(decoded)} samples of a {frames}-sample chapter: "
                "this ffmpeg's encoder delay differs from the one ttsfarm was built for"
            )
    loudness, peak = integrated_loudness(decoded, rate), quick_true_peak(decoded)
    return EncodedPiece(codec.name, str(target), target.stat().st_size, sha256_file(target), loudness, peak)


def _encode_arguments(chapter: Path, frames: int, codec: PieceCodec, target: Path) -> list[str]:
    trim = f"atrim=start_sample={codec.head}:end_sample={frames - codec.tail},asetpts=N/SR/TB"
    gain = f",volume={1 / codec.level:.8f}" if codec.level != 1.0 else ""
    return [
        *("-i", str(chapter), "-map", "0:a", "-af", trim + gain),
        *codec.encoder,
        *(
            "-b:a",
            BITRATE,
            "-fflags",
            "+bitexact",
            "-flags:a",
            "+bitexact",
            "-f",
            codec.raw_format,
            str(target),
        ),
    ]


def decode(
    path: Path, rate: int, input_format: str | None = None, should_stop: Callable[[], bool] | None = None
) -> np.ndarray:
    """Every sample ffmpeg decodes from ``path``, mono float32 at ``rate``."""
    arguments = ["-f", input_format] if input_format else []
    output = run_ffmpeg(
        [*arguments, "-i", str(path), "-map", "0:a", "-ac", "1", "-ar", str(rate), "-f", "f32le", "pipe:1"],
        f"decode {path.name}",
        should_stop,
        capture=True,
    )
    assert isinstance(output, bytes)
    return np.frombuffer(output, dtype=np.float32)


def run_ffmpeg(
    arguments: list[str],
    what: str,
    should_stop: Callable[[], bool] | None = None,
    capture: bool = False,
    loglevel: str = "error",
) -> str | bytes:
    """Run the bundled ffmpeg: its standard output with ``capture`` (bytes), else its stderr;
    one line saying why if it fails. Once ``should_stop()`` is true ffmpeg is killed and
    :class:`Cancelled` raised (within :data:`STOP_POLL_SECONDS`)."""
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-nostdin", "-hide_banner", "-loglevel", loglevel, "-y"]
    command += arguments
    log.debug("ffmpeg: %s", command)
    if should_stop is not None and should_stop():
        raise Cancelled(f"ffmpeg was stopped before it could {what}")
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except OSError as error:
        raise PermanentError(f"cannot run ffmpeg to {what}: {error.strerror}") from None
    with process:
        try:
            stdout, stderr = _communicate(process, what, should_stop)
        except BaseException:
            process.kill()
            process.communicate()
            raise
    if process.returncode != 0:
        text = stderr.decode("utf-8", "replace").strip()
        detail = text.splitlines()[-1] if text else f"status {process.returncode}"
        raise PermanentError(f"ffmpeg could not {what}: {detail}")
    return stdout if capture else stderr.decode("utf-8", "replace")


def _communicate(
    process: subprocess.Popen[bytes], what: str, should_stop: Callable[[], bool] | None
) -> tuple[bytes, bytes]:
    deadline = time.monotonic() + ENCODE_TIMEOUT_SECONDS
    while True:
        try:
            stdout, stderr = process.communicate(timeout=STOP_POLL_SECONDS)
            return stdout or b"", stderr or b""
        except subprocess.TimeoutExpired:
            if should_stop is not None and should_stop():
                raise Cancelled(f"ffmpeg was stopped before it could {what}") from None
            if time.monotonic() > deadline:
                raise PermanentError(f"ffmpeg did not {what} in {ENCODE_TIMEOUT_SECONDS} s") from None
