"""Shared pieces of ttsfarm: settings, job types, errors, voices, storage; the farm's Celery and
Redis adapters (``farm``), the audiobook feature (``audiobook``) and the command line (``cli``).

Nothing here imports onnxruntime or the synthesis engine at import, so producers stay light.
"""

from ttsfarm.errors import (
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
