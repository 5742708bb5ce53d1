"""What one API key may hold of what every key shares: jobs in flight, characters a day, and the
speech requests one gateway process waits on. Kept in the farm's Redis (but the speech waits,
which are this process's), so the quotas hold across any number of gateways.

Layout in Redis::

    ttsfarm:gateway:inflight:<key>      set     ids of the key's jobs not seen finished yet
    ttsfarm:gateway:chars:<key>:<day>   string  characters submitted that day (UTC)
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from gateway.errors import ApiError
from gateway.keys import KeyLimits
from ttsfarm.core.jobs import TERMINAL_STATES
from ttsfarm.farm.registry import KEY_PREFIX, connect, reach

INFLIGHT_PREFIX: Final = f"{KEY_PREFIX}gateway:inflight:"
CHARS_PREFIX: Final = f"{KEY_PREFIX}gateway:chars:"
DAY_SECONDS: Final = 24 * 3600
JOB_RECORD_PREFIX: Final = f"{KEY_PREFIX}job:"


class Quotas:
    """Checks and counts one key's share; a limit of 0 is no limit. A key's record may hold
    limits of its own (:class:`gateway.keys.KeyLimits`), in place of these."""

    def __init__(
        self,
        url: str,
        jobs_in_flight: int,
        chars_per_day: int,
        speech_waits: int,
        tls: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        self.jobs_in_flight, self.chars_per_day = jobs_in_flight, chars_per_day
        self.speech_waits = speech_waits
        self._redis = connect(url, tls)
        self._waiting: Counter[str] = Counter()
        self._lock = threading.Lock()

    def admit(self, key_name: str, characters: int, limits: KeyLimits | None = None) -> None:
        """Count a job of ``characters`` for ``key_name``, or raise :class:`ApiError` 429 saying
        which quota it would pass and when to retry."""
        jobs_in_flight, chars_per_day = self.limits_of(limits)
        if jobs_in_flight > 0:
            held = self._in_flight(key_name)
            if held >= jobs_in_flight:
                raise ApiError(
                    429,
                    f"this key has {held} jobs queued or running, its limit: wait for some to finish",
                    "too_many_jobs",
                    {"Retry-After": "5"},
                )
        if chars_per_day > 0:
            day = int(time.time() // DAY_SECONDS)
            counter = f"{CHARS_PREFIX}{key_name}:{day}"
            pipe = self._redis.pipeline()
            pipe.incrby(counter, characters)
            pipe.expire(counter, 2 * DAY_SECONDS)
            total, _ = reach(self.url, pipe.execute)
            if int(total) > chars_per_day:
                reach(self.url, self._redis.decrby, counter, characters)  # this job is not taken
                until = int((day + 1) * DAY_SECONDS - time.time()) + 1
                raise ApiError(
                    429,
                    f"this key's {chars_per_day:,} characters for today (UTC) would be passed: "
                    f"{int(total) - characters:,} used; more tomorrow",
                    "daily_characters",
                    {"Retry-After": str(until)},
                )

    def taken(self, key_name: str, job_id: str, limits: KeyLimits | None = None) -> None:
        """Note a job of ``key_name``'s as in flight."""
        if self.limits_of(limits)[0] > 0:
            reach(self.url, self._redis.sadd, INFLIGHT_PREFIX + key_name, job_id)

    def limits_of(self, limits: KeyLimits | None) -> tuple[int, int]:
        """Jobs in flight and characters a day a key may have: its own where it has them."""
        own = limits or KeyLimits()
        jobs = self.jobs_in_flight if own.jobs_in_flight is None else own.jobs_in_flight
        chars = self.chars_per_day if own.chars_per_day is None else own.chars_per_day
        return jobs, chars

    def _in_flight(self, key_name: str) -> int:
        """The key's jobs still queued or running; finished (or expired) ones are let go here."""
        members = sorted(reach(self.url, self._redis.smembers, INFLIGHT_PREFIX + key_name))
        if not members:
            return 0
        pipe = self._redis.pipeline(transaction=False)
        for job_id in members:
            pipe.hmget(JOB_RECORD_PREFIX + job_id, "state", "cancel_requested")
        records = reach(self.url, pipe.execute)
        done = [job for job, (state, cancel) in zip(members, records, strict=True) if _ended(state, cancel)]
        if done:
            reach(self.url, self._redis.srem, INFLIGHT_PREFIX + key_name, *done)
        return len(members) - len(done)

    @contextmanager
    def speech_wait(self, key_name: str) -> Iterator[None]:
        """Hold one of the key's speech waits in this process, or raise :class:`ApiError` 503:
        one key's abandoned requests cannot take every wait."""
        with self._lock:
            if self.speech_waits > 0 and self._waiting[key_name] >= self.speech_waits:
                raise ApiError(
                    503,
                    f"this key has {self._waiting[key_name]} speech requests waiting on this gateway "
                    "already: retry shortly, or submit to POST /v1/jobs",
                    "busy",
                    {"Retry-After": "1"},
                )
            self._waiting[key_name] += 1
        try:
            yield
        finally:
            with self._lock:
                self._waiting[key_name] -= 1


def _ended(state: str | None, cancel_requested: str | None) -> bool:
    """A job gone (its record expired), finished, or cancelled before it started."""
    if state is None:
        return True
    return state.strip('"') in TERMINAL_STATES or (state == '"queued"' and cancel_requested == "true")
