"""Jobs: the request, its result, its states, and the one loop that waits for a job to end.

Requests and results are frozen dataclasses that travel as JSON (never pickle). A job's
:class:`JobStatus` is read from wherever its record lives (the farm's registry, or storage for a
job run in-process); :func:`wait_until_done` polls any such source, and every waiter (``Client.wait``,
``ttsfarm status --wait``, the audiobook's farm renderer) uses it.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Final, Literal

from ttsfarm.core.errors import Cancelled, JobFailed, JobNotFound, WaitTimeout
from ttsfarm.core.job_limits import (
    AUDIO_FORMATS,
    CONTENT_TYPES,
    DEFAULT_FORMAT,
    DEFAULT_LOUDNESS,
    DEFAULT_VOICE,
    LENGTH_SCALE_RANGE,
    LOUDNESS_RANGE,
    MAX_TEXT_CHARS,
    NOISE_RANGE,
    SCALES,
    SENTENCE_SILENCE_RANGE,
    SUMMARY_WORDS_CHARS,
    check_format,
    check_key,
    check_loudness,
    check_options,
    check_sentence_silence,
    check_text,
    check_unicode,
    is_number,
)
from ttsfarm.core.timings import SegmentTiming, WordTiming

__all__ = [  # what a job accepts (``ttsfarm.core.job_limits``) is part of the job's API
    "AUDIO_FORMATS",
    "CONTENT_TYPES",
    "DEFAULT_FORMAT",
    "DEFAULT_LOUDNESS",
    "DEFAULT_VOICE",
    "LENGTH_SCALE_RANGE",
    "LOUDNESS_RANGE",
    "MAX_TEXT_CHARS",
    "NOISE_RANGE",
    "POLL_SECONDS",
    "SCALES",
    "SENTENCE_SILENCE_RANGE",
    "SUBMITTED_AT",
    "SUMMARY_WORDS_CHARS",
    "TERMINAL_STATES",
    "EncodedPiece",
    "JobRequest",
    "JobResult",
    "JobState",
    "JobStatus",
    "SegmentTiming",
    "SynthesisOptions",
    "WordTiming",
    "audio_key",
    "check_format",
    "check_key",
    "check_loudness",
    "check_options",
    "check_sentence_silence",
    "check_text",
    "check_unicode",
    "is_number",
    "new_job_id",
    "result_key",
    "wait_until_done",
]

SUBMITTED_AT: Final = "submitted_at"
"""Message field: the producer's clock (epoch seconds) when it queued the job, for queue-wait metrics."""


def new_job_id() -> str:
    """A fresh, unique job id."""
    return uuid.uuid4().hex


def audio_key(job_id: str, audio_format: str) -> str:
    """Storage key of a job's audio: from the job id only, never from user text."""
    return f"{job_id}.{audio_format}"


def result_key(job_id: str) -> str:
    """Storage key of a finished job's result, stored beside its audio."""
    return f"{job_id}.json"


