"""Audio encoded while it is made (ttsfarm.core.transcoder): real ffmpeg, decoded back by ffmpeg."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

from tests.helpers_audio import decoded, energy_db
from ttsfarm.core.pcm import pcm16
from ttsfarm.core.transcoder import CODECS, TranscodeFailed, Transcoder, pcm_input

RATE = 22050
TONE_SECONDS = 3.0


def tone(seconds: float) -> np.ndarray:
    """A 440 Hz tone at half scale, with a rise and fall in level, as float32."""
    t = np.arange(round(seconds * RATE)) / RATE
    return (0.5 * np.sin(2 * np.pi * 440 * t) * (0.6 + 0.4 * np.sin(np.pi * t / seconds))).astype(np.float32)


def blocks_of(audio: np.ndarray, count: int) -> list[bytes]:
    return [pcm16(part) for part in np.array_split(audio, count)]


def read_all(transcoder: Transcoder) -> bytes:
    pieces = []
    while piece := transcoder.read():
        pieces.append(piece)
    return b"".join(pieces)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_blocks_encode_to_the_same_audio(codec: str) -> None:
    audio = tone(TONE_SECONDS)
    with Transcoder(codec, pcm_input(RATE)) as transcoder:
        transcoder.feed(blocks_of(audio, 7))
        back = decoded(read_all(transcoder), RATE)
    # Encoders add priming and pad the last frame: never more than a few frames of 1,152 samples.
    assert 0 <= len(back) - len(audio) < 4 * 1152, (len(back), len(audio))
    assert energy_db(back) == pytest.approx(energy_db(audio), abs=0.5)
    assert np.abs(back).max() < 0.6


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_audio_comes_out_before_the_input_ends(codec: str) -> None:
    """The first second goes in, and encoded audio comes out while the source still waits."""
    release = threading.Event()
    waited_out = threading.Event()

    def source() -> Iterator[bytes]:
        yield pcm16(tone(1.0))
        if not release.wait(60):
            waited_out.set()
        yield pcm16(tone(1.0))

    with Transcoder(codec, pcm_input(RATE)) as transcoder:
        transcoder.feed(source())
        first = transcoder.read()
        release.set()
        rest = read_all(transcoder)
    assert first and rest
    assert not waited_out.is_set()  # the first piece did not wait for the rest of the input
    assert len(decoded(first + rest, RATE)) >= 2 * RATE


def test_a_source_that_fails_is_an_error_never_an_ending() -> None:
    def source() -> Iterator[bytes]:
        yield pcm16(tone(1.0))
        raise RuntimeError("the job stopped")

    with Transcoder("mp3", pcm_input(RATE)) as transcoder:
        transcoder.feed(source())
        with pytest.raises(TranscodeFailed, match="stopped before its end: the job stopped"):
            read_all(transcoder)


def test_input_ffmpeg_cannot_read_is_an_error_with_its_reason() -> None:
    with Transcoder("aac", ("-f", "wav")) as transcoder:
        transcoder.feed([b"not a wav file at all" * 100])
        with pytest.raises(TranscodeFailed, match="ffmpeg could not encode aac"):
            read_all(transcoder)


def test_an_unknown_codec_is_refused() -> None:
    with pytest.raises(ValueError, match="use one of mp3, opus, aac"):
        Transcoder("wma", pcm_input(RATE))


def test_closing_early_stops_ffmpeg() -> None:
    release = threading.Event()

    def source() -> Iterator[bytes]:
        yield pcm16(tone(1.0))
        release.wait(60)

    transcoder = Transcoder("opus", pcm_input(RATE))
    transcoder.feed(source())
    assert transcoder.read()
    transcoder.close()
    release.set()
    assert not transcoder.running


def test_blocks_written_by_the_caller_encode_to_the_same_audio() -> None:
    """The push side: blocks written from one thread while another reads, then the input ended."""
    audio = tone(TONE_SECONDS)
    with Transcoder("mp3", pcm_input(RATE)) as transcoder:
        pieces: list[bytes] = []
        reader = threading.Thread(target=lambda: pieces.append(read_all(transcoder)))
        reader.start()
        assert all(transcoder.write(block) for block in blocks_of(audio, 7))
        transcoder.end_input()
        reader.join(60)
    back = decoded(pieces[0], RATE)
    assert 0 <= len(back) - len(audio) < 4 * 1152
    assert energy_db(back) == pytest.approx(energy_db(audio), abs=0.5)
    assert not transcoder.write(b"\0\0")  # its input ended: the block is refused, not raised
