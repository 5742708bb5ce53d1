"""A finished job's audio as an answer: streamed from storage (a byte range of it, where one is
asked for, as players seeking ask), or a redirect to a presigned URL."""

from __future__ import annotations

import base64
import re
from typing import Any, Final

from starlette.responses import RedirectResponse, Response, StreamingResponse

from gateway.farm import Farm
from gateway.streaming import transcoded
from ttsfarm.core.jobs import CONTENT_TYPES, JobResult
from ttsfarm.core.transcoder import MEDIA_TYPES, WAV_INPUT

AUDIO_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    200: {"content": {kind: {} for kind in sorted({*CONTENT_TYPES.values(), *MEDIA_TYPES.values()})}}
}
"""The OpenAPI description of a route that answers with audio: one media type per format."""

REDIRECT_STATUS: Final = 307
PARTIAL: Final = 206
UNSATISFIABLE: Final = 416
_RANGE: Final = re.compile(r"bytes=(\d*)-(\d*)")
"""One byte range (RFC 9110): ``a-b``, ``a-`` or the last ``-n`` bytes. Several ranges at once
are answered with the whole file, as the RFC allows."""


class RangeNotSatisfiable(ValueError):
    """The byte range asked for lies past the end of the audio."""


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The first and last byte ``header`` asks for, or ``None`` for the whole file (no header,
    or one this does not serve); :class:`RangeNotSatisfiable` past the end."""
    found = _RANGE.fullmatch(header.strip()) if header else None
    if found is None or found[1] == found[2] == "":
        return None
    if found[1] == "":  # the last n bytes
        suffix = int(found[2])
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiable(header)
        return max(size - suffix, 0), size - 1
    first = int(found[1])
    last = min(int(found[2]), size - 1) if found[2] else size - 1
    if first >= size or last < first:
        raise RangeNotSatisfiable(header)
    return first, last


def audio_response(
    farm: Farm, result: JobResult, allow_redirect: bool = True, range_header: str | None = None
) -> Response:
    """The audio of ``result``. With ``gateway_audio_redirect`` (and storage that can presign) a
    redirect, else the bytes streamed through this process: those ``range_header`` asks for,
    if any (206). Storage is opened before the answer starts, so a missing object is a 404,
    never a cut-off body. The audio is read from where the job's worker stored it, whatever
    storage this gateway is configured with."""
    storage, key = farm.client.audio(result)
    if allow_redirect and farm.settings.gateway_audio_redirect:
        url = storage.download_url(key)
        if url is not None:
            return RedirectResponse(url, status_code=REDIRECT_STATUS)
    digest = base64.b64encode(bytes.fromhex(result.sha256)).decode()
    headers = {
        "Content-Length": str(result.size),
        "Content-Disposition": f'attachment; filename="{result.job_id}.{result.format}"',
        "ETag": f'"{result.sha256}"',
        "Repr-Digest": f"sha-256=:{digest}:",
        "X-Audio-Duration": f"{result.duration:.3f}",
        "Accept-Ranges": "bytes",
    }
    media_type = CONTENT_TYPES[result.format]
    try:
        span = byte_range(range_header, result.size)
    except RangeNotSatisfiable:
        headers = {"Content-Range": f"bytes */{result.size}", "Accept-Ranges": "bytes"}
        return Response(status_code=UNSATISFIABLE, headers=headers)
    if span is None:
        return StreamingResponse(storage.stream(key), media_type=media_type, headers=headers)
    first, last = span
    headers["Content-Length"] = str(last - first + 1)
    headers["Content-Range"] = f"bytes {first}-{last}/{result.size}"
    stream = storage.stream(key, first, last)
    return StreamingResponse(stream, status_code=PARTIAL, media_type=media_type, headers=headers)


def encoded_response(farm: Farm, result: JobResult, codec: str) -> StreamingResponse:
    """The audio of ``result`` (a WAV) encoded as ``codec`` (opus or aac: formats a job does not
    store) on its way out, piece by piece as ffmpeg makes it."""
    storage, key = farm.client.audio(result)
    headers = {
        "Content-Disposition": f'attachment; filename="{result.job_id}.{codec}"',
        "X-Audio-Duration": f"{result.duration:.3f}",
    }
    body = transcoded(storage.stream(key), codec, WAV_INPUT, farm.waits)
    return StreamingResponse(body, media_type=MEDIA_TYPES[codec], headers=headers)
