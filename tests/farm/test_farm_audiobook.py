"""`ttsfarm audiobook` on the farm: parts run as jobs on the worker, the book lands in S3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.farm.conftest import BUCKET, PREFIX, WorkerProcess, farm_env

BOOK = """chapter,title,text
1,Arrival,"The ferry came in at noon. Nobody was waiting."
2,The Mill,"The mill had not turned in years, but it looked wonderful in the evening light."
3,Leaving,"In the morning, the ferry left again."
"""


def test_audiobook_on_the_farm(
    redis_url: str, s3_endpoint: str, worker: WorkerProcess, s3, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "book.csv").write_text(BOOK, encoding="utf-8")
    env = farm_env(redis_url, s3_endpoint)

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "ttsfarm", "audiobook", "book.csv", "-o", "out", "-q"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    first = run()
    assert first.returncode == 0, first.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [c["title"] for c in manifest["chapters"]] == ["Arrival", "The Mill", "Leaving"]
    prefix = f"{PREFIX}/books/{manifest['book_key']}/"
    keys = {o["Key"][len(prefix) :] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]}
    assert "manifest.json" in keys
    assert {manifest["files"][kind]["file"] for kind in ("m4b", "mp3", "srt")} <= keys
    assert len([k for k in keys if k.endswith(".flac")]) == 3
    # each chapter was finished on the worker, as a finish job: its pieces are beside its result
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{PREFIX}/")
    stored = {o["Key"] for page in pages for o in page.get("Contents", [])}
    results = [
        json.loads(s3.get_object(Bucket=BUCKET, Key=k)["Body"].read()) for k in stored if k.endswith(".json")
    ]
    finished = [r for r in results if r.get("pieces")]  # other tests' jobs share the bucket
    assert len(finished) == 3
    assert all(set(r["timings"]) >= {"fetch", "master", "encode", "store"} for r in finished)
    pieces = [p["location"].removeprefix(f"s3://{BUCKET}/") for r in finished for p in r["pieces"]]
    assert len(pieces) == 6 and set(pieces) <= stored

    second = run()
    assert second.returncode == 0, second.stderr
    assert "finished already" in second.stdout
