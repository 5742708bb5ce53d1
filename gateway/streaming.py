"""Speech streamed as it is made: the audio of a job submitted with ``stream=True``, block by
block as its worker writes it (``Client.listen``), as raw PCM, as a WAV whose header leaves the
length open, as MP3, Ogg Opus or AAC encoded on the way (``ttsfarm.core.transcoder``), or as OpenAI's
server-sent events.

A client that hangs up mid-stream has its job cancelled. A job that stops before its audio is
complete (it failed, or will be retried) cuts the stream off, so a client never takes part of the
audio for the whole of it.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Final

import anyio
from starlette.responses import StreamingResponse

from gateway.farm import Farm
from ttsfarm.core.pcm import open_wav_header
from ttsfarm.core.transcoder import CODECS, Transcoder, pcm_input
from ttsfarm.core.transcoder import MEDIA_TYPES as ENCODED_MEDIA_TYPES

log = logging.getLogger(__name__)

STREAMED_FORMATS: Final = ("pcm", "wav", *CODECS)
"""Response formats whose audio can be sent before the job is done."""
MEDIA_TYPES: Final = {
    "pcm": "audio/pcm",
    "wav": "audio/wav",
    "sse": "text/event-stream",
    **ENCODED_MEDIA_TYPES,
}


def sse_event(payload: dict[str, str]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


async def transcoded(
    blocks: Iterable[bytes], codec: str, input_options: Sequence[str], limiter: anyio.CapacityLimiter
) -> AsyncIterator[bytes]:
    """``blocks`` of audio (as ``input_options`` say) encoded as ``codec`` on the way, each piece
    sent as soon as ffmpeg has made it. Raises where ``blocks`` does, after what came before."""
    with Transcoder(codec, input_options) as transcoder:
        transcoder.feed(blocks)
        while data := await anyio.to_thread.run_sync(transcoder.read, limiter=limiter):
            yield data


def streamed_speech(farm: Farm, job_id: str, kind: str, sample_rate: int) -> StreamingResponse:
    """The answer that streams job ``job_id``'s audio as ``kind`` (one of
    :data:`STREAMED_FORMATS`, or sse)."""
    headers = {"X-Job-Id": job_id, "X-Sample-Rate": str(sample_rate), "Cache-Control": "no-store"}
    body = _blocks(farm, job_id, kind, sample_rate)
    return StreamingResponse(body, media_type=MEDIA_TYPES[kind], headers=headers)


async def _blocks(farm: Farm, job_id: str, kind: str, sample_rate: int) -> AsyncIterator[bytes]:
    chunks: Iterator[bytes] = farm.client.listen(job_id, farm.settings.gateway_speech_timeout_seconds)
    finished = False
    try:
        async for piece in _pieces(chunks, kind, sample_rate, farm.waits):
            yield piece
        finished = True
    finally:
        if not finished:  # the client hung up, or the job stopped: nobody takes what comes next
            with anyio.CancelScope(shield=True):
                try:
                    await anyio.to_thread.run_sync(farm.client.cancel, job_id)
                except Exception as error:  # the stream is over either way; the log says why
                    log.warning("job %s: could not cancel it after its stream ended: %s", job_id, error)


async def _pieces(
    chunks: Iterator[bytes], kind: str, sample_rate: int, limiter: anyio.CapacityLimiter
) -> AsyncIterator[bytes]:
    """The PCM ``chunks`` as ``kind`` sends them."""
    if kind in CODECS:
        async for data in transcoded(chunks, kind, pcm_input(sample_rate), limiter):
            yield data
        return
    if kind == "wav":
        yield open_wav_header(sample_rate)
    while (chunk := await anyio.to_thread.run_sync(next, chunks, None, limiter=limiter)) is not None:
        if kind == "sse":
            yield sse_event({"type": "speech.audio.delta", "audio": base64.b64encode(chunk).decode()})
        else:
            yield chunk
    if kind == "sse":
        yield sse_event({"type": "speech.audio.done"})
