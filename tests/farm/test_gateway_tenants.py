"""The gateway's front door for many users: a job is its key's alone, DELETE removes what a job
made, and no request leaves work for nobody (no worker up, a client that hangs up, a retry).
A real ``ttsfarm serve``, a real worker, real Redis and the S3 endpoint."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import io
import itertools
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import redis
import soundfile as sf

from gateway.errors import ApiError
from gateway.keys import KeyStore
from gateway.limits import FAILED_KEYS_PER_MINUTE
from gateway.quotas import Quotas
from synthesis.text import split_sentences
from tests.farm.conftest import BUCKET, REDIS_SERVER, WorkerProcess, farm_env, start_gateway, waiting
from tests.helpers_audio import decoded, energy_db
from ttsfarm.core.loudness import integrated_loudness
from ttsfarm.farm.registry import KEY_PREFIX

SENTENCE = "Every key keeps its own jobs."
LONG_INPUT = " ".join(["The farm reads this long passage aloud, one sentence after another."] * 55)
"""About 3,800 characters: minutes of work for a CPU worker, under the speech endpoint's limit."""
NO_WORKER_URL = f"{REDIS_SERVER}/14"  # a database no worker listens to


def keyed_client(gateway: str, redis_url: str) -> tuple[httpx.Client, str]:
    """A client with a new API key of its own, and the key's name."""
    name = f"tenant-{uuid.uuid4().hex[:8]}"
    key = KeyStore(redis_url).add(name)
    return httpx.Client(base_url=gateway, headers={"Authorization": f"Bearer {key}"}, timeout=60), name


def wait_done(api: httpx.Client, job_id: str, timeout: float = 120) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, object] = api.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.1)
    raise TimeoutError(f"job {job_id} did not finish")


