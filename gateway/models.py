"""Request and response bodies of the gateway, as the OpenAPI document describes them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

from ttsfarm.core.job_limits import DEFAULT_PRIORITY
from ttsfarm.core.jobs import (
    DEFAULT_FORMAT,
    DEFAULT_LOUDNESS,
    LOUDNESS_RANGE,
    MAX_TEXT_CHARS,
    SENTENCE_SILENCE_RANGE,
    JobStatus,
)


class JobCreate(BaseModel):
    """One text to speak into one audio file. Numbers must be JSON numbers: ``true`` or ``"1.5"``
    is refused, not read as 1 or 1.5 (``noise_scale: false`` would otherwise silently mean 0)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description=f"The text, at most {MAX_TEXT_CHARS:,} characters.")
    voice: str | None = Field(None, description="A voice name from GET /v1/voices; unset: the default.")
    speaker: StrictInt | None = Field(None, description="Speaker id of a multi-speaker voice.")
    length_scale: StrictFloat | None = Field(
        None, description="Speaking rate: above 1 slower, below 1 faster."
    )
    noise_scale: StrictFloat | None = Field(None, description="Generator noise, 0 to 2; 0 is deterministic.")
    noise_w: StrictFloat | None = Field(None, description="Phoneme duration noise, 0 to 2.")
    format: str = Field(DEFAULT_FORMAT, description="wav, flac, mp3 or ogg.")
    loudness: StrictFloat | None = Field(
        None,
        description=f"Integrated loudness in LUFS ({LOUDNESS_RANGE[0]:g} to {LOUDNESS_RANGE[1]:g}) the "
        "audio is mastered to, true peaks under -1 dBTP; unset: the voice's own level.",
    )
    sentence_silence: StrictFloat | None = Field(
        None,
        description=f"Seconds of silence after each sentence ({SENTENCE_SILENCE_RANGE[0]:g} to "
        f"{SENTENCE_SILENCE_RANGE[1]:g}), as piper's --sentence-silence; unset: 0.3 s after a sentence, "
        "0.6 s after a paragraph.",
    )
    priority: str = Field(
        DEFAULT_PRIORITY,
        description="bulk, or interactive (someone waits for it): a worker takes every interactive "
        "job that waits before any bulk one. A key may be held to bulk (GET /v1/keys/me).",
    )
    callback_url: str | None = Field(
        None,
        description="Posted the job (as GET /v1/jobs/{id} shows it) once it ends, signed with the "
        "key's callback secret (GET /v1/keys/me): see the X-Ttsfarm-Signature header.",
    )
    idempotency_key: str | None = Field(
        None,
        max_length=200,
        description="Submitting the same key again (with the same API key) returns the first job. "
        "The Idempotency-Key header does the same.",
    )


class Segment(BaseModel):
    text: str
    start: float
    end: float


class JobResultView(BaseModel):
    format: str
    sample_rate: int
    duration: float
    size: int
    sha256: str
    audio_url: str = Field(description="Where to GET the audio, on this gateway.")
    segments: list[Segment]
    loudness: float | None = Field(description="LUFS the audio was mastered to; null: the voice's own level.")


class JobView(BaseModel):
    """A job's state; storage locations stay inside the farm."""

    id: str
    state: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    progress: float
    segments_done: int
    segments_total: int
    audio_seconds: float
    error: str | None
    submitted_at: float | None
    finished_at: float | None
    result: JobResultView | None
    deleted: bool = Field(
        default=False,
        description="True in the answer to DELETE of a finished job: its audio and record are gone.",
    )

    @classmethod
    def of(cls, status: JobStatus, error: str | None) -> JobView:
        result = status.result
        view = None
        if result is not None:
            view = JobResultView(
                format=result.format,
                sample_rate=result.sample_rate,
                duration=result.duration,
                size=result.size,
                sha256=result.sha256,
                audio_url=f"/v1/jobs/{status.job_id}/audio",
                segments=[Segment(text=s.text, start=s.start, end=s.end) for s in result.segments],
                loudness=result.loudness,
            )
        return cls(
            id=status.job_id,
            state=status.state,  # type: ignore[arg-type]  # "unknown" is answered 404 before
            progress=status.progress,
            segments_done=status.segments_done,
            segments_total=status.segments_total,
            audio_seconds=status.audio_seconds,
            error=error,
            submitted_at=status.submitted_at,
            finished_at=status.finished_at,
            result=view,
            deleted=False,
        )


class VoiceView(BaseModel):
    name: str
    language: str
    sample_rate: int
    speakers: int
    default: bool


class VoiceList(BaseModel):
    voices: list[VoiceView]


class SpeechRequest(BaseModel):
    """OpenAI's ``POST /v1/audio/speech`` body. Fields OpenAI adds later are ignored."""

    model: str = Field(description="tts-1, tts-1-hd, gpt-4o-mini-tts or ttsfarm: all speak alike.")
    input: str = Field(description="The text; longer than the documented limit goes to POST /v1/jobs.")
    voice: str = Field(
        description="A voice from GET /v1/voices, or one of OpenAI's names (alloy, nova, ...), "
        "which speak with the farm's default voice."
    )
    response_format: str = Field(
        "mp3",
        description="pcm (16-bit mono at the voice's rate, streamed), wav, mp3, opus (in Ogg), aac "
        "(ADTS) or flac (also ogg: Vorbis).",
    )
    speed: StrictFloat = Field(1.0, ge=0.25, le=4.0, description="0.25 to 4; 1 is the voice's own pace.")
    instructions: str | None = Field(None, description="Accepted and ignored: Piper voices take none.")
    loudness: StrictFloat | None = Field(
        DEFAULT_LOUDNESS,
        description=f"LUFS the audio is mastered to, true peaks under -1 dBTP, as `ttsfarm synth` does "
        f"(default {DEFAULT_LOUDNESS:g}); null: the voice's own level. Streamed audio is at the voice's "
        "own level: mastering needs the whole of it.",
    )
    stream_format: str | None = Field(
        None,
        description="'audio': pcm, wav, mp3, opus and aac stream as they are made, unmastered (flac and "
        "ogg come whole); unset: pcm streams, other formats come whole and mastered; 'sse': "
        "server-sent events of base64 pcm (speech.audio.delta, then speech.audio.done).",
    )


class Model(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "ttsfarm"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]


class KeyView(BaseModel):
    name: str
    jobs_in_flight: int = Field(description="Jobs this key may have queued or running at once; 0: no limit.")
    chars_per_day: int = Field(description="Characters this key may submit a day (UTC); 0: no limit.")
    priority: str = Field(description="The highest priority this key's jobs get: interactive or bulk.")
    callback_secret: str = Field(
        description="Signs the callbacks of this key's jobs: X-Ttsfarm-Signature is sha256= and the "
        "hex HMAC-SHA256 of '<X-Ttsfarm-Timestamp>.<body>' with it."
    )


class Health(BaseModel):
    status: str
    workers: int | None = None
