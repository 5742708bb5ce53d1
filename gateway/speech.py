"""OpenAI's speech API (``POST /v1/audio/speech``), the models list and the voices.

A speech request is a job like any other: it is submitted through the same Client, waited for
with the Client's own wait loop (on a thread of a limiter of its own, so waiting requests never
take the threads that serve the rest), and its audio is streamed back from storage.

No request leaves work for nobody: with no worker answering it is refused at once (503), a
client that hangs up before its audio is ready has its job cancelled, and a retry that sends the
same ``Idempotency-Key`` header gets the same job.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Final

import anyio
from fastapi import APIRouter, Header, Request, Response
from starlette.concurrency import run_in_threadpool

from gateway.audio import AUDIO_RESPONSES, audio_response, encoded_response
from gateway.auth import ApiKeyName, CallerLimits, FarmDep
from gateway.errors import NO_RETRY, ApiError
from gateway.farm import Farm
from gateway.jobs import owned_key
from gateway.keys import KeyLimits
from gateway.models import Model, ModelList, SpeechRequest, VoiceList, VoiceView
from gateway.streaming import STREAMED_FORMATS, streamed_speech
from ttsfarm.core.errors import InvalidInput, WaitTimeout
from ttsfarm.core.jobs import AUDIO_FORMATS, JobResult, check_text

MODELS: Final = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "ttsfarm")
"""Model names the speech endpoint takes; all speak with the farm's voices alike."""
DATED_MODEL: Final = re.compile(r"(tts-1|tts-1-hd|gpt-4o-mini-tts)-(\d{4}|\d{4}-\d{2}-\d{2})")
"""OpenAI's dated snapshots of those models (``tts-1-1106``, ``gpt-4o-mini-tts-2025-03-20``),
which clients pin: taken as the model they date."""


def known_model(name: str) -> bool:
    return name in MODELS or DATED_MODEL.fullmatch(name) is not None


OPENAI_VOICES: Final = frozenset(
    {
        "alloy",
        "ash",
        "ballad",
        "cedar",
        "coral",
        "echo",
        "fable",
        "marin",
        "nova",
        "onyx",
        "sage",
        "shimmer",
        "verse",
    }
)
"""OpenAI's voice names: clients send them by default, so they speak with the voice
``gateway_voices`` maps them to, else the farm's default voice."""
"""OpenAI's response formats the farm encodes (ogg is ttsfarm's own, Vorbis)."""

DEFAULT_SAMPLE_RATE: Final = 22050
"""The rate a streamed answer states when the farm's voice list lacks the voice (it never should)."""
NO_WORKER_RETRY: Final = 5
"""Seconds a speech request refused for want of a worker is told to wait (``Retry-After``)."""
CLIENT_GONE: Final = 499
"""The status logged for a speech request whose client hung up (nginx's convention)."""
DISCONNECT_POLL_SECONDS: Final = 0.25
"""How often a waiting speech request checks that its client is still there."""

router = APIRouter(prefix="/v1", tags=["openai"])


@dataclass(frozen=True)
class Delivery:
    """How a speech request's audio is made and sent."""

    job_format: str
    """The format the job stores."""
    streamed: str | None = None
    """Sent as it is made: pcm, wav, mp3, opus, aac or sse; ``None``: sent once the job is done."""
    encoded: str | None = None
    """The stored audio encoded on its way out (opus, aac: formats a job does not store)."""


def _check(body: SpeechRequest, max_chars: int) -> Delivery:
    """How the audio of ``body`` is made and sent; an ApiError saying what to change otherwise."""
    if not known_model(body.model):
        raise ApiError(400, f"unknown model {body.model!r}: use one of {', '.join(MODELS)}", "unknown_model")
    if body.stream_format not in (None, "audio", "sse"):
        raise ApiError(
            400,
            f"stream_format {body.stream_format!r} is not supported: send 'audio' or 'sse'",
            "unsupported_stream",
        )
    audio_format = body.response_format
    if audio_format not in AUDIO_FORMATS and audio_format not in STREAMED_FORMATS:
        raise ApiError(
            400,
            f"response_format {body.response_format!r} is not supported: use pcm, wav, mp3, opus, aac "
            "or flac (or ogg)",
            "unsupported_format",
        )
    if body.stream_format == "sse" and audio_format not in ("pcm", "wav"):
        raise ApiError(
            400, "server-sent events carry 16-bit PCM: set response_format to pcm", "unsupported_stream"
        )
    if len(body.input) > max_chars:
        raise ApiError(
            413,
            f"input has {len(body.input):,} characters, over the {max_chars:,} this endpoint speaks in "
            "one request: submit longer texts to POST /v1/jobs and fetch the audio when it is done",
            "input_too_long",
        )
    try:
        check_text(body.input)
    except InvalidInput as error:
        raise ApiError(400, str(error).replace("the text", "input", 1), "invalid_text") from None
    if body.stream_format == "sse":
        return Delivery("wav", "sse")
    if audio_format == "pcm" or (audio_format in STREAMED_FORMATS and body.stream_format == "audio"):
        return Delivery("wav", audio_format)
    if audio_format not in AUDIO_FORMATS:
        return Delivery("wav", encoded=audio_format)
    return Delivery(audio_format)