def jobs_of(redis_url: str, owner: str) -> list[dict[str, object]]:
    """Every job record whose owner is ``owner``, read straight from Redis."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    found = []
    for key in client.scan_iter(f"{KEY_PREFIX}job:*"):
        record = {field: json.loads(value) for field, value in client.hgetall(key).items()}
        if record.get("owner") == owner:
            found.append({"id": key.rsplit(":", 1)[1], **record})
    return found


def test_a_job_is_its_keys_alone_and_delete_removes_it(
    gateway: str, redis_url: str, worker: WorkerProcess, s3: Any
) -> None:
    owner, owner_name = keyed_client(gateway, redis_url)
    other, _ = keyed_client(gateway, redis_url)
    with owner, other:
        made = owner.post("/v1/jobs", json={"text": SENTENCE, "idempotency_key": "k1"})
        assert made.status_code == 202, made.text
        job_id = made.json()["id"]
        for verb, path in (("GET", ""), ("GET", "/audio"), ("DELETE", "")):
            answer = other.request(verb, f"/v1/jobs/{job_id}{path}")
            assert answer.status_code == 404, (verb, path, answer.text)
            assert "unknown job id" in answer.json()["error"]["message"]
        assert wait_done(owner, job_id)["state"] == "succeeded"
        assert jobs_of(redis_url, owner_name)[0]["id"] == job_id
        audio_keys = [
            entry["Key"]
            for entry in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
            if job_id in entry["Key"]
        ]
        assert len(audio_keys) == 2  # the audio and its result file

        deleted = owner.delete(f"/v1/jobs/{job_id}")
        assert deleted.status_code == 200 and deleted.json()["deleted"] is True
        assert deleted.json()["state"] == "succeeded"
        listed = s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
        assert not [entry for entry in listed if job_id in entry["Key"]]
        assert owner.get(f"/v1/jobs/{job_id}").status_code == 404
        assert owner.delete(f"/v1/jobs/{job_id}").status_code == 404
        again = owner.post("/v1/jobs", json={"text": SENTENCE, "idempotency_key": "k1"})
        assert again.json()["id"] != job_id  # its key was freed with it


def test_a_text_with_nothing_to_speak_is_refused_at_the_door(gateway: str, redis_url: str) -> None:
    api, name = keyed_client(gateway, redis_url)
    with api:
        job = api.post("/v1/jobs", json={"text": "🙂🙂 ✨"})
        speech = api.post("/v1/audio/speech", json={"model": "tts-1", "voice": "alloy", "input": "* * *"})
    assert job.status_code == 400 and "nothing to speak" in job.json()["error"]["message"]
    assert speech.status_code == 400 and "input has nothing to speak" in speech.json()["error"]["message"]
    assert jobs_of(redis_url, name) == []


def test_speech_retries_with_one_idempotency_key_are_one_job(
    gateway: str, redis_url: str, worker: WorkerProcess
) -> None:
    api, name = keyed_client(gateway, redis_url)
    speech = {"model": "tts-1", "voice": "alloy", "input": SENTENCE, "response_format": "wav"}
    with api:
        first = api.post("/v1/audio/speech", json=speech, headers={"Idempotency-Key": "retry-1"})
        again = api.post("/v1/audio/speech", json=speech, headers={"Idempotency-Key": "retry-1"})
        other = api.post("/v1/audio/speech", json=speech, headers={"Idempotency-Key": "retry-2"})
    assert first.status_code == again.status_code == other.status_code == 200, first.text
    assert first.headers["x-job-id"] == again.headers["x-job-id"] != other.headers["x-job-id"]
    assert first.content == again.content
    assert len(jobs_of(redis_url, name)) == 2


def test_a_client_that_hangs_up_cancels_its_speech_job(
    gateway: str, redis_url: str, worker: WorkerProcess
) -> None:
    api, name = keyed_client(gateway, redis_url)
    speech = {"model": "tts-1", "voice": "alloy", "input": LONG_INPUT}
    with api, pytest.raises(httpx.ReadTimeout):
        api.post("/v1/audio/speech", json=speech, timeout=3)
    deadline = time.monotonic() + 60
    while (jobs := jobs_of(redis_url, name)) and jobs[0].get("state") != "cancelled":
        assert time.monotonic() < deadline, f"the abandoned job never stopped: {jobs}"
        time.sleep(0.2)
    assert len(jobs) == 1 and jobs[0]["cancel_requested"] is True


@pytest.fixture(scope="module")
def gateway_without_workers(s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    redis.Redis.from_url(NO_WORKER_URL).flushdb()
    for process in start_gateway(tmp_path_factory, farm_env(NO_WORKER_URL, s3_endpoint)):
        yield process.url


def test_speech_is_refused_at_once_when_no_worker_is_up(gateway_without_workers: str) -> None:
    api, name = keyed_client(gateway_without_workers, NO_WORKER_URL)
    with api:
        started = time.monotonic()
        answer = api.post("/v1/audio/speech", json={"model": "tts-1", "voice": "alloy", "input": SENTENCE})
        took = time.monotonic() - started
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "no_workers" and int(answer.headers["retry-after"]) >= 1
    assert took < 10  # one ping of the workers, not the speech timeout (120 s)
    assert jobs_of(NO_WORKER_URL, name) == []  # nothing queued for nobody


def test_wrong_keys_are_rate_limited_per_address(
    s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    url = f"{REDIS_SERVER}/15"  # its own database: the block below holds for every client here
    redis.Redis.from_url(url).flushdb()
    right = KeyStore(url).add("right")
    for process in start_gateway(tmp_path_factory, farm_env(url, s3_endpoint)):
        wrong = {"Authorization": "Bearer tfk_00000000_" + "x" * 43}
        if time.time() % 60 > 50:  # the requests below must fall in one minute's window
            time.sleep(60.5 - time.time() % 60)
        with httpx.Client(base_url=process.url, timeout=30) as api:
            tries = range(FAILED_KEYS_PER_MINUTE)
            refused = [api.get("/v1/voices", headers=wrong).status_code for _ in tries]
            blocked = api.get("/v1/voices", headers=wrong)
            also_right = api.get("/v1/voices", headers={"Authorization": f"Bearer {right}"})
    assert refused == [401] * FAILED_KEYS_PER_MINUTE
    assert blocked.status_code == 429 and blocked.json()["error"]["code"] == "too_many_wrong_keys"
    assert 1 <= int(blocked.headers["retry-after"]) <= 60
    assert also_right.status_code == 429  # the address is held off before any key is looked at


def test_audio_is_served_by_byte_range(gateway: str, redis_url: str, worker: WorkerProcess) -> None:
    api, _ = keyed_client(gateway, redis_url)
    with api:
        job_id = api.post("/v1/jobs", json={"text": SENTENCE}).json()["id"]
        assert wait_done(api, job_id)["state"] == "succeeded"
        path = f"/v1/jobs/{job_id}/audio"
        whole = api.get(path)
        size = len(whole.content)
        parts = {
            span: api.get(path, headers={"Range": span})
            for span in ("bytes=0-99", "bytes=100-", "bytes=-50", f"bytes=10-{size * 2}")
        }
        past = api.get(path, headers={"Range": f"bytes={size}-"})
    assert whole.status_code == 200 and whole.headers["accept-ranges"] == "bytes"
    expected = {
        "bytes=0-99": (0, 99),
        "bytes=100-": (100, size - 1),
        "bytes=-50": (size - 50, size - 1),
        f"bytes=10-{size * 2}": (10, size - 1),
    }
    for span, (first, last) in expected.items():
        answer = parts[span]
        assert answer.status_code == 206, (span, answer.text)
        assert answer.content == whole.content[first : last + 1]
        assert answer.headers["content-range"] == f"bytes {first}-{last}/{size}"
    assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{size}"


def test_a_body_is_not_read_before_its_key_is_checked(gateway: str) -> None:
    """A request that declares a 1 MB body and has no key is answered 401 before it sends one
    byte of it: a caller without a key cannot make the gateway hold what it sends."""
    host, port = gateway.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(
            b"POST /v1/jobs HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n"
        )
        answer = ""
        while "missing API key" not in answer and len(answer) < 65536:  # head and body may part
            block = connection.recv(4096)
            if not block:
                break
            answer += block.decode("latin-1")
    assert answer.startswith("HTTP/1.1 401"), answer
    assert "missing API key" in answer


def test_a_body_that_trickles_in_is_cut_off_at_its_deadline(
    s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    url = f"{REDIS_SERVER}/8"  # a database no worker reads: nothing is ever spoken here
    key = KeyStore(url).add(f"slow-{uuid.uuid4().hex[:8]}")
    env = farm_env(url, s3_endpoint, TTSFARM_GATEWAY_BODY_SECONDS="2")
    for process in start_gateway(tmp_path_factory, env):
        host, port = process.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as connection:
            connection.sendall(
                f"POST /v1/jobs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
                'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"text": '.encode()
            )
            started = time.monotonic()
            answer = b""
            while b"send it at once" not in answer and (block := connection.recv(4096)):
                answer += block
            took = time.monotonic() - started
        with httpx.Client(base_url=process.url, headers={"Authorization": f"Bearer {key}"}) as api:
            still_up = api.get("/v1/voices").status_code
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"did not arrive within 2 s" in answer
    assert 1.5 < took < 15, took
    assert still_up == 200
    assert waiting(redis.Redis.from_url(url), "ttsfarm") == []  # nothing was queued


def test_captions_fall_where_the_audio_speaks(gateway: str, redis_url: str, worker: WorkerProcess) -> None:
    text = "The first sentence is short. The second one runs a little longer than that. A third."
    api, _ = keyed_client(gateway, redis_url)
    with api:
        job_id = api.post("/v1/jobs", json={"text": text, "format": "wav"}).json()["id"]
        assert wait_done(api, job_id)["state"] == "succeeded"
        audio, rate = sf.read(io.BytesIO(api.get(f"/v1/jobs/{job_id}/audio").content), dtype="float32")
        timed = api.get(f"/v1/jobs/{job_id}/captions", params={"format": "json"}).json()
        as_srt = api.get(f"/v1/jobs/{job_id}/captions")
        as_vtt = api.get(f"/v1/jobs/{job_id}/captions", params={"format": "vtt"})
        word_vtt = api.get(f"/v1/jobs/{job_id}/captions", params={"format": "vtt", "granularity": "word"})
        unknown = api.get(f"/v1/jobs/{job_id}/captions", params={"format": "ass"})
        unknown_granularity = api.get(f"/v1/jobs/{job_id}/captions", params={"granularity": "syllable"})
    cues, words = timed["segments"], timed["words"]
    assert [cue["text"] for cue in cues] == split_sentences(text)
    assert [word["word"] for word in words] == text.split()
    assert as_srt.headers["content-type"].startswith("application/x-subrip") and as_srt.text.count("-->") == 3
    assert as_vtt.text.startswith("WEBVTT") and as_vtt.headers["content-type"].startswith("text/vtt")
    assert word_vtt.text.count("-->") == len(text.split())
    assert unknown.status_code == 400 and unknown_granularity.status_code == 400
    assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(words))
    inside = [any(c["start"] <= w["start"] < w["end"] <= c["end"] + 0.001 for c in cues) for w in words]
    assert all(inside), inside  # each word within its sentence

    def loudness(start: float, end: float) -> float:
        window = audio[int(start * rate) : int(end * rate)]
        return float(np.sqrt(np.mean(window**2))) if len(window) else 0.0

    assert cues[-1]["end"] <= len(audio) / rate + 0.01
    for cue in cues:
        assert loudness(cue["start"], cue["end"]) > 0.02, cue  # speech inside each cue
    for before, after in itertools.pairwise(cues):
        assert before["end"] <= after["start"]
        gap = (before["end"] + after["start"]) / 2
        assert loudness(gap - 0.05, gap + 0.05) < 0.005, (before, after)  # the pause between them


STREAMED = " ".join(
    [
        "The first sentence comes out of the farm while the rest are still being made.",
        "A listener hears it at once, and the others follow one after another.",
        "Nothing waits for the end of the text.",
    ]
    * 12
)
"""36 sentences, about 2,700 characters: several batches of a CPU worker's 8 segments."""


