"""``/v1/jobs``: submit, follow, fetch, cancel and delete jobs, through the producer's own Client.

A job belongs to the API key that made it: any other key is told it does not exist (404), on
every verb, as an id never submitted is. Idempotency keys live in each API key's own space too.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

from fastapi import APIRouter, Header, Path, Query, Response

from gateway.audio import AUDIO_RESPONSES, audio_response
from gateway.auth import ApiKeyName, CallerLimits, FarmDep
from gateway.callbacks import check_callback_url
from gateway.errors import ApiError
from gateway.farm import Farm
from gateway.models import JobCreate, JobView
from producer.client import JobSpec
from ttsfarm.core.captions import CAPTION_FORMATS, GRANULARITIES, captions
from ttsfarm.core.errors import InvalidInput, JobNotFound
from ttsfarm.core.jobs import MAX_TEXT_CHARS, JobStatus, check_text
from ttsfarm.core.redact import redact

JOB_ID: Final = re.compile(r"[0-9a-f]{32}")
JobId = Annotated[str, Path(description="The id POST /v1/jobs answered.")]
ERRORS: Final[dict[int | str, dict[str, str]]] = {
    400: {"description": "Bad body or option"},
    401: {"description": "Missing or invalid API key"},
    404: {"description": "Unknown job id"},
    413: {"description": "Body or text too large"},
    429: {"description": "Rate limit reached"},
    503: {"description": "The farm's Redis or storage cannot be reached, or its queue is full (Retry-After)"},
}

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=ERRORS)


def check_job_text(text: str) -> str:
    """The text if a job takes it; 413 past the job limit, 400 if empty."""
    try:
        return check_text(text)
    except InvalidInput as error:
        status = 413 if len(text) > MAX_TEXT_CHARS else 400
        raise ApiError(status, str(error), "text_too_long" if status == 413 else "invalid_text") from None


def owned_key(key_name: str, idempotency_key: str | None) -> str | None:
    """An idempotency key in the caller's own space: one API key's never returns another's job."""
    return f"{key_name}:{idempotency_key}" if idempotency_key else None


def check_callback(farm: Farm, url: str) -> None:
    """400 for a callback this gateway cannot post: a URL it does not take, or no keys to sign."""
    if not farm.settings.gateway_auth:
        message = "callbacks are signed with an API key's secret: this gateway has keys off"
        raise ApiError(400, message, "no_keys")
    check_callback_url(url)


def known_status(farm: Farm, job_id: str, key_name: str) -> JobStatus:
    """The job's status, or 404 for an id that is not a job of the caller's key (malformed ids
    included). With ``gateway_auth`` off there is one caller, and every job is its own."""
    status = farm.client.status(job_id) if JOB_ID.fullmatch(job_id) else None
    theirs = status is not None and (not farm.settings.gateway_auth or status.owner == key_name)
    if status is None or status.state == "unknown" or not theirs:
        raise JobNotFound(f"unknown job id {job_id}: it was never submitted with this key, or expired")
    return status


def view(status: JobStatus) -> JobView:
    return JobView.of(status, redact(status.error) if status.error else None)


