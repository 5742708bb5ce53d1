"""What every request of one gateway process shares: the farm's client, keys, limits, voices."""

from __future__ import annotations

import logging
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
from ttsfarm.core.errors import SettingsError
from ttsfarm.core.settings import Settings
from ttsfarm.core.voices import Voice

log = logging.getLogger(__name__)

READY_CACHE_SECONDS: Final = 2.0
"""/readyz answers from its last look for this long: a probe must not flood the workers with pings."""
WORKER_PING_SECONDS: Final = 1.0
NONE_SEEN_CACHE_SECONDS: Final = 0.5
"""A look that saw no worker is answered this long: requests while none is up do not each wait
for a ping, and a worker that has just come up is seen half a second later at most."""


class WorkerCount:
    """How many workers answer a ping, looked up at most every READY_CACHE_SECONDS while some do.

    A ping waits WORKER_PING_SECONDS for the answers, so a request never waits for it while
    workers were seen: an old count is answered and a new one taken in the background. With no
    count yet, or none seen more than NONE_SEEN_CACHE_SECONDS ago, the caller waits for a ping,
    one at a time and shared by those who asked while it was out: a worker that has just come up
    is seen at once (it answers pings from the moment it says ready, ``worker/listening.py``)."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._seen: tuple[float, int] | None = None
        self._refreshing = False

    def __call__(self) -> int:
        asked = time.monotonic()
        with self._lock:
            seen = self._seen
            if seen is not None and seen[1] > 0:
                if time.monotonic() - seen[0] >= READY_CACHE_SECONDS and not self._refreshing:
                    self._refreshing = True
                    threading.Thread(target=self._refresh, name="ttsfarm-worker-count", daemon=True).start()
                return seen[1]
            if seen is not None and (seen[0] >= asked or asked - seen[0] < NONE_SEEN_CACHE_SECONDS):
                return seen[1]  # none seen just now, or by a ping answered while this caller waited
            return self._count()

    def _count(self) -> int:
        self._client.ping()
        count = len(self._client.workers(timeout=WORKER_PING_SECONDS))
        self._seen = (time.monotonic(), count)  # from the answer: the ping's wait is not its age
        return count

    def _refresh(self) -> None:
        try:
            self._client.ping()
            count = len(self._client.workers(timeout=WORKER_PING_SECONDS))
        except Exception:  # Redis gone: the next caller pings itself and sees why
            log.warning("looking for workers failed", exc_info=True)
            with self._lock:
                self._seen, self._refreshing = None, False
            return
        with self._lock:
            self._seen, self._refreshing = (time.monotonic(), count), False


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