def same_audio(streamed: bytes, stored: bytes) -> bool:
    """The same samples, to one step of 16 bits (libsndfile rounds a few samples otherwise)."""
    ours, theirs = (np.frombuffer(pcm, dtype="<i2").astype(np.int32) for pcm in (streamed, stored))
    return len(ours) == len(theirs) and int(np.abs(ours - theirs).max(initial=0)) <= 1


def stored_pcm(api: httpx.Client, job_id: str) -> bytes:
    """The job's stored WAV as 16-bit PCM, to compare a stream with."""
    samples, _ = sf.read(io.BytesIO(api.get(f"/v1/jobs/{job_id}/audio").content), dtype="int16")
    return bytes(samples.tobytes())


def streamed(api: httpx.Client, body: dict[str, object]) -> tuple[httpx.Headers, list[bytes], str]:
    """A speech answer read as it streams: its headers, its blocks, and the job's state when the
    first block came."""
    blocks: list[bytes] = []
    with api.stream("POST", "/v1/audio/speech", json=body) as answer:
        assert answer.status_code == 200, answer.read()
        job_id = answer.headers["x-job-id"]
        for block in answer.iter_raw():
            if not blocks:
                first_state = api.get(f"/v1/jobs/{job_id}").json()["state"]
            blocks.append(block)
    return answer.headers, blocks, first_state


