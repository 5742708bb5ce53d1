"""Job records in Redis: the source of truth for a job's state, progress and result.

Producers create the record at submit (so an id that was never submitted is *unknown*, not
pending forever); workers move it through running, succeeded, failed or cancelled.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

import numpy as np
import redis

from ttsfarm.core.errors import BrokerUnavailable, InvalidInput
from ttsfarm.core.jobs import JobResult, JobStatus
from ttsfarm.core.pcm import pcm16
from ttsfarm.core.redact import redact

RECORD_TTL_SECONDS: Final = 7 * 24 * 3600
"""Job records and idempotency keys are kept a week after their last change."""
AUDIO_TTL_SECONDS: Final = 600
"""A streamed job's audio stays in Redis this long after its last block: for the listener only."""
AUDIO_END: Final = "end"
"""The field of a stream's last entry: the job's state as its worker left it."""
KEY_PREFIX: Final = "ttsfarm:"
CONNECT_TIMEOUT_SECONDS: Final = 3.0
RECORDS_PER_ROUND_TRIP: Final = 1000
"""New job records written to Redis in one pipeline (about 0.2 MB of commands)."""


class NewJob(NamedTuple):
    """A job to record as queued (:meth:`JobRegistry.created_many`)."""

    job_id: str
    fingerprint: str | None = None
    owner: str | None = None


_CLAIM_KEY_SCRIPT: Final = """
local bound = redis.call('GET', KEYS[1])
if bound then
    local record = ARGV[3] .. bound
    local state = redis.call('HGET', record, 'state')
    local cancelled = redis.call('HGET', record, 'cancel_requested') == 'true'
    local live = state == '"succeeded"' or (
        state and state ~= '"failed"' and state ~= '"cancelled"' and not cancelled)
    if live then
        local fingerprint = redis.call('HGET', record, 'fingerprint')
        if ARGV[4] ~= '' and fingerprint and fingerprint ~= ARGV[4] then
            return '!' .. bound
        end
        return bound
    end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return ARGV[1]
"""
_REQUEST_CANCEL_SCRIPT: Final = """
local state = redis.call('HGET', KEYS[1], 'state')
if state == '"succeeded"' or state == '"failed"' or state == '"cancelled"' then
    return 0
end
redis.call('HSET', KEYS[1], 'cancel_requested', 'true')
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""
_START_SCRIPT: Final = """
local record = redis.call('HGETALL', KEYS[1])
local fields = {}
for i = 1, #record, 2 do fields[record[i]] = record[i + 1] end
local done = fields['state'] == '"succeeded"' and fields['result'] and fields['result'] ~= 'null'
if not done and fields['cancel_requested'] ~= 'true' then
    redis.call('HINCRBY', KEYS[1], 'attempts', 1)
    redis.call('HSET', KEYS[1], 'state', ARGV[1], 'started_at', ARGV[2], 'error', 'null')
    redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return record
"""


def connect(url: str, tls: Mapping[str, str] | None = None) -> redis.Redis:
    """A client of the farm's Redis (job records, and the gateway's keys) with short timeouts.
    ``tls`` (``Settings.redis_tls()``) applies to ``rediss://`` URLs; without it the server's
    certificate is checked against the system's trust store."""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise InvalidInput(f"the result backend must be Redis (redis://...), not {redact(url)!r}")
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=CONNECT_TIMEOUT_SECONDS * 3,
        decode_responses=True,
        **(dict(tls or {}) if url.startswith("rediss://") else {}),
    )


