"""S3-compatible storage through boto3 (AWS, MinIO, anything that speaks the S3 API).

Objects are written whole or not at all (S3 makes an upload visible only when complete),
carry their SHA-256 in metadata and as an S3 checksum (verified by the store on receipt),
and those sent in parts are checked after upload (size and metadata); a mismatched object is
deleted.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final
from urllib.parse import urlparse

import boto3
import boto3.exceptions
import botocore.config
import botocore.exceptions

from ttsfarm.core.errors import InvalidInput, JobNotFound, StorageRejected, StorageUnavailable
from ttsfarm.core.files import atomic_target, write_error
from ttsfarm.storage.base import STREAM_CHUNK_BYTES, StoredObject

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger(__name__)

SHA256_METADATA: Final = "sha256"
SINGLE_REQUEST_BYTES: Final = 8 * 2**20
"""Objects up to this size (boto3's own multipart threshold) are sent in one request carrying
their SHA-256, which the store checks on receipt: nothing to look at afterwards."""
CONNECT_TIMEOUT_SECONDS: Final = 5
READ_TIMEOUT_SECONDS: Final = 60
BOTO_RETRIES: Final = 4
"""boto3's own retries (standard mode, with backoff) before an error reaches the task."""
PERMANENT_CODES: Final = frozenset(
    {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled"}
)
"""Refusals no retry fixes. ``NoSuchBucket`` is not one: a store that restarts (MinIO, a new
volume) answers before its buckets are back, and jobs retry through it (``worker/tasks.py``)."""


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (``bucket``, ``some/prefix/``)."""
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise InvalidInput(f"storage URL {url!r} is not of the form s3://bucket/prefix")
    prefix = parsed.path.strip("/")
    return parsed.netloc, f"{prefix}/" if prefix else ""


def make_client(endpoint_url: str | None, region: str | None) -> S3Client:
    """A boto3 S3 client; credentials come from the usual AWS places (env, files, roles)."""
    config = botocore.config.Config(
        retries={"max_attempts": BOTO_RETRIES, "mode": "standard"},
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        signature_version="s3v4",
        s3={"addressing_style": "path" if endpoint_url else "auto"},
    )
    return boto3.client("s3", endpoint_url=endpoint_url, region_name=region, config=config)


OBJECT_MISSING: Final = frozenset({"404", "NoSuchKey", "NotFound"})
"""What the store answers for an object that is not there (a HEAD has no body, so only "404")."""
BUCKET_MISSING: Final = frozenset({"404", "NoSuchBucket"})


def error_code(error: Exception) -> str:
    """The store's error code (``AccessDenied``, ``NoSuchKey``, ``404``...); empty for an error
    that never reached the store."""
    if isinstance(error, botocore.exceptions.ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def _translate(error: Exception, what: str) -> Exception:
    if isinstance(error, botocore.exceptions.ClientError):
        code = error_code(error)
        if code in PERMANENT_CODES:
            return StorageRejected(
                f"storage refused {what}: {code}: {error.response['Error'].get('Message', '')}"
            )
        return StorageUnavailable(f"storage failed {what}: {code or error}")
    return StorageUnavailable(f"storage unreachable during {what}: {error}")


_ERRORS = (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)


class S3Storage:
    """Audio objects under ``prefix`` in one bucket."""

    def __init__(self, client: S3Client, bucket: str, prefix: str = "", presign_seconds: int = 0) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix
        self.presign_seconds = presign_seconds

    def object_key(self, key: str) -> str:
        return self.prefix + key

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist yet."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return
        except _ERRORS as error:
            if error_code(error) not in BUCKET_MISSING:
                raise _translate(error, f"checking bucket {self.bucket}") from None
        region = self.client.meta.region_name
        try:
            if region and region != "us-east-1":  # every other AWS region must be named
                self.client.create_bucket(
                    Bucket=self.bucket,
                    CreateBucketConfiguration={"LocationConstraint": region},  # type: ignore[typeddict-item]
                )
            else:
                self.client.create_bucket(Bucket=self.bucket)
        except _ERRORS as error:
            raise _translate(error, f"creating bucket {self.bucket}") from None

    def put(self, source: Path | IO[bytes], key: str, content_type: str, sha256: str) -> StoredObject:
        if isinstance(source, Path):
            with source.open("rb") as file:
                return self.put(file, key, content_type, sha256)
        object_key = self.object_key(key)
        location = f"s3://{self.bucket}/{object_key}"
        stored, what = StoredObject(location=location, url=self.url(object_key)), f"upload of {location}"
        size = source.seek(0, os.SEEK_END)
        source.seek(0)
        extra: dict[str, Any] = {"ContentType": content_type, "Metadata": {SHA256_METADATA: sha256}}
        try:
            if size <= SINGLE_REQUEST_BYTES:
                checksum = base64.b64encode(bytes.fromhex(sha256)).decode()
                self.client.put_object(
                    Bucket=self.bucket, Key=object_key, Body=source.read(), ChecksumSHA256=checksum, **extra
                )
                return stored
            extra["ChecksumAlgorithm"] = "SHA256"  # the store verifies every part against it on receipt
            self.client.upload_fileobj(source, self.bucket, object_key, ExtraArgs=extra)
            head = self.client.head_object(Bucket=self.bucket, Key=object_key)
        except _ERRORS as error:
            raise _translate(error, what) from None
        except boto3.exceptions.S3UploadFailedError as error:  # boto3 wraps the store's ClientError
            cause = error.__context__
            raise _translate(cause if isinstance(cause, Exception) else error, what) from None
        if head["ContentLength"] != size or head["Metadata"].get(SHA256_METADATA) != sha256:
            self._delete(object_key)
            raise StorageUnavailable(f"{what}: the stored object does not match what was sent")
        return stored

    def _delete(self, object_key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=object_key)
        except _ERRORS as error:
            log.warning("could not remove the mismatched s3://%s/%s: %s", self.bucket, object_key, error)

    def put_bytes(self, data: bytes, key: str, content_type: str) -> None:
        try:
            self.client.put_object(
                Bucket=self.bucket, Key=self.object_key(key), Body=data, ContentType=content_type
            )
        except _ERRORS as error:
            raise _translate(error, f"upload of {key}") from None

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.object_key(key))
        except _ERRORS as error:
            raise _translate(error, f"removal of {key}") from None

    def _body(self, key: str, first: int = 0, last: int | None = None) -> Any | None:
        """The object's body (bytes ``first`` to ``last``), not read yet; ``None`` if there is
        no such object."""
        span = f"bytes={first}-{'' if last is None else last}"
        try:
            if first == 0 and last is None:
                return self.client.get_object(Bucket=self.bucket, Key=self.object_key(key))["Body"]
            return self.client.get_object(Bucket=self.bucket, Key=self.object_key(key), Range=span)["Body"]
        except _ERRORS as error:
            if error_code(error) in OBJECT_MISSING:
                return None
            raise _translate(error, f"download of {key}") from None

    def get_bytes(self, key: str) -> bytes | None:
        body = self._body(key)
        return None if body is None else b"".join(self._chunks(body, key))

    def stream(self, key: str, first: int = 0, last: int | None = None) -> Iterator[bytes]:
        body = self._body(key, first, last)
        if body is None:
            raise JobNotFound(f"{key} is not in the storage (was it deleted?)")
        return self._chunks(body, key)

    def _chunks(self, body: Any, key: str) -> Iterator[bytes]:
        try:
            yield from body.iter_chunks(STREAM_CHUNK_BYTES)
        except _ERRORS as error:
            raise _translate(error, f"download of {key}") from None
        finally:
            body.close()

    def download_url(self, key: str) -> str | None:
        return self.url(self.object_key(key))

    def url(self, object_key: str) -> str:
        if self.presign_seconds > 0:
            return self.client.generate_presigned_url(
                "get_object",
                Params={"Bucket": self.bucket, "Key": object_key},
                ExpiresIn=self.presign_seconds,
            )
        return f"{self.client.meta.endpoint_url}/{self.bucket}/{object_key}"

    def exists(self, key: str, sha256: str | None = None) -> bool:
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self.object_key(key))
        except _ERRORS as error:
            if error_code(error) in OBJECT_MISSING:
                return False
            raise _translate(error, f"lookup of {key}") from None
        return sha256 is None or head["Metadata"].get(SHA256_METADATA) == sha256

    def fetch(self, key: str, target: Path) -> None:
        """Download to ``target`` through a temp file beside it, so a broken download never
        leaves a partial file under the final name."""
        with atomic_target(target) as partial:
            try:
                self.client.download_file(self.bucket, self.object_key(key), str(partial))
            except _ERRORS as error:
                raise _translate(error, f"download of {key}") from None
            except OSError as error:
                raise write_error(target, error) from None
