"""What every request of one gateway process shares: the farm's client, keys, limits, voices."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Final

import anyio
from starlette.requests import Request

from gateway.callbacks import CallbackSender
from gateway.errors import ApiError
from gateway.keys import KeyStore
from gateway.limits import RateLimiter
from gateway.quotas import Quotas
from producer.client import Client
from ttsfarm.errors import SettingsError
from ttsfarm.settings import Settings
from ttsfarm.voices import Voice

READY_CACHE_SECONDS: Final = 2.0
"""/readyz answers from its last look for this long: a probe must not flood the workers with pings."""
WORKER_PING_SECONDS: Final = 1.0


class WorkerCount:
    """How many workers answer a ping, looked up at most every READY_CACHE_SECONDS."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._seen: tuple[float, int] | None = None

    def __call__(self) -> int:
        with self._lock:
            if self._seen is None or time.monotonic() - self._seen[0] >= READY_CACHE_SECONDS:
                self._client.ping()
                self._seen = (time.monotonic(), len(self._client.workers(timeout=WORKER_PING_SECONDS)))
            return self._seen[1]


@dataclass(frozen=True)
class Farm:
    """Built once per process when the app starts (never at import), from the settings given."""

    settings: Settings
    client: Client
    keys: KeyStore
    limiter: RateLimiter
    voices: dict[str, Voice]
    """Voices a request may name: those the farm knows by name. Never a path: a client must not
    make the workers open files of its choosing."""
    waits: anyio.CapacityLimiter
    """Threads that wait on speech jobs, apart from those that serve everything else."""
    workers: WorkerCount
    failures: RateLimiter
    """Wrong keys per client address (``FAILED_KEYS_PER_MINUTE``)."""
    probes: anyio.CapacityLimiter
    """The one thread health probes look for workers on: probes, however many, never take the
    threads that serve the API."""
    callbacks: CallbackSender
    """Posts each job's callback once it ended (``gateway.callbacks``)."""
    quotas: Quotas
    """What one key may hold of what all keys share (``gateway.quotas``)."""
    voice_map: dict[str, str]
    """OpenAI's voice names, as the speech endpoint takes them, to the farm's voices
    (``gateway_voices``)."""

    def voice(self, name: str | None, speaker: int | None = None) -> str:
        """The voice a request names (the default if none), once it is one the farm knows by name
        and has ``speaker``; :class:`ApiError` 400 otherwise."""
        name = name or self.settings.voice
        voice = self.voices.get(name)
        if voice is None and name != self.settings.voice:
            known = ", ".join(self.voices) or "none"
            raise ApiError(
                400, f"unknown voice {name!r}: use one of {known} (GET /v1/voices)", "unknown_voice"
            )
        if voice is not None and speaker is not None:
            voice.speaker_id(speaker)  # VoiceNotFound (400) for a speaker the voice lacks
        return name


def voice_map(text: str, voices: dict[str, Voice], default: str) -> dict[str, str]:
    """``gateway_voices`` (``alloy=joe,nova=amy``) read; :class:`SettingsError` saying what to
    fix where it names no voice of the farm."""
    mapped = {}
    for pair in filter(None, (part.strip() for part in text.split(","))):
        name, _, voice = (part.strip() for part in pair.partition("="))
        if not name or not voice:
            raise SettingsError(
                f"TTSFARM_GATEWAY_VOICES takes name=voice pairs such as alloy=joe, not {pair!r}"
            )
        if voice not in voices and voice != default:
            known = ", ".join(voices) or "none"
            raise SettingsError(
                f"TTSFARM_GATEWAY_VOICES maps {name!r} to {voice!r}, not a voice of the farm ({known})"
            )
        mapped[name] = voice
    return mapped


def get_farm(request: Request) -> Farm:
    farm = request.app.state.farm
    assert isinstance(farm, Farm)
    return farm