@dataclass(frozen=True)
class SynthesisOptions:
    """How to speak: the voice and its settings. Items that share these can share a batch."""

    voice: str = DEFAULT_VOICE
    """Voice name (see ``ttsfarm voices``) or path to a Piper ``.onnx`` file."""

    speaker: int | None = None
    """Speaker id for multi-speaker voices; ``None`` means the voice's default."""

    length_scale: float | None = None
    """Speaking rate: above 1 is slower, below 1 faster; ``None`` takes the voice's value."""

    noise_scale: float | None = None
    """Generator noise; ``None`` takes the voice's value, 0 makes output deterministic."""

    noise_w: float | None = None
    """Phoneme duration noise; ``None`` takes the voice's value."""

    def __post_init__(self) -> None:
        check_options(self)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SynthesisOptions:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class JobRequest:
    """One text to turn into one audio file."""

    text: str
    options: SynthesisOptions = field(default_factory=SynthesisOptions)
    format: str = DEFAULT_FORMAT
    job_id: str = field(default_factory=new_job_id)
    loudness: float | None = None
    """Integrated loudness (LUFS) the audio is mastered to, true peaks under -1 dBTP, as
    ``ttsfarm synth`` does; ``None`` keeps the voice's own level (joe speaks at about -24 to -27
    LUFS, depending on the text)."""
    sentence_silence: float | None = None
    """Seconds of silence after each sentence, paragraph ends included (none after the last), as
    piper's ``--sentence-silence``; ``None`` keeps the pauses of ``ttsfarm.core.breaks`` (0.3 s after a
    sentence, 0.6 s after a paragraph)."""

    stream: bool = False
    """Publish the audio as it is made (``JobRegistry.publish_audio``), for a client listening
    to it (the gateway's streamed speech), as well as storing the whole file."""

    def __post_init__(self) -> None:
        check_text(self.text)
        object.__setattr__(self, "format", check_format(self.format))
        object.__setattr__(self, "loudness", check_loudness(self.loudness))
        object.__setattr__(self, "sentence_silence", check_sentence_silence(self.sentence_silence))

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "text": self.text,
            "format": self.format,
            "options": self.options.to_dict(),
            "loudness": self.loudness,
            "sentence_silence": self.sentence_silence,
            **({"stream": True} if self.stream else {}),
        }

    def summary(self) -> str:
        """One short line for monitors (Flower shows it as the task's arguments): job id,
        voice, format, length and the first words, never the whole text."""
        words = " ".join(self.text.split())
        opening = (
            words
            if len(words) <= SUMMARY_WORDS_CHARS
            else words[:SUMMARY_WORDS_CHARS].rsplit(" ", 1)[0] + "..."
        )
        speaker = f" speaker {self.options.speaker}," if self.options.speaker is not None else ""
        loudness = f" {self.loudness:g} LUFS," if self.loudness is not None else ""
        return (
            f"job {self.job_id}, voice {self.options.voice},{speaker} {self.format},{loudness} "
            f"{len(self.text):,} chars: {opening!r}"
        )

    def fingerprint(self) -> str:
        """A hash of what decides the audio (text, voice and settings, format, loudness, sentence
        silence), not the id: two requests with one fingerprint make the same file. Requests
        without a loudness or a sentence silence hash as they did before jobs took them."""
        identity: dict[str, Any] = {
            "text": self.text,
            "options": self.options.to_dict(),
            "format": self.format,
        }
        if self.loudness is not None:
            identity["loudness"] = self.loudness
        if self.sentence_silence is not None:
            identity["sentence_silence"] = self.sentence_silence
        blob = json.dumps(identity, sort_keys=True, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobRequest:
        return cls(
            text=data["text"],
            options=SynthesisOptions.from_dict(data.get("options", {})),
            format=data.get("format", DEFAULT_FORMAT),
            job_id=data["job_id"],
            loudness=data.get("loudness"),
            sentence_silence=data.get("sentence_silence"),
            stream=bool(data.get("stream", False)),
        )


@dataclass(frozen=True)
class EncodedPiece:
    """A finished chapter in one lossy format, made to be joined with its neighbours by stream
    copy (``ttsfarm.core.encoding``)."""

    codec: str
    location: str
    size: int
    sha256: str
    loudness: float
    """Integrated loudness of the decoded piece, LUFS."""
    true_peak: float
    """dBTP of the decoded piece."""
    headroom: float = 0.0
    """dB the chapter's peaks were limited lower for this piece, because the encoder raised a
    peak over the ceiling (0 mostly)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncodedPiece:
        return cls(
            codec=str(data["codec"]),
            location=str(data["location"]),
            size=int(data["size"]),
            sha256=str(data["sha256"]),
            loudness=float(data["loudness"]),
            true_peak=float(data["true_peak"]),
            headroom=float(data.get("headroom", 0.0)),
        )


@dataclass(frozen=True)
class JobResult:
    """What a finished job produced and where it is."""

    job_id: str
    location: str
    """Where the audio is: a local path, or an ``s3://bucket/key`` URI."""
    url: str | None
    """A URL to fetch the audio (presigned for S3); ``None`` for local files."""
    format: str
    sample_rate: int
    duration: float
    size: int
    sha256: str
    segments: tuple[SegmentTiming, ...]
    loudness: float | None = None
    """The integrated loudness (LUFS) the audio was mastered to; ``None``: the voice's own level
    (and every result stored before jobs took a loudness)."""
    measured_loudness: float | None = None
    """Integrated loudness (LUFS) measured on the stored audio, where it was measured (a
    finished chapter)."""
    true_peak: float | None = None
    """dBTP measured on the stored audio, where it was measured (a finished chapter)."""
    pieces: tuple[EncodedPiece, ...] = ()
    """A finished chapter's lossy pieces, made to be joined into the book's files."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds the job spent in each of its steps, where it reports them (a finish job: fetch,
    join, master, encode, store)."""

    def to_dict(self) -> dict[str, Any]:
        # Not asdict(): it would copy every word of every segment, deeply, once more.
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["segments"] = [s.to_dict() for s in self.segments]
        data["pieces"] = [p.to_dict() for p in self.pieces]
        data["timings"] = dict(self.timings)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobResult:
        return cls(
            job_id=data["job_id"],
            location=data["location"],
            url=data.get("url"),
            format=data["format"],
            sample_rate=int(data["sample_rate"]),
            duration=float(data["duration"]),
            size=int(data["size"]),
            sha256=data["sha256"],
            segments=tuple(SegmentTiming.from_dict(s) for s in data["segments"]),
            loudness=data.get("loudness"),
            measured_loudness=data.get("measured_loudness"),
            true_peak=data.get("true_peak"),
            pieces=tuple(EncodedPiece.from_dict(p) for p in data.get("pieces", ())),
            timings={str(k): float(v) for k, v in data.get("timings", {}).items()},
        )


JobState = Literal["queued", "running", "succeeded", "failed", "cancelled", "unknown"]
TERMINAL_STATES: Final = frozenset({"succeeded", "failed", "cancelled"})
POLL_SECONDS: Final = 0.25
"""How often a waiter reads a job's status."""


@dataclass(frozen=True)
class JobStatus:
    """What a user can know about a job at one moment."""

    job_id: str
    state: JobState
    progress: float = 0.0
    """0..1, the share of the job's segments done."""
    segments_done: int = 0
    segments_total: int = 0
    audio_seconds: float = 0.0
    error: str | None = None
    result: JobResult | None = None
    submitted_at: float | None = None
    started_at: float | None = None
    """When a worker last started it (its queue wait is ``started_at - submitted_at``)."""
    finished_at: float | None = None
    attempts: int = 0
    """How often a worker started it (more than once after a retry or a redelivery)."""
    cancel_requested: bool = False
    owner: str | None = None
    """Who the job belongs to (the gateway's API key that made it); ``None``: no one."""

    @property
    def done(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def settled(self) -> bool:
        """Done, and with its result where it succeeded: what a waiter can act on. (A worker
        records the success and the result together; an older record may lack the result.)"""
        return self.done and (self.state != "succeeded" or self.result is not None)

    def outcome(self) -> JobResult:
        """The result of a finished job; :class:`JobFailed`, :class:`Cancelled` or
        :class:`JobNotFound` for one that ended otherwise or was never submitted."""
        if self.state == "unknown":
            raise JobNotFound(f"unknown job id {self.job_id}")
        if self.state == "failed":
            raise JobFailed(f"job {self.job_id} failed: {self.error}")
        if self.state == "cancelled":
            raise Cancelled(f"job {self.job_id} was cancelled")
        if self.state != "succeeded" or self.result is None:
            raise ValueError(f"job {self.job_id} is {self.state}: it has no outcome yet")
        return self.result

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "result"}
        data["result"] = self.result.to_dict() if self.result else None
        return data


def wait_until_done(
    job_id: str,
    status: Callable[[str], JobStatus],
    timeout: float | None = None,
    poll: float = POLL_SECONDS,
    on_status: Callable[[JobStatus], None] | None = None,
) -> JobStatus:
    """Read ``status(job_id)`` every ``poll`` seconds until the job is done; its last status
    (``.outcome()`` gives the result or raises). ``on_status`` sees every status read (progress
    bars; it may raise to stop waiting). :class:`JobNotFound` for a job never submitted,
    :class:`WaitTimeout` after ``timeout`` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        current = status(job_id)
        if current.state == "unknown":
            raise JobNotFound(f"unknown job id {job_id}")
        if on_status is not None:
            on_status(current)
        if current.settled:
            return current
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeout(f"job {job_id} is still {current.state} after {timeout} s")
        time.sleep(poll)
