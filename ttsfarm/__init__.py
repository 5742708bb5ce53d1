"""Shared pieces of ttsfarm: settings, job messages, errors, storage and the command line.

Nothing here imports onnxruntime or the synthesis engine, so producers stay light.
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
