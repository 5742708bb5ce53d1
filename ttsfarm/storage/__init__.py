"""Where finished audio goes: a local folder (``local``) or S3-compatible storage (``s3``), both
behind the :class:`Storage` protocol (``base``). Opening one from settings lives here."""

from __future__ import annotations

from pathlib import Path

from ttsfarm.core.files import sha256_file
from ttsfarm.core.settings import Settings
from ttsfarm.storage.base import STREAM_CHUNK_BYTES, Storage, StoredObject, read_chunks
from ttsfarm.storage.local import LocalStorage

__all__ = [
    "STREAM_CHUNK_BYTES",
    "LocalStorage",
    "Storage",
    "StoredObject",
    "fetch_checked",
    "open_storage",
    "read_chunks",
    "storage_at",
]


def open_storage(settings: Settings, create_bucket: bool = False) -> Storage:
    """The backend ``settings.storage_url`` names: ``s3://bucket/prefix`` or a local folder.
    With ``create_bucket`` and ``settings.s3_create_bucket``, a missing bucket is made."""
    if settings.storage_url.startswith("s3://"):
        from ttsfarm.storage.s3 import S3Storage, make_client, parse_s3_url

        bucket, prefix = parse_s3_url(settings.storage_url)
        client = make_client(settings.s3_endpoint_url, settings.s3_region)
        storage = S3Storage(client, bucket, prefix, settings.presign_seconds)
        if create_bucket and settings.s3_create_bucket:
            storage.ensure_bucket()
        return storage
    return LocalStorage(settings.storage_url)


def fetch_checked(source: tuple[Storage, str], target: Path, sha256: str) -> bool:
    """Copy ``source`` (a storage and a key there) to ``target``, and say whether what arrived is
    what ``sha256`` names (if not, ``target`` is removed)."""
    storage, key = source
    storage.fetch(key, target)
    if sha256_file(target) == sha256:
        return True
    target.unlink(missing_ok=True)
    return False


def storage_at(
    location: str, settings: Settings, opened: dict[str, Storage] | None = None
) -> tuple[Storage, str]:
    """The storage that holds ``location`` (where a job's result says its audio is), and the
    key there: a job is fetched from where its worker put it, whatever this side's
    ``storage_url`` says. S3 credentials and endpoint come from ``settings``. ``opened`` keeps
    the storages made so far, one per bucket or folder, for the next call to reuse."""
    opened = {} if opened is None else opened
    if location.startswith("s3://"):
        from ttsfarm.storage.s3 import S3Storage, make_client, parse_s3_url

        bucket, key = parse_s3_url(location)
        key = key.rstrip("/")  # parse_s3_url reads a prefix; this is an object's key
        root = f"s3://{bucket}"
        if root not in opened:
            client = make_client(settings.s3_endpoint_url, settings.s3_region)
            opened[root] = S3Storage(client, bucket, "", settings.presign_seconds)
        return opened[root], key
    path = Path(location)
    if str(path.parent) not in opened:
        opened[str(path.parent)] = LocalStorage(path.parent)
    return opened[str(path.parent)], path.name
