"""The producer API: submit text jobs to the farm and follow them by id.

    from producer import Client
    client = Client.from_env()
    job_id = client.submit("Some text", voice="joe", format="mp3")
    client.status(job_id).state        # queued, running, succeeded, failed, cancelled, unknown
    result = client.wait(job_id, timeout=600)

Imports neither onnxruntime nor the worker's engine.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from kombu.exceptions import OperationalError

from producer.download import download
from producer.specs import JobSpec, Queueable
from ttsfarm.core.admission import check_cost
from ttsfarm.core.errors import (
    BrokerUnavailable,
    InvalidInput,
    JobFailed,
    JobNotFound,
    PermanentError,
    QueueFull,
    SettingsError,
    WaitTimeout,
)
from ttsfarm.core.finishing import FinishRequest
from ttsfarm.core.job_limits import DEFAULT_PRIORITY, check_priority
from ttsfarm.core.jobs import (
    POLL_SECONDS,
    SUBMITTED_AT,
    JobRequest,
    JobResult,
    JobStatus,
    SynthesisOptions,
    check_key,
    new_job_id,
    result_key,
    wait_until_done,
)
from ttsfarm.core.redact import redact
from ttsfarm.core.settings import NO_BROKER_MESSAGE, Settings
from ttsfarm.core.voices import VoiceCatalog
from ttsfarm.farm.celeryconf import (
    FINISH_TASK_NAME,
    MESSAGE_PRIORITIES,
    TASK_NAME,
    finish_queue,
    make_celery,
    queued_jobs,
)
from ttsfarm.farm.registry import JobRegistry, NewJob
from ttsfarm.storage import Storage, open_storage, storage_at

__all__ = ["Client", "JobSpec", "download"]

LISTEN_BLOCK_SECONDS: Final = 1.0
"""How long one read of a streamed job's audio waits for more."""