def reach(url: str, command: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run one Redis command or pipeline, turning connection trouble into BrokerUnavailable."""
    try:
        return command(*args, **kwargs)
    except redis.exceptions.ConnectionError as error:
        raise BrokerUnavailable(f"cannot reach Redis at {redact(url)}: {error}") from None
    except redis.exceptions.TimeoutError:
        raise BrokerUnavailable(f"Redis at {redact(url)} did not answer in time") from None


class JobRegistry:
    """Reads and writes job records. Every method raises :class:`BrokerUnavailable` when
    Redis cannot be reached, quickly and with the URL (less any password) in the message."""

    def __init__(self, url: str, tls: Mapping[str, str] | None = None) -> None:
        self.url = url
        self._redis = connect(url, tls)
        self._start = self._redis.register_script(_START_SCRIPT)  # sent by its digest

    def _key(self, job_id: str) -> str:
        return f"{KEY_PREFIX}job:{job_id}"

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._reach(getattr(self._redis, method), *args, **kwargs)

    def _reach(self, command: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return reach(self.url, command, *args, **kwargs)

    def ping(self) -> None:
        """Return if Redis answers; :class:`BrokerUnavailable` if not."""
        self._call("ping")

    def _update(self, job_id: str, count: str | None = None, **fields: Any) -> None:
        """Write ``fields`` (and add one to the ``count`` field) in one round trip."""
        pipe = self._redis.pipeline()
        if count is not None:
            pipe.hincrby(self._key(job_id), count, 1)
        self._write(pipe, job_id, fields)
        self._reach(pipe.execute)

    def _write(self, pipe: redis.client.Pipeline, job_id: str, fields: Mapping[str, Any]) -> None:
        """Add to ``pipe`` the writing of a record's ``fields`` (JSON each), and its new expiry."""
        pipe.hset(self._key(job_id), mapping={k: json.dumps(v) for k, v in fields.items()})
        pipe.expire(self._key(job_id), RECORD_TTL_SECONDS)

    def claim_key(self, idempotency_key: str, job_id: str, fingerprint: str | None = None) -> str:
        """The job bound to ``idempotency_key``, or ``job_id`` once bound to it.

        A key whose job failed, was cancelled or expired is bound anew: nothing was made
        under it, so trying again is not synthesizing twice. A key whose job succeeded stays
        bound to it, even if a cancel came too late to stop it. One atomic step in Redis, so two
        producers submitting the same key at once get the same job. A key bound to a job for
        another request (its ``fingerprint`` differs) raises :class:`InvalidInput`: returning
        that job would hand back audio of a different text."""
        key = f"{KEY_PREFIX}key:{idempotency_key}"
        marked = json.dumps(fingerprint) if fingerprint else ""
        bound = str(
            self._call("eval", _CLAIM_KEY_SCRIPT, 1, key, job_id, RECORD_TTL_SECONDS, self._key(""), marked)
        )
        if bound.startswith("!"):
            raise InvalidInput(
                f"idempotency key {idempotency_key!r} is taken by job {bound[1:]}, made for a different "
                "text, voice, settings, format or loudness: use a new key for a new request"
            )
        return bound

    def forget(self, *job_ids: str) -> None:
        """Drop the records of jobs that were never queued."""
        if job_ids:
            self._call("delete", *map(self._key, job_ids))

    def created(self, job_id: str, fingerprint: str | None = None, owner: str | None = None) -> None:
        """Record a job as queued; ``fingerprint`` (:meth:`JobRequest.fingerprint`) lets an
        idempotency key tell a repeat of the request from another one; ``owner`` is who it
        belongs to (the gateway's API key name)."""
        self.created_many([NewJob(job_id, fingerprint, owner)])

    def created_many(self, jobs: Sequence[NewJob]) -> None:
        """Record many jobs as queued, as :meth:`created`, a thousand to a round trip. Should
        Redis fail part way, some may be recorded: :meth:`forget` them all."""
        for start in range(0, len(jobs), RECORDS_PER_ROUND_TRIP):
            pipe = self._redis.pipeline(transaction=False)
            for job in jobs[start : start + RECORDS_PER_ROUND_TRIP]:
                fields: dict[str, Any] = {"state": "queued", "submitted_at": time.time(), "attempts": 0}
                if job.fingerprint:
                    fields["fingerprint"] = job.fingerprint
                if job.owner:
                    fields["owner"] = job.owner
                self._write(pipe, job.job_id, fields)
            self._reach(pipe.execute)

    def exists(self, job_id: str) -> bool:
        return bool(self._call("exists", self._key(job_id)))

    def start(self, job_id: str) -> JobStatus:
        """The job's status as it was; recorded now as running, one more attempt, unless it had
        succeeded already or is to be cancelled. One round trip, before each run of a job."""
        keys, args = [self._key(job_id)], [json.dumps("running"), json.dumps(time.time()), RECORD_TTL_SECONDS]
        flat = self._reach(self._start, keys=keys, args=args)
        return _status(job_id, dict(zip(flat[::2], flat[1::2], strict=True)))

    def progressed(self, job_id: str, done: int, total: int, audio_seconds: float) -> None:
        self._update(
            job_id,
            progress=done / total if total else 0.0,
            segments_done=done,
            segments_total=total,
            audio_seconds=audio_seconds,
        )

    def note_retry(self, job_id: str, message: str) -> None:
        self._update(job_id, state="running", error=f"retrying: {message}")

    def succeeded(self, job_id: str, result: JobResult) -> None:
        self._update(
            job_id,
            state="succeeded",
            progress=1.0,
            error=None,
            result=result.to_dict(),
            audio_seconds=result.duration,
            segments_done=len(result.segments),
            segments_total=len(result.segments),
            finished_at=time.time(),
        )

    def failed(self, job_id: str, message: str) -> None:
        self._update(job_id, state="failed", error=message, finished_at=time.time())

    def request_cancel(self, job_id: str) -> None:
        """Flag the job for cancelling; a job that already finished is left as it is."""
        self._call("eval", _REQUEST_CANCEL_SCRIPT, 1, self._key(job_id), RECORD_TTL_SECONDS)

    def cancel_requested(self, job_id: str) -> bool:
        return bool(self._call("hget", self._key(job_id), "cancel_requested") == "true")

    def cancelled(self, job_id: str) -> None:
        self._update(job_id, state="cancelled", finished_at=time.time())

    def status(self, job_id: str) -> JobStatus:
        return _status(job_id, self._call("hgetall", self._key(job_id)))

    # A streamed job's audio: a Redis stream its worker writes as segments are made, entries of
    # 16-bit PCM (base64: the farm's client decodes every answer as text), then an end entry.

    def publish_audio(self, job_id: str, samples: np.ndarray) -> None:
        """Add float32 ``samples`` to the job's audio stream, as 16-bit PCM."""
        self._append_audio(job_id, {"pcm": base64.b64encode(pcm16(samples)).decode("ascii")})

    def end_audio(self, job_id: str, state: str) -> None:
        """Close the job's audio stream: ``state`` says how the job's attempt ended."""
        self._append_audio(job_id, {AUDIO_END: state})

    def _append_audio(self, job_id: str, entry: dict[str, str]) -> None:
        pipe = self._redis.pipeline()
        pipe.xadd(self._audio_key(job_id), entry)  # type: ignore[arg-type]
        pipe.expire(self._audio_key(job_id), AUDIO_TTL_SECONDS)
        self._reach(pipe.execute)

    def read_audio(self, job_id: str, after: str, block_seconds: float) -> list[tuple[str, bytes | str]]:
        """Entries of the job's audio stream after the entry id ``after`` (``"0"``: from the
        start), waiting up to ``block_seconds`` for one: ``(id, pcm bytes)``, or ``(id, state)``
        for the end."""
        found = self._call("xread", {self._audio_key(job_id): after}, block=int(block_seconds * 1000))
        entries: list[tuple[str, bytes | str]] = []
        for _, items in found or ():
            for entry_id, fields in items:
                if AUDIO_END in fields:
                    entries.append((entry_id, str(fields[AUDIO_END])))
                else:
                    entries.append((entry_id, base64.b64decode(fields["pcm"])))
        return entries

    def _audio_key(self, job_id: str) -> str:
        return f"{KEY_PREFIX}audio:{job_id}"

    def statuses(self, job_ids: Sequence[str]) -> list[JobStatus]:
        """Each job's status, in order, read in one round trip."""
        pipe = self._redis.pipeline(transaction=False)
        for job_id in job_ids:
            pipe.hgetall(self._key(job_id))
        return [_status(job_id, raw) for job_id, raw in zip(job_ids, self._reach(pipe.execute), strict=True)]


def _status(job_id: str, raw: dict[str, str]) -> JobStatus:
    """A job's status from its record (``raw``: the hash as Redis holds it)."""
    if not raw:
        return JobStatus(job_id, "unknown")
    data = {k: json.loads(v) for k, v in raw.items()}
    state = data.get("state", "queued")
    if data.get("cancel_requested") and state == "queued":
        state = "cancelled"  # it will never run: workers check the flag before starting
    # A running job stays running until its worker records that it stopped (cancelled) or
    # that it had already stored its audio (succeeded): the state never flips back.
    result = data.get("result")
    return JobStatus(
        job_id=job_id,
        state=state,
        progress=float(data.get("progress", 0.0)),
        segments_done=int(data.get("segments_done", 0)),
        segments_total=int(data.get("segments_total", 0)),
        audio_seconds=float(data.get("audio_seconds", 0.0)),
        error=data.get("error"),
        result=JobResult.from_dict(result) if result else None,
        submitted_at=data.get("submitted_at"),
        started_at=data.get("started_at"),
        finished_at=data.get("finished_at"),
        attempts=int(data.get("attempts", 0)),
        cancel_requested=bool(data.get("cancel_requested")),
        owner=data.get("owner"),
    )