def test_speech_streams_pcm_as_it_is_made(gateway: str, redis_url: str, worker: WorkerProcess) -> None:
    api, _ = keyed_client(gateway, redis_url)
    body = {"model": "tts-1", "voice": "alloy", "input": STREAMED, "response_format": "pcm"}
    with api:
        headers, blocks, first_state = streamed(api, body)
        assert headers["content-type"] == "audio/pcm" and headers["x-sample-rate"] == "22050"
        job_id = headers["x-job-id"]
        assert wait_done(api, job_id)["state"] == "succeeded"
        assert same_audio(b"".join(blocks), stored_pcm(api, job_id))
    assert first_state == "running"  # audio came before the job was done
    assert len(blocks) > 1  # and kept coming as it was made


def test_speech_streams_server_sent_events_and_a_wav(
    gateway: str, redis_url: str, worker: WorkerProcess
) -> None:
    api, _ = keyed_client(gateway, redis_url)
    body = {"model": "tts-1", "voice": "alloy", "input": SENTENCE, "response_format": "pcm"}
    with api:
        events = api.post("/v1/audio/speech", json={**body, "stream_format": "sse"})
        wav = api.post("/v1/audio/speech", json={**body, "response_format": "wav", "stream_format": "audio"})
        mp3 = {**body, "response_format": "mp3", "stream_format": "sse"}
        mp3_events = api.post("/v1/audio/speech", json=mp3)
        found = [json.loads(line[len("data: ") :]) for line in events.text.splitlines() if line]
        pcm = b"".join(base64.b64decode(event["audio"]) for event in found[:-1])
        assert [event["type"] for event in found] == ["speech.audio.delta"] * (len(found) - 1) + [
            "speech.audio.done"
        ]
        assert events.headers["content-type"].startswith("text/event-stream")
        assert same_audio(pcm, stored_pcm(api, events.headers["x-job-id"]))
        samples, rate = sf.read(io.BytesIO(wav.content), dtype="int16")
        assert rate == 22050 and same_audio(samples.tobytes(), stored_pcm(api, wav.headers["x-job-id"]))
    assert mp3_events.status_code == 400 and "set response_format to pcm" in mp3_events.text


ENCODED_TYPES = {"mp3": "audio/mpeg", "opus": "audio/ogg; codecs=opus", "aac": "audio/aac"}


