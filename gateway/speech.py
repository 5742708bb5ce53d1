"""OpenAI's speech API (``POST /v1/audio/speech``), the models list and the voices.

A speech request is a job like any other: it is submitted through the same Client, waited for
with the Client's own wait loop (on a thread of a limiter of its own, so waiting requests never
take the threads that serve the rest), and its audio is streamed back from storage.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Final

import anyio
from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from gateway.audio import AUDIO_RESPONSES, audio_response
from gateway.auth import ApiKeyName, FarmDep
from gateway.errors import ApiError
from gateway.models import Model, ModelList, SpeechRequest, VoiceList, VoiceView
from ttsfarm.errors import InvalidInput, WaitTimeout
from ttsfarm.jobs import AUDIO_FORMATS, check_unicode

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
"""OpenAI's voice names: clients send them by default, so they speak with the farm's default voice."""
"""OpenAI's response formats the farm encodes (ogg is ttsfarm's own, Vorbis)."""

router = APIRouter(prefix="/v1", tags=["openai"])


def _check(body: SpeechRequest, max_chars: int) -> str:
    """The ttsfarm format for the request, or an ApiError saying what to change."""
    if not known_model(body.model):
        raise ApiError(400, f"unknown model {body.model!r}: use one of {', '.join(MODELS)}", "unknown_model")
    if body.stream_format not in (None, "audio"):
        raise ApiError(
            400,
            f"stream_format {body.stream_format!r} is not supported: leave it out, or send 'audio'",
            "unsupported_stream",
        )
    audio_format = body.response_format
    if audio_format not in AUDIO_FORMATS:
        raise ApiError(
            400,
            f"response_format {body.response_format!r} is not supported: use mp3, wav or flac (or ogg)",
            "unsupported_format",
        )
    if not body.input.strip():
        raise ApiError(400, "input is empty: give some words to speak", "invalid_text")
    try:
        check_unicode(body.input, "input")
    except InvalidInput as error:
        raise ApiError(400, str(error), "invalid_text") from None
    if len(body.input) > max_chars:
        raise ApiError(
            413,
            f"input has {len(body.input):,} characters, over the {max_chars:,} this endpoint speaks in "
            "one request: submit longer texts to POST /v1/jobs and fetch the audio when it is done",
            "input_too_long",
        )
    return audio_format


@router.post(
    "/audio/speech",
    response_class=Response,
    responses={
        **AUDIO_RESPONSES,
        413: {"description": "Input over the speech limit: use POST /v1/jobs"},
        503: {"description": "Too many speech requests waiting, the queue full, or the farm unreachable"},
        504: {"description": "The job did not finish in time; the message names it"},
    },
)
async def speech(body: SpeechRequest, key_name: ApiKeyName, farm: FarmDep) -> Response:
    """Speak a short text and answer with its audio (OpenAI's ``audio.speech.create``)."""
    settings = farm.settings
    audio_format = _check(body, settings.gateway_speech_max_chars)
    voice_name = settings.voice if body.voice in OPENAI_VOICES else farm.voice(body.voice)
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
    job_id = await run_in_threadpool(
        partial(farm.client.submit, body.input, voice_name, audio_format, length_scale=length_scale)
    )
    wait = partial(farm.client.wait, job_id, settings.gateway_speech_timeout_seconds)
    try:
        result = await anyio.to_thread.run_sync(wait, limiter=farm.waits)
    except WaitTimeout:
        raise ApiError(
            504,
            f"job {job_id} did not finish within {settings.gateway_speech_timeout_seconds:g} s: follow it "
            f"at GET /v1/jobs/{job_id} and fetch GET /v1/jobs/{job_id}/audio when it is done",
            "timeout",
        ) from None
    return await run_in_threadpool(audio_response, farm, result, False)


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
