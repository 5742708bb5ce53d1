"""Storing an object, from a file or from an open one (a job's unnamed temp file): on a real S3
endpoint over HTTP, in one request or through boto3's transfer manager (which sends larger
objects in parts), and in a local folder."""

from __future__ import annotations

import hashlib
import io
import uuid
from pathlib import Path

import pytest

from tests.farm.conftest import BUCKET, CREDENTIALS
from ttsfarm.storage import LocalStorage
from ttsfarm.storage import s3 as s3_storage

DATA = bytes(range(256)) * 4096  # 1 MiB
DIGEST = hashlib.sha256(DATA).hexdigest()


@pytest.mark.parametrize("in_parts", [False, True], ids=["one request", "transfer manager"])
@pytest.mark.parametrize("from_file", [False, True], ids=["open file", "file"])
def test_s3_stores_what_it_is_given_with_its_digest(  # type: ignore[no-untyped-def]
    s3_endpoint: str, s3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_parts: bool, from_file: bool
) -> None:
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    if in_parts:
        monkeypatch.setattr(s3_storage, "SINGLE_REQUEST_BYTES", 2**16)
    storage = s3_storage.S3Storage(s3_storage.make_client(s3_endpoint, None), BUCKET, "objects/")
    source: Path | io.BytesIO = io.BytesIO(DATA)
    if from_file:
        source = tmp_path / "audio.flac"
        source.write_bytes(DATA)
    else:
        source.seek(12345)  # read from its start, wherever it stands
    key = f"{uuid.uuid4().hex}.flac"
    stored = storage.put(source, key, "audio/flac", DIGEST)
    assert stored.location == f"s3://{BUCKET}/objects/{key}" and stored.url and key in stored.url
    head = s3.head_object(Bucket=BUCKET, Key=f"objects/{key}")
    assert (head["ContentLength"], head["ContentType"]) == (len(DATA), "audio/flac")
    assert storage.get_bytes(key) == DATA and storage.exists(key, DIGEST)


def test_a_local_folder_stores_an_open_file_and_keeps_keys_inside(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path / "audio")
    buffer = io.BytesIO(DATA)
    buffer.seek(500)
    stored = storage.put(buffer, "book/part.flac", "audio/flac", DIGEST)
    assert Path(stored.location) == (tmp_path / "audio" / "book" / "part.flac").resolve()
    assert Path(stored.location).read_bytes() == DATA and storage.exists("book/part.flac", DIGEST)
    with pytest.raises(ValueError, match="leaves the storage folder"):
        storage.put(io.BytesIO(DATA), "../outside.flac", "audio/flac", DIGEST)
    assert not (tmp_path / "outside.flac").exists()
    assert storage.get_bytes("book/../book/part.flac") == DATA


def test_one_request_carries_the_digest_the_store_checks() -> None:
    """The store refuses a body whose SHA-256 is not the one sent (moto, the test endpoint,
    does not check it): the request must carry the digest as S3 spells it, base64 of its bytes."""
    import base64

    from botocore.stub import Stubber

    client = s3_storage.make_client("http://127.0.0.1:9", "us-east-1")
    expected = {
        "Bucket": BUCKET,
        "Key": "objects/a.wav",
        "Body": DATA,
        "ChecksumSHA256": base64.b64encode(hashlib.sha256(DATA).digest()).decode(),
        "ContentType": "audio/wav",
        "Metadata": {"sha256": DIGEST},
    }
    with Stubber(client) as stub:
        stub.add_response("put_object", {}, expected)
        s3_storage.S3Storage(client, BUCKET, "objects/").put(io.BytesIO(DATA), "a.wav", "audio/wav", DIGEST)
        stub.assert_no_pending_responses()
