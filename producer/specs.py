"""What a producer queues: a job as a caller describes it, and what every queued request is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ttsfarm.core.job_limits import DEFAULT_PRIORITY


class Queueable(Protocol):
    """A job request as the client sends it: synthesis (``JobRequest``) or finishing."""

    @property
    def job_id(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...
    def summary(self) -> str: ...
    def fingerprint(self) -> str: ...


@dataclass(frozen=True)
class JobSpec:
    """One job for :meth:`Client.submit_many`."""

    text: str
    voice: str | None = None
    speaker: int | None = None
    length_scale: float | None = None
    format: str = "wav"
    key: str | None = None
    noise_scale: float | None = None
    noise_w: float | None = None
    loudness: float | None = None
    """LUFS to master the audio to (true peaks under -1 dBTP); ``None``: the voice's own level."""
    sentence_silence: float | None = None
    """Seconds of silence after each sentence (0 to 2, as piper's ``--sentence-silence``);
    ``None``: ttsfarm's own pauses."""
    owner: str | None = None
    """Who the job belongs to, kept in its record (the gateway's API key name); ``None``: no one."""
    stream: bool = False
    """Publish the audio as it is made, for :meth:`Client.listen` (the whole file is stored too)."""
    priority: str = DEFAULT_PRIORITY
    """``interactive`` (someone waits for it: taken before every bulk job that waits) or ``bulk``."""
