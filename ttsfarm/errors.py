"""The ttsfarm exception tree.

    TtsfarmError                 base of everything ttsfarm raises on purpose
    ├── PermanentError           retrying will not help: the request must change
    │   ├── InvalidInput         empty text, text over the limit, bad file, bad option
    │   ├── VoiceNotFound        unknown voice name or path
    │   ├── UnsupportedFormat    output format we cannot encode
    │   ├── JobNotFound          no job with that id
    │   ├── Cancelled            the job was cancelled before it finished
    │   └── DeviceUnavailable    a GPU was asked for and cannot be used
    └── TransientError           may succeed on retry (broker blip, storage throttling)
        ├── BrokerUnavailable    the broker cannot be reached
        ├── QueueFull            the farm's queue holds as many jobs as it may: submit later
        ├── StorageUnavailable   the storage backend failed or cannot be reached
        ├── InvalidAudio         the engine returned samples that are not numbers (NaN, inf)
        └── WorkerStopping       the worker is stopping: the job goes back to the queue

Programmer errors stay built-in (``ValueError``, ``TypeError``).
Every message is written for the user: it says what went wrong and what to change.
"""

from __future__ import annotations


class TtsfarmError(Exception):
    """Base class for errors raised by ttsfarm."""


class PermanentError(TtsfarmError):
    """The request cannot succeed as given; retrying will not help."""


class InvalidInput(PermanentError):
    """The text, file or option given is not usable."""


class DeviceUnavailable(PermanentError):
    """A GPU was asked for (``--gpu``, ``TTSFARM_PROVIDER=cuda``) and cannot be used: the worker
    stops rather than run on the CPU without saying so."""


class VoiceNotFound(PermanentError):
    """The voice name or path does not name a Piper voice."""


class UnsupportedFormat(PermanentError):
    """The requested audio format cannot be produced."""


class JobNotFound(PermanentError):
    """No job with the given id is known."""


class Cancelled(PermanentError):
    """The job was cancelled; what it had produced was thrown away."""


class TransientError(TtsfarmError):
    """A failure that may pass: retry with backoff."""


class BrokerUnavailable(TransientError):
    """The message broker or result backend cannot be reached."""


class QueueFull(TransientError):
    """The farm's queue holds ``TTSFARM_MAX_QUEUED_JOBS`` jobs already: nothing of the request
    was queued. Submit again once the workers have taken some, or add workers."""


class StorageUnavailable(TransientError):
    """The storage backend cannot be reached or refused the write."""


class InvalidAudio(TransientError):
    """The engine returned audio with samples that are not finite numbers. Nothing of it is
    stored; the job is retried (its segments then meet other batches)."""


class WorkerStopping(TransientError):
    """The worker was told to stop and its grace ran out: the job goes back to the queue."""