@router.post("", status_code=202, response_model=JobView)
def submit_job(
    body: JobCreate,
    key_name: ApiKeyName,
    limits: CallerLimits,
    farm: FarmDep,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> JobView:
    """Queue one job; answers at once with its id and state (202). Follow it at GET
    /v1/jobs/{id}, then GET its audio_url."""
    spec = JobSpec(
        text=check_job_text(body.text),
        voice=farm.voice(body.voice, body.speaker),
        speaker=body.speaker,
        length_scale=body.length_scale,
        noise_scale=body.noise_scale,
        noise_w=body.noise_w,
        format=body.format,
        loudness=body.loudness,
        sentence_silence=body.sentence_silence,
        key=owned_key(key_name, body.idempotency_key or idempotency_key),
        owner=key_name,
        priority=body.priority,
    )
    if body.callback_url is not None:
        check_callback(farm, body.callback_url)
    if not limits.allows(body.priority):
        raise ApiError(
            403,
            f"this key's jobs are {limits.priority} at most: send priority {limits.priority!r}, or have "
            "the key's limits changed (ttsfarm keys limits)",
            "priority_not_allowed",
        )
    farm.quotas.admit(key_name, len(spec.text), limits)
    (job_id,) = farm.client.submit_many([spec])
    farm.quotas.taken(key_name, job_id, limits)
    if body.callback_url is not None:
        farm.callbacks.add(job_id, body.callback_url, key_name)
    response.headers["Location"] = f"/v1/jobs/{job_id}"
    return view(known_status(farm, job_id, key_name))


@router.get("/{job_id}", response_model=JobView)
def job_status(job_id: JobId, key_name: ApiKeyName, farm: FarmDep) -> JobView:
    """The job's state, progress, error and, once it succeeded, what it made."""
    return view(known_status(farm, job_id, key_name))


@router.get(
    "/{job_id}/audio",
    response_class=Response,
    responses={
        **AUDIO_RESPONSES,
        307: {"description": "Redirect to a presigned URL (with gateway_audio_redirect)"},
        206: {"description": "The byte range asked for"},
        409: {"description": "The job has no audio (yet)"},
        416: {"description": "The byte range lies past the end of the audio"},
    },
)
def job_audio(
    job_id: JobId,
    key_name: ApiKeyName,
    farm: FarmDep,
    range: Annotated[str | None, Header(max_length=100)] = None,  # the header's name
) -> Response:
    """A finished job's audio, whole or the one byte range a ``Range`` header asks for (206). Its
    SHA-256 is in the ETag and Repr-Digest headers."""
    status = known_status(farm, job_id, key_name)
    if status.result is None:
        raise ApiError(409, f"job {job_id} is {status.state}: it has no audio (yet)", "no_audio")
    return audio_response(farm, status.result, range_header=range)


@router.get(
    "/{job_id}/captions",
    response_class=Response,
    responses={
        200: {"content": {kind: {} for kind in CAPTION_FORMATS.values()}},
        409: {"description": "The job has no audio (yet)"},
    },
)
def job_captions(
    job_id: JobId,
    key_name: ApiKeyName,
    farm: FarmDep,
    caption_format: Annotated[
        str,
        Query(alias="format", description="srt, vtt or json (json holds segments and words alike)."),
    ] = "srt",
    granularity: Annotated[
        str, Query(description="segment (a sentence, or part of one) or word: what one SRT or VTT cue holds.")
    ] = "segment",
) -> Response:
    """A finished job's captions: each segment's or word's text and where it sits in the audio."""
    if caption_format not in CAPTION_FORMATS:
        raise ApiError(
            400, f"unknown caption format {caption_format[:20]!r}: use srt, vtt or json", "unknown_format"
        )
    if granularity not in GRANULARITIES:
        wrong = f"unknown granularity {granularity[:20]!r}: use segment or word"
        raise ApiError(400, wrong, "unknown_granularity")
    status = known_status(farm, job_id, key_name)
    if status.result is None:
        raise ApiError(409, f"job {job_id} is {status.state}: it has no audio (yet)", "no_audio")
    media_type = CAPTION_FORMATS[caption_format]
    charset = "" if caption_format == "json" else "; charset=utf-8"
    text = captions(status.result.segments, caption_format, granularity)
    return Response(text, media_type=media_type + charset)


@router.delete("/{job_id}", response_model=JobView)
def cancel_or_delete_job(job_id: JobId, key_name: ApiKeyName, farm: FarmDep) -> JobView:
    """Cancel a queued or running job: a queued one never runs, a running one stops and stores
    nothing. Delete a finished one: its audio and its record are removed (``deleted`` says so),
    and its id is unknown from then on."""
    status = known_status(farm, job_id, key_name)
    if not status.done:
        return view(farm.client.cancel(job_id))
    return view(farm.client.delete(job_id)).model_copy(update={"deleted": True})