@router.post(
    "/audio/speech",
    response_class=Response,
    responses={
        **AUDIO_RESPONSES,
        413: {"description": "Input over the speech limit: use POST /v1/jobs"},
        503: {
            "description": "No worker up, too many speech requests waiting, the queue full, or the farm "
            "unreachable (Retry-After)"
        },
        504: {"description": "The job did not finish in time; the message names it"},
    },
)
async def speech(
    body: SpeechRequest,
    key_name: ApiKeyName,
    limits: CallerLimits,
    farm: FarmDep,
    request: Request,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> Response:
    """Speak a short text and answer with its audio (OpenAI's ``audio.speech.create``). A retry
    with the same ``Idempotency-Key`` header gets the same job. ``pcm``, and ``wav``, ``mp3``,
    ``opus`` and ``aac`` with ``stream_format="audio"``, stream as the audio is made; so does
    ``stream_format="sse"``."""
    settings = farm.settings
    delivery = _check(body, settings.gateway_speech_max_chars)
    streamed = delivery.streamed
    voice_name = farm.voice_map.get(body.voice) or (
        settings.voice if body.voice in OPENAI_VOICES else farm.voice(body.voice)
    )
    voice = farm.voices.get(voice_name)
    pace = voice.length_scale if voice is not None else 1.0
    length_scale = None if body.speed == 1.0 else pace / body.speed
    if farm.waits.available_tokens < 1:
        raise ApiError(
            503,
            f"this gateway is waiting on {farm.waits.total_tokens:.0f} speech requests already: "
            "retry shortly, or submit to POST /v1/jobs",
            "busy",
            {"Retry-After": "1"},
        )
    if await run_in_threadpool(farm.workers) < 1:
        retry = {"Retry-After": str(NO_WORKER_RETRY)}
        raise ApiError(503, "no worker is up to speak it: retry shortly", "no_workers", retry)
    submit = partial(
        farm.client.submit,
        body.input,
        voice_name,
        delivery.job_format,
        length_scale=length_scale,
        key=owned_key(key_name, idempotency_key),
        owner=key_name,
        stream=streamed is not None,
        loudness=None if streamed is not None else body.loudness,
        priority=limits.job_priority("interactive"),
    )
    if streamed is not None:
        job_id = await _submitted(farm, key_name, limits, submit, len(body.input))
        rate = voice.sample_rate if voice is not None else DEFAULT_SAMPLE_RATE
        return streamed_speech(farm, job_id, streamed, rate)
    try:
        with farm.quotas.speech_wait(key_name):  # before the job: a refusal leaves none behind
            job_id = await _submitted(farm, key_name, limits, submit, len(body.input))
            result = await _result_unless_gone(farm, request, job_id)
    except WaitTimeout:
        raise ApiError(
            504,
            f"job {job_id} did not finish within {settings.gateway_speech_timeout_seconds:g} s: follow it "
            f"at GET /v1/jobs/{job_id} and fetch GET /v1/jobs/{job_id}/audio when it is done",
            "timeout",
            NO_RETRY,  # the job is still there: a retry would speak it twice
        ) from None
    if result is None:  # the client went away: nobody reads this answer
        return Response(status_code=CLIENT_GONE)
    answer: Response
    if delivery.encoded is not None:
        answer = await run_in_threadpool(encoded_response, farm, result, delivery.encoded)
    else:
        answer = await run_in_threadpool(audio_response, farm, result, False)
    answer.headers["X-Job-Id"] = job_id
    return answer


async def _submitted(
    farm: Farm, key_name: str, limits: KeyLimits, submit: Callable[[], str], characters: int
) -> str:
    """Submit a speech job within the key's quotas (``gateway.quotas``); its id."""
    await run_in_threadpool(farm.quotas.admit, key_name, characters, limits)
    job_id = await run_in_threadpool(submit)
    await run_in_threadpool(farm.quotas.taken, key_name, job_id, limits)
    return job_id


async def _result_unless_gone(farm: Farm, request: Request, job_id: str) -> JobResult | None:
    """The job's result once it is done; ``None`` (and the job cancelled) if the client hung up
    first, so an abandoned request leaves no work behind."""
    found: list[JobResult] = []
    failed: list[Exception] = []

    async def wait() -> None:
        call = partial(farm.client.wait, job_id, farm.settings.gateway_speech_timeout_seconds)
        try:
            found.append(await anyio.to_thread.run_sync(call, limiter=farm.waits, abandon_on_cancel=True))
        except Exception as error:  # raised below, outside the task group (not as a group)
            failed.append(error)
        group.cancel_scope.cancel()

    async def watch() -> None:
        while not await request.is_disconnected():
            await anyio.sleep(DISCONNECT_POLL_SECONDS)
        await run_in_threadpool(farm.client.cancel, job_id)
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(wait)
        group.start_soon(watch)
    if failed:
        raise failed[0]
    return found[0] if found else None


@router.get("/models", response_model=ModelList)
def models(key_name: ApiKeyName) -> ModelList:
    """The model names ``POST /v1/audio/speech`` takes (OpenAI's models list)."""
    return ModelList(data=[Model(id=name) for name in MODELS])


@router.get("/models/{model_id}", response_model=Model)
def model(model_id: str, key_name: ApiKeyName) -> Model:
    """One model by name, dated snapshots included (OpenAI's ``models.retrieve``)."""
    if not known_model(model_id):
        raise ApiError(
            404, f"unknown model {model_id[:80]!r}: use one of {', '.join(MODELS)}", "model_not_found"
        )
    return Model(id=model_id)


@router.get("/voices", response_model=VoiceList, tags=["jobs"])
def voices(key_name: ApiKeyName, farm: FarmDep) -> VoiceList:
    """The voices jobs may name."""
    return VoiceList(
        voices=[
            VoiceView(
                name=voice.name,
                language=voice.language,
                sample_rate=voice.sample_rate,
                speakers=voice.num_speakers,
                default=voice.name == farm.settings.voice,
            )
            for voice in farm.voices.values()
        ]
    )