def test_speech_streams_mp3_opus_and_aac_as_they_are_made(
    gateway: str, redis_url: str, worker: WorkerProcess
) -> None:
    """Each encoded on its way out of the gateway: the stored voice-level audio, to the frame."""
    api, _ = keyed_client(gateway, redis_url)
    body = {"model": "tts-1", "voice": "alloy", "input": STREAMED, "stream_format": "audio"}
    with api:
        headers, blocks, first_state = streamed(api, {**body, "response_format": "opus"})
        answers = {"opus": (headers, b"".join(blocks))}
        short = {**body, "input": SENTENCE * 2}
        for codec in ("mp3", "aac"):
            whole = api.post("/v1/audio/speech", json={**short, "response_format": codec})
            assert whole.status_code == 200, whole.text
            answers[codec] = (whole.headers, whole.content)
        assert first_state == "running"  # audio came before the job was done
        for codec, (headers, content) in answers.items():
            assert headers["content-type"] == ENCODED_TYPES[codec]
            assert wait_done(api, headers["x-job-id"])["state"] == "succeeded"
            stored = np.frombuffer(stored_pcm(api, headers["x-job-id"]), dtype="<i2") / 32768
            back = decoded(content, 22050)
            assert 0 <= len(back) - len(stored) < 4 * 1152, (codec, len(back), len(stored))
            assert energy_db(back) == pytest.approx(energy_db(stored), abs=0.5), codec


def test_opus_and_aac_come_whole_and_mastered(gateway: str, redis_url: str, worker: WorkerProcess) -> None:
    """Without ``stream_format`` the job is mastered (-18 LUFS, as synth does) and encoded on its
    way out: the formats a job does not store are spoken as the others are."""
    api, _ = keyed_client(gateway, redis_url)
    body = {"model": "tts-1", "voice": "alloy", "input": SENTENCE * 3}
    with api:
        for codec in ("opus", "aac"):
            answer = api.post("/v1/audio/speech", json={**body, "response_format": codec})
            assert answer.status_code == 200, answer.text
            assert answer.headers["content-type"] == ENCODED_TYPES[codec]
            assert answer.headers["content-disposition"].endswith(f'.{codec}"')
            back = decoded(answer.content, 22050)
            duration = float(answer.headers["x-audio-duration"])
            assert len(back) / 22050 == pytest.approx(duration, abs=0.2), codec
            assert integrated_loudness(back, 22050) == pytest.approx(-18.0, abs=1.0), codec


