"""ttsfarm's own parts, one folder each, lowest first: ``core`` (settings, job types, errors,
voices, timings, mastering), ``storage``, ``farm`` (the Celery and Redis adapters), ``audiobook``
and ``cli`` (the command line). The engine (``synthesis``), ``worker``, ``producer`` and
``gateway`` are packages of their own; ``tests/test_architecture.py`` keeps the order.

Nothing here imports onnxruntime or the synthesis engine at import, so producers stay light.
"""

from ttsfarm.core.errors import (
    InvalidInput,
    JobFailed,
    JobNotFound,
    PermanentError,
    SettingsError,
    StorageUnavailable,
    TransientError,
    TtsfarmError,
    UnsupportedFormat,
    VoiceNotFound,
    WaitTimeout,
)

__all__ = [
    "InvalidInput",
    "JobFailed",
    "JobNotFound",
    "PermanentError",
    "SettingsError",
    "StorageUnavailable",
    "TransientError",
    "TtsfarmError",
    "UnsupportedFormat",
    "VoiceNotFound",
    "WaitTimeout",
]
