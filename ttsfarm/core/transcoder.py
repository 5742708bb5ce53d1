"""Audio encoded while it is still being made: PCM (or a WAV) goes into an ffmpeg process block
by block, and MP3, Ogg Opus or AAC comes out as soon as ffmpeg has a frame of it.

The blocks are fed from a thread of their own, so a slow source never stops what ffmpeg has made
from reaching the reader, and a full pipe on one side never blocks the other. A source that
fails (a job that stopped before its audio was complete) kills ffmpeg: the reader then gets an
error, never an ending that looks whole.

ffmpeg is the binary the imageio-ffmpeg wheel ships (no system ffmpeg needed).
"""

from __future__ import annotations

import contextlib
import io
import logging
import subprocess
import threading
from collections.abc import Iterable, Sequence
from typing import IO, Final

import imageio_ffmpeg

from ttsfarm.core.errors import PermanentError
from ttsfarm.core.finishing import BITRATE

log = logging.getLogger(__name__)

CODECS: Final[dict[str, tuple[str, ...]]] = {
    "mp3": ("-c:a", "libmp3lame", "-b:a", BITRATE, "-f", "mp3"),
    # Ogg pages of 100 ms: the muxer's default of one second would hold audio back that long.
    "opus": ("-c:a", "libopus", "-b:a", "32k", "-f", "ogg", "-page_duration", "100000"),
    "aac": ("-c:a", "aac", "-b:a", BITRATE, "-f", "adts"),
}
"""The formats encoded on the way out, with ffmpeg's options for each. Opus is sent in Ogg, as
OpenAI's speech API sends it; AAC as ADTS, which a player can start at any frame."""
MEDIA_TYPES: Final = {"mp3": "audio/mpeg", "opus": "audio/ogg; codecs=opus", "aac": "audio/aac"}
READ_SIZE: Final = 64 * 1024
STOP_SECONDS: Final = 5.0


class TranscodeFailed(PermanentError):
    """ffmpeg could not encode the audio, or its source stopped before the end."""


def pcm_input(sample_rate: int) -> tuple[str, ...]:
    """ffmpeg's input options for 16-bit mono PCM at ``sample_rate``."""
    return ("-f", "s16le", "-ar", str(sample_rate), "-ac", "1")


WAV_INPUT: Final = ("-f", "wav")
"""ffmpeg's input options for a WAV file."""


class Transcoder:
    """One ffmpeg process that encodes what :meth:`feed` gives it as ``codec`` (see
    :data:`CODECS`); :meth:`read` returns what it has made, ``b""`` at the end. Close it (or use
    it as a context manager) whether or not it was read to the end."""

    def __init__(self, codec: str, input_options: Sequence[str]) -> None:
        if codec not in CODECS:
            raise ValueError(f"no live encoding to {codec!r}: use one of {', '.join(CODECS)}")
        command = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error"]
        command += [*input_options, "-i", "pipe:0", "-ac", "1", *CODECS[codec]]
        command += ["-flush_packets", "1", "pipe:1"]
        self.codec = codec
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._source_error: BaseException | None = None
        self._feeder: threading.Thread | None = None

    def feed(self, blocks: Iterable[bytes]) -> None:
        """Send ``blocks`` to ffmpeg from a thread of their own, and close its input after the
        last. A block source that raises kills ffmpeg, and :meth:`read` raises in turn."""
        self._feeder = threading.Thread(target=self._send, args=(blocks,), name="transcode", daemon=True)
        self._feeder.start()

    def write(self, block: bytes) -> bool:
        """Send one block to ffmpeg from the caller's thread (:meth:`read` must be reading in
        another meanwhile, or a full pipe blocks this); ``False`` once ffmpeg is gone (:meth:`read`
        says why) or the input was ended."""
        try:
            self._stdin.write(block)
            self._stdin.flush()
        except (BrokenPipeError, ValueError):  # ffmpeg is gone, or the input was ended
            return False
        return True

    def end_input(self) -> None:
        """No more blocks: ffmpeg finishes its last frames, and :meth:`read` then ends."""
        with contextlib.suppress(BrokenPipeError):
            self._stdin.close()

    def _send(self, blocks: Iterable[bytes]) -> None:
        try:
            for block in blocks:
                if not self.write(block):
                    break
        except BaseException as error:
            self._source_error = error
            self._process.kill()
        finally:
            self.end_input()

    def read(self) -> bytes:
        """What ffmpeg has made since the last read (waits for some); ``b""`` once it is done.
        Raises :class:`TranscodeFailed` where the source or ffmpeg failed."""
        data = self._stdout.read1(READ_SIZE)
        if data:
            return data
        code = self._process.wait()
        if self._feeder is not None:
            self._feeder.join()
        if self._source_error is not None:
            error = self._source_error
            raise TranscodeFailed(f"the audio stopped before its end: {error}") from error
        if code != 0:
            said = self._stderr.read().decode(errors="replace").strip()
            raise TranscodeFailed(f"ffmpeg could not encode {self.codec} (exit {code}): {said[-500:]}")
        return b""

    @property
    def running(self) -> bool:
        return self._process.poll() is None

    def close(self) -> None:
        """Stop ffmpeg if it still runs; the feeding thread ends with it."""
        if self.running:
            self._process.kill()
        try:
            self._process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            log.warning("ffmpeg (pid %d) did not stop within %g s", self._process.pid, STOP_SECONDS)
        for pipe in (self._process.stdout, self._process.stderr):
            if pipe is not None:
                pipe.close()

    def __enter__(self) -> Transcoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _stdin(self) -> IO[bytes]:
        assert self._process.stdin is not None
        return self._process.stdin

    @property
    def _stdout(self) -> io.BufferedReader:
        assert isinstance(self._process.stdout, io.BufferedReader)
        return self._process.stdout

    @property
    def _stderr(self) -> IO[bytes]:
        assert self._process.stderr is not None
        return self._process.stderr
