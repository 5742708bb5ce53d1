"""A finished job's audio as an answer: streamed from storage, or a redirect to a presigned URL."""

from __future__ import annotations

import base64
from typing import Any, Final

from starlette.responses import RedirectResponse, Response, StreamingResponse

from gateway.farm import Farm
from ttsfarm.jobs import CONTENT_TYPES, JobResult

AUDIO_RESPONSES: Final[dict[int | str, dict[str, Any]]] = {
    200: {"content": {kind: {} for kind in sorted(set(CONTENT_TYPES.values()))}}
}
"""The OpenAPI description of a route that answers with audio: one media type per format."""

REDIRECT_STATUS: Final = 307


def audio_response(farm: Farm, result: JobResult, allow_redirect: bool = True) -> Response:
    """The audio of ``result``. With ``gateway_audio_redirect`` (and storage that can presign) a
    redirect, else the bytes streamed through this process. Storage is opened before the answer
    starts, so a missing object is a 404, never a cut-off body. The audio is read from where
    the job's worker stored it, whatever storage this gateway is configured with."""
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
    }
    return StreamingResponse(storage.stream(key), media_type=CONTENT_TYPES[result.format], headers=headers)
