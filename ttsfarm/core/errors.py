"""The ttsfarm exception tree.

    TtsfarmError                 base of everything ttsfarm raises on purpose
    ├── PermanentError           retrying will not help: the request must change
    │   ├── SettingsError        a setting (environment, config file) is not usable: fix it, restart
    │   ├── InvalidInput         empty text, text over the limit, bad file, bad option
    │   ├── VoiceNotFound        unknown voice name or path
    │   │   └── VoiceUnusable    a voice of the voices folder whose files are broken
    │   ├── UnsupportedFormat    output format we cannot encode
    │   ├── JobNotFound          no job with that id
    │   ├── JobFailed            the job ended in failure (its error says why)
    │   ├── Cancelled            the job was cancelled before it finished
    │   ├── StorageRejected      the storage refused the request (access denied, bad credentials)
    │   ├── EngineOutOfMemory    the device ran out of memory for a batch (one segment, split)
    │   └── DeviceUnavailable    a GPU was asked for and cannot be used
    └── TransientError           may succeed on retry (broker blip, storage throttling)
        ├── BrokerUnavailable    the broker cannot be reached
        ├── QueueFull            the farm's queue holds as many jobs as it may: submit later
        ├── StorageUnavailable   the storage backend failed or cannot be reached, or a disk is full
        ├── TempSpaceUnavailable a worker's temp folder is full or read-only
        ├── InvalidAudio         the engine returned samples that are not numbers (NaN, inf)
        ├── WaitTimeout          a job did not finish within the wait (it may still finish)
        └── WorkerStopping       the worker is stopping: the job goes back to the queue

Programmer errors stay built-in (``ValueError``, ``TypeError``).
Every message is written for the user: it says what went wrong and what to change. Where that
user is the operator (a storage endpoint, a local path), :attr:`TtsfarmError.public` is what a
job's client reads instead: the worker's log keeps the details.
"""

from __future__ import annotations

from collections.abc import Callable


class TtsfarmError(Exception):
    """Base class for errors raised by ttsfarm."""

    PUBLIC: str | None = None
    """What a job's client reads for errors of this class, when the message itself holds the
    operator's details (endpoints, buckets, paths); ``None``: the message is for clients too."""

    @property
    def public(self) -> str:
        """The error as the clients of a farm job may read it."""
        return self.PUBLIC or str(self)


class PermanentError(TtsfarmError):
    """The request cannot succeed as given; retrying will not help."""


class SettingsError(PermanentError):
    """A setting (a ``TTSFARM_*`` variable or a config file value) is not usable. Raised where the
    settings are built, at the edge: a command or a worker start stops with this one line."""


class InvalidInput(PermanentError):
    """The text, file or option given is not usable."""


class DeviceUnavailable(PermanentError):
    """A GPU was asked for (``--gpu``, ``TTSFARM_PROVIDER=cuda``) and cannot be used: the worker
    stops rather than run on the CPU without saying so."""


class VoiceNotFound(PermanentError):
    """The voice name or path does not name a Piper voice."""


class VoiceUnusable(VoiceNotFound):
    """A voice of the farm's voices folder whose files cannot be used: the other voices serve on."""

    PUBLIC = "that voice's files on this farm are broken: the farm's operator must fix or remove them"


class UnsupportedFormat(PermanentError):
    """The requested audio format cannot be produced."""


class JobNotFound(PermanentError):
    """No job with the given id is known."""


class JobFailed(PermanentError):
    """The job ended in failure; the message says why."""


class Cancelled(PermanentError):
    """The job was cancelled; what it had produced was thrown away."""


def raise_if_cancelled(cancelled: Callable[[], bool] | None) -> None:
    """Raise :class:`Cancelled` if ``cancelled`` says so (it may also raise a worker's stop)."""
    if cancelled is not None and cancelled():
        raise Cancelled("the job was cancelled")


class StorageRejected(PermanentError):
    """The storage refused the request for a reason retrying will not fix."""

    PUBLIC = "the farm's storage refused to store the audio: its operator must fix it"


class EngineOutOfMemory(PermanentError):
    """The runtime could not allocate memory for a batch. The batcher halves the batch and splits
    a single segment first; one that still does not fit fails its job (no retry helps)."""


class TransientError(TtsfarmError):
    """A failure that may pass: retry with backoff."""


class BrokerUnavailable(TransientError):
    """The message broker or result backend cannot be reached."""


class QueueFull(TransientError):
    """The farm's queue holds ``TTSFARM_MAX_QUEUED_JOBS`` jobs already: nothing of the request
    was queued. Submit again once the workers have taken some, or add workers."""


class StorageUnavailable(TransientError):
    """The storage backend cannot be reached or refused the write."""

    PUBLIC = "the farm's storage could not be reached"


class TempSpaceUnavailable(TransientError):
    """A worker's temp folder is full or cannot be written: the job is retried once space is freed."""

    PUBLIC = "the worker's temp disk is full or read-only"


class InvalidAudio(TransientError):
    """The engine returned audio with samples that are not finite numbers. Nothing of it is
    stored; the job is retried (its segments then meet other batches)."""


class WaitTimeout(TransientError, TimeoutError):
    """The job did not finish within the time given; it may still finish: wait again."""


class WorkerStopping(TransientError):
    """The worker was told to stop and its grace ran out: the job goes back to the queue."""
