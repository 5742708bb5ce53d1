"""Shared pieces of ttsfarm: settings, job types, errors, voices, storage; the farm's Celery and
Redis adapters (``farm``), the audiobook feature (``audiobook``) and the command line (``cli``).

Nothing here imports onnxruntime or the synthesis engine at import, so producers stay light.
"""

from ttsfarm.errors import (
    InvalidInput,
    JobNotFound,
    PermanentError,
    StorageUnavailable,
    TransientError,
    TtsfarmError,
    UnsupportedFormat,
    VoiceNotFound,
)

__all__ = [
    "InvalidInput",
    "JobNotFound",
    "PermanentError",
    "StorageUnavailable",
    "TransientError",
    "TtsfarmError",
    "UnsupportedFormat",
    "VoiceNotFound",
]