def test_speech_is_mastered_as_synth_masters_it(gateway: str, redis_url: str, worker: WorkerProcess) -> None:
    api, _ = keyed_client(gateway, redis_url)
    body = {"model": "tts-1", "voice": "alloy", "input": SENTENCE * 3, "response_format": "wav"}
    with api:
        mastered = api.post("/v1/audio/speech", json=body)
        own = api.post("/v1/audio/speech", json={**body, "loudness": None})
        quiet = api.post("/v1/audio/speech", json={**body, "loudness": -23})
    levels = {}
    for name, answer in (("mastered", mastered), ("own", own), ("quiet", quiet)):
        assert answer.status_code == 200, answer.text
        samples, rate = sf.read(io.BytesIO(answer.content), dtype="float32")
        levels[name] = integrated_loudness(samples, rate)
    assert levels["mastered"] == pytest.approx(-18.0, abs=0.5)
    assert levels["quiet"] == pytest.approx(-23.0, abs=0.5)
    assert levels["own"] < -21  # joe's own level: about -24 to -27 LUFS


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_oversized_headers_are_cut_off_and_memory_stays_flat(
    redis_url: str, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Fifty clients each sending an unfinished 2 MB header line: each is cut off at the head's
    limit, the gateway's memory does not grow with what they send, and it still answers."""
    for process in start_gateway(tmp_path_factory, farm_env(redis_url, s3_endpoint)):
        host, port = "127.0.0.1", process.port
        before = rss_mib(process.process.pid)
        cut_off = 0
        for _ in range(50):
            with socket.create_connection((host, port), timeout=10) as connection:
                connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: gateway\r\nX-Filler: ")
                try:
                    for _ in range(64):
                        connection.sendall(b"a" * 32 * 1024)
                except (BrokenPipeError, ConnectionResetError):
                    cut_off += 1
                    continue
                connection.settimeout(10)
                try:
                    answer = connection.recv(1024)
                except ConnectionResetError:
                    answer = b""
                cut_off += answer == b"" or answer.startswith(b"HTTP/1.1 4")
        grown = rss_mib(process.process.pid) - before
        assert httpx.get(f"{process.url}/healthz", timeout=10).status_code == 200
    assert cut_off == 50
    assert grown < 30, f"the gateway grew by {grown:.0f} MiB"


def test_one_key_cannot_use_up_what_all_keys_share(
    s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Jobs in flight and characters a day are counted per key: a key past its share gets 429,
    and every other key goes on. (No worker reads this database: jobs stay queued.)"""
    url = f"{REDIS_SERVER}/10"  # a database of its own, which no worker reads
    redis.Redis.from_url(url).flushdb()
    env = farm_env(url, s3_endpoint, TTSFARM_GATEWAY_KEY_JOBS="2", TTSFARM_GATEWAY_KEY_CHARS_PER_DAY="200")
    for process in start_gateway(tmp_path_factory, env):
        greedy, _ = keyed_client(process.url, url)
        other, _ = keyed_client(process.url, url)
        wordy, _ = keyed_client(process.url, url)
        with greedy, other, wordy:
            first, second, third = (greedy.post("/v1/jobs", json={"text": f"Job {n}."}) for n in range(3))
            assert [first.status_code, second.status_code] == [202, 202]
            assert third.status_code == 429 and third.json()["error"]["code"] == "too_many_jobs"
            assert other.post("/v1/jobs", json={"text": "Mine."}).status_code == 202
            assert greedy.delete(f"/v1/jobs/{first.json()['id']}").status_code == 200  # cancelled
            assert greedy.post("/v1/jobs", json={"text": "Again."}).status_code == 202

            assert wordy.post("/v1/jobs", json={"text": "a" * 150}).status_code == 202
            over = wordy.post("/v1/jobs", json={"text": "b" * 100})
            assert over.status_code == 429 and over.json()["error"]["code"] == "daily_characters"
            assert 0 < int(over.headers["retry-after"]) <= 24 * 3600
            assert wordy.post("/v1/jobs", json={"text": "c" * 40}).status_code == 202  # what is left


def test_one_key_cannot_hold_every_speech_wait(redis_url: str) -> None:
    quotas = Quotas(redis_url, jobs_in_flight=0, chars_per_day=0, speech_waits=2)
    with quotas.speech_wait("greedy"), quotas.speech_wait("greedy"):
        with pytest.raises(ApiError) as refused, quotas.speech_wait("greedy"):
            pass
        with quotas.speech_wait("other"):
            pass
    assert refused.value.status == 503 and "2 speech requests waiting" in refused.value.message
    with quotas.speech_wait("greedy"):  # let go when they ended
        pass


class Receiver(http.server.ThreadingHTTPServer):
    """A real HTTP endpoint for callbacks: answers 500 to the first ``failures`` posts, then 204."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.posts: list[tuple[float, dict[str, str], bytes]] = []
        self.arrived = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append((time.monotonic(), dict(self.headers), body))
                failing = len(receiver.posts) <= receiver.failures
                self.send_response(500 if failing else 204)
                self.end_headers()
                if not failing:
                    receiver.arrived.set()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


def test_a_job_calls_back_signed_and_retried(gateway: str, redis_url: str, worker: WorkerProcess) -> None:
    receiver = Receiver(failures=1)
    api, name = keyed_client(gateway, redis_url)
    try:
        with api:
            secret = api.get("/v1/keys/me").json()["callback_secret"]
            made = api.post("/v1/jobs", json={"text": SENTENCE, "callback_url": receiver.url})
            assert made.status_code == 202, made.text
            refused = api.post("/v1/jobs", json={"text": SENTENCE, "callback_url": "ftp://example.com/x"})
            assert receiver.arrived.wait(120), "no callback arrived"
    finally:
        receiver.shutdown()
        receiver.server_close()
    assert refused.status_code == 400 and "http or https URL" in refused.json()["error"]["message"]
    assert len(receiver.posts) == 2  # refused once, then delivered
    (first_at, _, _), (second_at, headers, body) = receiver.posts
    assert second_at - first_at >= 0.9  # tried again after a second
    job = json.loads(body)
    assert job["id"] == made.json()["id"] == headers["X-Ttsfarm-Job-Id"] and job["state"] == "succeeded"
    stamp = headers["X-Ttsfarm-Timestamp"]
    expected = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    assert headers["X-Ttsfarm-Signature"] == f"sha256={expected}"
    assert abs(time.time() - int(stamp)) < 120
    assert KeyStore(redis_url).callback_secret(name) == secret