class Client:
    """Talks to the farm through its broker and result backend (Redis)."""

    def __init__(self, settings: Settings) -> None:
        """A client for the farm whose broker ``settings`` name; storage settings say where
        :meth:`fetch` finds the audio."""
        if not settings.broker_url:
            raise SettingsError(NO_BROKER_MESSAGE)
        self.settings = settings
        self._app = make_celery(settings)
        self._registry = JobRegistry(settings.backend_url or settings.broker_url, settings.redis_tls())
        self._storage: Storage | None = None
        self._audio_storages: dict[str, Storage] = {}
        self._audio_lock = threading.Lock()
        self.voices = VoiceCatalog(settings.voices_dir)
        """The voices jobs may ask for: the farm's settings name the same ones."""

    @classmethod
    def from_env(cls) -> Client:
        """A client for the farm named by ``TTSFARM_BROKER_URL`` (and ``configs/``): the
        settings are read here, for a script that is its own edge."""
        return cls(Settings.load())

    def _request(self, spec: JobSpec) -> JobRequest:
        options = SynthesisOptions(
            voice=spec.voice or self.settings.voice,
            speaker=spec.speaker,
            length_scale=spec.length_scale,
            noise_scale=spec.noise_scale,
            noise_w=spec.noise_w,
        )
        voice = self.voices.check(options.voice, options.speaker)
        if spec.key is not None:
            check_key(spec.key)
        check_priority(spec.priority)
        request = JobRequest(
            spec.text, options, spec.format, new_job_id(), spec.loudness, spec.sentence_silence, spec.stream
        )
        check_cost(
            request.text,
            voice,
            options.length_scale,
            request.loudness is not None,
            self.settings.max_job_audio_seconds,
            self.settings.max_job_temp_mb,
        )
        return request

    def submit(
        self,
        text: str,
        voice: str | None = None,
        format: str = "wav",
        speaker: int | None = None,
        length_scale: float | None = None,
        key: str | None = None,
        loudness: float | None = None,
        sentence_silence: float | None = None,
        owner: str | None = None,
        stream: bool = False,
        priority: str = DEFAULT_PRIORITY,
    ) -> str:
        """Queue one job; returns its id at once. With ``key``, a second submit of the same
        key returns the first job's id and queues nothing. With ``loudness`` (LUFS, such as
        -18) the audio is mastered to it, true peaks under -1 dBTP. With ``sentence_silence``
        (seconds, 0 to 2) each sentence is followed by that much silence, as piper's option.
        An ``interactive`` job is taken before every ``bulk`` one that waits."""
        spec = JobSpec(
            text,
            voice,
            speaker,
            length_scale,
            format,
            key,
            loudness=loudness,
            sentence_silence=sentence_silence,
            owner=owner,
            stream=stream,
            priority=priority,
        )
        return self.submit_many([spec])[0]

    def submit_many(self, specs: Iterable[JobSpec | str]) -> list[str]:
        """Queue many jobs in one call (one broker connection); ids in the same order. Every job
        is checked (text, voice, options, key) before any is queued: a bad one queues none."""
        jobs = [s if isinstance(s, JobSpec) else JobSpec(s) for s in specs]
        requests = []
        for number, job in enumerate(jobs, 1):
            try:
                requests.append(self._request(job))
            except PermanentError as error:
                if len(jobs) == 1:
                    raise
                raise type(error)(f"job {number} of {len(jobs)}: {error}; nothing was queued") from None
        owners = [job.owner for job in jobs]
        priorities = [MESSAGE_PRIORITIES[job.priority] for job in jobs]
        keys = [job.key for job in jobs]
        return self._queue(TASK_NAME, requests, keys, self.settings.queue, owners, priorities)

    def submit_finish(self, request: FinishRequest, key: str | None = None) -> str:
        """Queue a finish job (a book's chapter: its parts joined, mastered and encoded on a
        worker); returns its id. With ``key``, as :meth:`submit`."""
        if key is not None:
            check_key(key)
        return self._queue(FINISH_TASK_NAME, [request], [key], finish_queue(self.settings.queue))[0]

    def _queue(
        self,
        task: str,
        requests: Sequence[Queueable],
        keys: Sequence[str | None],
        queue: str,
        owners: Sequence[str | None] | None = None,
        priorities: Sequence[int | None] | None = None,
    ) -> list[str]:
        """Record and send ``requests`` (checked, with their keys, by the caller) as ``task`` jobs,
        each bound to its idempotency key; the ids in order. All are recorded and bound before the
        first is sent, so a refused call queues nothing and leaves no record; a record whose
        message could not be sent is marked failed: none waits for a message that never comes."""
        fingerprints = [request.fingerprint() for request in requests]
        self._check_room(len(requests))
        ids = self._record(requests, keys, fingerprints, owners or [None] * len(requests))
        sent = zip(requests, priorities or [None] * len(requests), ids, strict=True)
        self._send(task, [(r, priority) for r, priority, job_id in sent if r.job_id == job_id], queue)
        return ids

    def _record(
        self,
        requests: Sequence[Queueable],
        keys: Sequence[str | None],
        fingerprints: Sequence[str],
        owners: Sequence[str | None],
    ) -> list[str]:
        """Record each request as queued and bind it to its key: the id each is answered with (its
        own, or that of the job its key is bound to already). All or none: on any error the
        records made here are dropped."""
        ids: list[str] = []
        made = [request.job_id for request in requests]
        try:
            # every record first, in few round trips: a bound key never points at nothing
            self._registry.created_many(
                [
                    NewJob(job_id, fingerprint, owner)
                    for job_id, fingerprint, owner in zip(made, fingerprints, owners, strict=True)
                ]
            )
            for job_id, key, fingerprint in zip(made, keys, fingerprints, strict=True):
                bound = job_id if key is None else self._registry.claim_key(key, job_id, fingerprint)
                if bound != job_id:  # a repeat of the key's request: answered with that job
                    self._registry.forget(job_id)
                ids.append(bound)
        except BaseException:
            self._drop(made)
            raise
        return ids

    def _send(self, task: str, messages: Sequence[tuple[Queueable, int | None]], queue: str) -> None:
        """Send the recorded requests, each with its message priority. Should one fail, it and
        those after it are marked failed: their keys can be used again, and whoever holds one of
        their ids learns why. (The one being sent may have reached the broker all the same: its
        worker records how it ends.)"""
        requests = [request for request, _ in messages]
        sent: list[str] = []
        try:
            with self._app.producer_or_acquire() as producer:
                for request, priority in messages:
                    self._app.send_task(
                        task,
                        args=[{**request.to_dict(), SUBMITTED_AT: time.time()}],
                        argsrepr=request.summary(),  # what Flower shows instead of the whole text
                        kwargsrepr="{}",
                        task_id=request.job_id,
                        producer=producer,
                        queue=queue,
                        priority=priority,
                    )
                    sent.append(request.job_id)
        except BaseException as error:
            unreachable = isinstance(error, OperationalError)
            reason = self._unreachable(error) if unreachable else f"{type(error).__name__}: {error}"
            with contextlib.suppress(BrokerUnavailable):  # Redis is down too: the records expire
                for request in requests[len(sent) :]:
                    self._registry.failed(request.job_id, f"could not be queued: {reason}")
            if not unreachable:
                raise
            queued = f" ({len(sent)} of {len(requests)} jobs were queued: {', '.join(sent)})" if sent else ""
            raise BrokerUnavailable(reason + queued) from None

    def _unreachable(self, error: BaseException) -> str:
        return f"cannot reach the broker at {redact(self.settings.broker_url or '')}: {error}"

    def _drop(self, job_ids: Sequence[str]) -> None:
        """Forget the records of jobs that were never sent, as far as Redis can be reached."""
        with contextlib.suppress(BrokerUnavailable):
            self._registry.forget(*job_ids)

    def _check_room(self, adding: int) -> None:
        """:class:`QueueFull` if ``adding`` more jobs would take the queue past its limit. Checked
        before anything is sent, so a refused call queues nothing; producers submitting at the
        same moment may pass the limit by what they send together."""
        limit = self.settings.max_queued_jobs
        if limit <= 0:
            return
        try:
            queued = queued_jobs(self._app, self.settings.queue)
        except OperationalError as error:
            raise BrokerUnavailable(self._unreachable(error)) from None
        if queued + adding > limit:
            what = f"{adding} more jobs" if adding > 1 else "another job"
            raise QueueFull(
                f"the farm's queue is full: {queued} jobs wait for a worker and it takes at most {limit}"
                f" (TTSFARM_MAX_QUEUED_JOBS), so {what} cannot be queued now; nothing was queued:"
                " submit again once workers have taken some, or add workers"
            )

    def status(self, job_id: str) -> JobStatus:
        """The job's state now; ``unknown`` for an id that was never submitted (or expired)."""
        return self._registry.status(job_id)

    def statuses(self, job_ids: Sequence[str]) -> list[JobStatus]:
        """The state of each job now, in order, read in one round trip."""
        return self._registry.statuses(job_ids)

    def ping(self) -> None:
        """Return if the farm's Redis answers; :class:`BrokerUnavailable` if not."""
        self._registry.ping()

    def workers(self, timeout: float = 1.0) -> list[str]:
        """Names of the workers that answer a ping within ``timeout`` seconds."""
        try:
            replies = self._app.control.ping(timeout=timeout)
        except OperationalError as error:
            raise BrokerUnavailable(self._unreachable(error)) from None
        return sorted(name for reply in replies for name in reply)

    def wait(self, job_id: str, timeout: float | None = None, poll: float = POLL_SECONDS) -> JobResult:
        """Block until the job is done; its result, or :class:`JobFailed` / :class:`Cancelled`
        (:class:`WaitTimeout` after ``timeout`` seconds)."""
        return wait_until_done(job_id, self.status, timeout, poll).outcome()

    def cancel(self, job_id: str) -> JobStatus:
        """Stop the job: a queued one (or one waiting to retry) is recorded as cancelled when a
        worker takes it, a running one stops within half a second, a finished one is left as it
        is (and keeps its idempotency key). The message is not revoked:
        a revoked task never runs, so nothing would record that it stopped."""
        if not self._registry.exists(job_id):
            raise JobNotFound(f"unknown job id {job_id}")
        self._registry.request_cancel(job_id)
        return self.status(job_id)

    def listen(self, job_id: str, timeout: float) -> Iterator[bytes]:
        """The audio of a job submitted with ``stream=True`` as it is made: 16-bit PCM, mono, at
        the voice's rate, in blocks. Raises :class:`WaitTimeout` after ``timeout`` seconds with
        no new audio, and :class:`JobFailed` if the job's attempt stopped (it failed, was
        cancelled, or will be retried: what was heard so far is not the whole of it)."""
        after, quiet_since = "0", time.monotonic()
        while True:
            entries = self._registry.read_audio(job_id, after, LISTEN_BLOCK_SECONDS)
            for entry_id, data in entries:
                after = entry_id
                if isinstance(data, str):
                    if data != "succeeded":
                        raise JobFailed(f"job {job_id} stopped before its audio was complete ({data})")
                    return
                yield data
            if entries:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > timeout:
                raise WaitTimeout(f"job {job_id} made no audio for {timeout:g} s")

    def delete(self, job_id: str) -> JobStatus:
        """Remove a finished job: its audio, its result file and its record. Its idempotency key
        is free again. Returns the job's last status; a job still queued or running raises
        :class:`InvalidInput` (cancel it first)."""
        status = self.status(job_id)
        if status.state == "unknown":
            raise JobNotFound(f"unknown job id {job_id}")
        if not status.done:
            raise InvalidInput(f"job {job_id} is {status.state}: cancel it, then delete it once it stopped")
        if status.result is not None:
            storage, key = self.audio(status.result)
            folder = key.rpartition("/")[0]
            storage.delete(key)
            storage.delete(f"{folder}/{result_key(job_id)}" if folder else result_key(job_id))  # beside it
        self._registry.forget(job_id)
        return status

    @property
    def storage(self) -> Storage:
        if self._storage is None:
            self._storage = open_storage(self.settings)
        return self._storage

    def fetch(self, job_id: str, target: str | Path, overwrite: bool = False) -> JobResult:
        """Download a finished job's audio to ``target`` and check it against the job's SHA-256.
        An existing file is replaced only with ``overwrite``."""
        status = self.status(job_id)
        if status.state == "unknown":
            raise JobNotFound(f"unknown job id {job_id}")
        if status.result is None:
            raise PermanentError(f"job {job_id} is {status.state}: nothing to fetch yet")
        return download(status.result, target, self.audio(status.result), overwrite)

    def audio(self, result: JobResult) -> tuple[Storage, str]:
        """The storage that holds a finished job's audio and its key there, from where the
        job's worker put it (``result.location``), whatever this client's ``storage_url`` says."""
        return self.locate(result.location)

    def locate(self, location: str) -> tuple[Storage, str]:
        """The storage that holds ``location`` (where a worker put a file) and its key there.
        Storages are made once per bucket or folder and shared by threads."""
        with self._audio_lock:  # boto3 makes clients safely from one thread at a time
            return storage_at(location, self.settings, self._audio_storages)

    def close(self) -> None:
        self._app.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
