"""The HTTP gateway end to end: `ttsfarm serve` in its own process, spoken to over HTTP with httpx
and OpenAI's own client, in front of real Redis, a real worker and the S3 endpoint."""

from __future__ import annotations

import hashlib
import io
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import soundfile as sf
from click.testing import CliRunner

from gateway.keys import KeyStore
from tests.farm.conftest import (
    REDIS_SERVER,
    GatewayProcess,
    WorkerProcess,
    farm_env,
    free_port,
    new_key,
    start_gateway,
    wait_for,
)
from ttsfarm.cli import main
from ttsfarm.core.jobs import MAX_TEXT_CHARS, JobResult, audio_key
from ttsfarm.core.loudness import integrated_loudness
from ttsfarm.farm.registry import JobRegistry

SENTENCE = "The gateway speaks through the farm."


@pytest.fixture(scope="module")
def api(gateway: str, redis_url: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {new_key(redis_url)}"}
    with httpx.Client(base_url=gateway, headers=headers, timeout=30) as client:
        yield client


def wait_done(api: httpx.Client, job_id: str, timeout: float = 120) -> dict[str, Any]:
    states: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = api.get(f"/v1/jobs/{job_id}").json()
        states.append(job["state"])
        if job["state"] in ("succeeded", "failed", "cancelled"):
            job["seen"] = states
            return job  # type: ignore[no-any-return]
        time.sleep(0.1)
    raise TimeoutError(f"job {job_id} still {states[-1]}")


def test_job_cycle_over_http(api: httpx.Client, worker: WorkerProcess, redis_url: str) -> None:
    body = {
        "text": f"{SENTENCE} Twice over, to make two segments.",
        "format": "mp3",
        "loudness": -18,
        "idempotency_key": "a1",
    }
    submitted = api.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    assert submitted.headers["location"] == f"/v1/jobs/{job_id}"
    assert submitted.json()["state"] in ("queued", "running")

    # The same idempotency key again is the same job; under another API key it is another job.
    assert api.post("/v1/jobs", json=body).json()["id"] == job_id
    by_header = api.post(
        "/v1/jobs", json={**body, "idempotency_key": None}, headers={"Idempotency-Key": "a1"}
    )
    assert by_header.json()["id"] == job_id
    other = {"Authorization": f"Bearer {new_key(redis_url)}"}
    assert api.post("/v1/jobs", json=body, headers=other).json()["id"] != job_id

    job = wait_done(api, job_id)
    assert job["state"] == "succeeded", job
    result = job["result"]
    assert result["audio_url"] == f"/v1/jobs/{job_id}/audio" and len(result["segments"]) == 2
    assert "s3://" not in str(job) and "X-Amz" not in str(job)  # storage stays inside the farm

    audio = api.get(result["audio_url"])
    assert audio.status_code == 200 and audio.headers["content-type"] == "audio/mpeg"
    assert hashlib.sha256(audio.content).hexdigest() == result["sha256"] == audio.headers["etag"].strip('"')
    samples, rate = sf.read(io.BytesIO(audio.content), dtype="float32")
    assert rate == result["sample_rate"] == 22050
    assert abs(len(samples) / rate - result["duration"]) < 0.1
    assert integrated_loudness(samples, rate) == pytest.approx(-18.0, abs=0.5)  # mastered, then mp3


def test_cancel_and_unknown_ids(api: httpx.Client, worker: WorkerProcess) -> None:
    job_id = api.post("/v1/jobs", json={"text": SENTENCE * 40}).json()["id"]
    cancelled = api.delete(f"/v1/jobs/{job_id}")
    assert cancelled.status_code == 200
    assert wait_done(api, job_id)["state"] == "cancelled"
    assert api.get(f"/v1/jobs/{job_id}/audio").status_code == 409

    for path in ("/v1/jobs/" + "0" * 32, "/v1/jobs/not-an-id", "/v1/jobs/" + "0" * 32 + "/audio"):
        answer = api.get(path)
        assert answer.status_code == 404 and "unknown job id" in answer.json()["error"]["message"]
    assert api.delete("/v1/jobs/" + "f" * 32).status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({}, 400, "text: Field required"),
        ({"text": 5}, 400, "text: Input should be a valid string"),
        ({"text": "  "}, 400, "the text is empty"),
        ({"text": "hi", "voice": "/etc/voice.onnx"}, 400, "unknown voice '/etc/voice.onnx': use one of joe"),
        ({"text": "hi", "speaker": 2}, 400, "single speaker"),
        ({"text": "hi", "format": "aiff"}, 400, "unknown audio format 'aiff'"),
        ({"text": "hi", "length_scale": 50}, 400, "length scale must be between 0.1 and 10"),
        ({"text": "hi", "loudness": -5}, 400, "the loudness must be a number of LUFS from -40 to -10"),
        ({"text": "hi", "loudness": True}, 400, "loudness: Input should be a valid number"),
        ({"text": "hi", "noise_scale": False}, 400, "noise_scale: Input should be a valid number"),
        ({"text": "hi", "length_scale": "1.5"}, 400, "length_scale: Input should be a valid number"),
        ({"text": "hi", "speaker": True}, 400, "speaker: Input should be a valid integer"),
        ({"text": "hi", "colour": "red"}, 400, "colour: Extra inputs are not permitted"),
        ({"text": "a" * (MAX_TEXT_CHARS + 1)}, 413, "over the limit of 200,000"),
    ],
)
def test_bad_bodies(api: httpx.Client, body: dict[str, Any], status: int, message: str) -> None:
    answer = api.post("/v1/jobs", json=body)
    assert answer.status_code == status
    assert message in answer.json()["error"]["message"]


def test_errors_quote_long_values_short_and_never_redirect_by_host(api: httpx.Client) -> None:
    """A 10,000-character voice name comes back as its start and its length; a trailing slash is a
    404, not a redirect to wherever the request's Host header points."""
    answer = api.post("/v1/jobs", json={"text": "hi", "voice": "x" * 10_000})
    message = answer.json()["error"]["message"]
    assert answer.status_code == 400 and len(message) < 300, message
    assert "'" + "x" * 60 + "...' (10,000 characters)" in message and "use one of joe" in message
    slash = api.get("/v1/jobs/", headers={"Host": "attacker.example"})
    assert slash.status_code == 404 and "location" not in slash.headers
    assert "attacker.example" not in slash.text


def test_malformed_and_oversize_bodies(api: httpx.Client) -> None:
    bad_json = api.post("/v1/jobs", content=b'{"text": ', headers={"Content-Type": "application/json"})
    assert bad_json.status_code == 400 and "not valid JSON" in bad_json.json()["error"]["message"]
    not_object = api.post("/v1/jobs", json=["text"])
    assert not_object.status_code == 400 and "JSON object" in not_object.json()["error"]["message"]
    huge = b'{"text": "' + b"a" * (3 * 1024 * 1024) + b'"}'
    declared = api.post("/v1/jobs", content=huge, headers={"Content-Type": "application/json"})
    streamed = api.post("/v1/jobs", content=iter([huge[:1000], huge[1000:]]))  # chunked, no length
    for answer in (declared, streamed):
        assert answer.status_code == 413 and "over 2,097,152 bytes" in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/v1/jobs", rb'{"text": "x \ud800 y"}', "the text has a lone surrogate (U+D800) at character 3, "),
        (
            "/v1/jobs",
            rb'{"text": "Hi.", "idempotency_key": "k\udce9"}',
            "idempotency_key has a lone surrogate (U+DCE9) at character 2, ",
        ),
        ("/v1/jobs", rb'{"text": "Hi.", "voice": "jo\ud800"}', "unknown voice 'jo\\ud800'"),
        (
            "/v1/audio/speech",
            rb'{"model": "tts-1", "voice": "alloy", "input": "x \ud800 y"}',
            "input has a lone surrogate (U+D800) at character 3, ",
        ),
    ],
)
def test_text_that_is_not_unicode_is_refused_with_its_place(
    api: httpx.Client, path: str, body: bytes, message: str
) -> None:
    """A lone surrogate, as a JSON escape sends it (half of an emoji cut in two): 400, not 500."""
    answer = api.post(path, content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert message in answer.json()["error"]["message"]


def test_keys_are_required_and_revocable(gateway: str, redis_url: str, s3_endpoint: str) -> None:
    env = farm_env(redis_url, s3_endpoint)
    runner = CliRunner()
    added = runner.invoke(main, ["keys", "add", "revokable"], env=env)
    assert added.exit_code == 0, added.output
    key = added.stdout.strip()
    assert key.startswith("tfk_")
    again = runner.invoke(main, ["keys", "add", "revokable"], env=env)
    assert again.exit_code == 1 and "there is a key called 'revokable' already" in again.output

    listed = runner.invoke(main, ["keys", "list"], env=env).output
    assert "revokable" in listed and key not in listed
    stored = redis.Redis.from_url(redis_url)
    secret = key.split("_", 2)[2].encode()  # tfk_<id>_<secret>: the secret itself may hold '_'
    assert len(secret) == 43  # all of it: a tail after an '_' inside it could be one character
    kept = [stored.dump(k) or b"" for k in stored.scan_iter()]
    assert any(b"revokable" in value for value in kept) and not any(secret in value for value in kept)

    def voices(headers: dict[str, str]) -> httpx.Response:
        return httpx.get(f"{gateway}/v1/voices", headers=headers)

    assert voices({"Authorization": f"Bearer {key}"}).status_code == 200
    missing = voices({})
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert "missing API key" in missing.json()["error"]["message"]
    for wrong in (key[:-1] + ("A" if key[-1] != "A" else "B"), "tfk_00000000_" + "x" * 43, "nonsense"):
        answer = voices({"Authorization": f"Bearer {wrong}"})
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "invalid_api_key"

    revoked = runner.invoke(main, ["keys", "revoke", "revokable"], env=env)
    assert revoked.exit_code == 0, revoked.output
    assert voices({"Authorization": f"Bearer {key}"}).status_code == 401
    gone = runner.invoke(main, ["keys", "revoke", "revokable"], env=env)
    assert gone.exit_code == 1 and "no key called 'revokable'" in gone.output


def test_serve_and_keys_need_a_broker() -> None:
    for command in (["serve"], ["keys", "list"]):
        answer = CliRunner().invoke(main, command, env={"TTSFARM_BROKER_URL": ""})
        assert answer.exit_code == 1 and "no broker configured: set TTSFARM_BROKER_URL" in answer.output


def test_openai_client_speaks(gateway: str, redis_url: str, worker: WorkerProcess) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{gateway}/v1", api_key=new_key(redis_url), max_retries=0)
    assert {model.id for model in client.models.list()} >= {"tts-1", "tts-1-hd"}
    assert client.models.retrieve("gpt-4o-mini-tts-2025-03-20").id == "gpt-4o-mini-tts-2025-03-20"
    with pytest.raises(openai.NotFoundError, match="unknown model 'tts-2'"):
        client.models.retrieve("tts-2")
    dated = client.audio.speech.create(
        model="tts-1-1106", voice="alloy", input=SENTENCE, response_format="wav"
    )
    assert dated.content[:4] == b"RIFF"

    normal = client.audio.speech.create(model="tts-1", voice="alloy", input=SENTENCE, response_format="wav")
    fast = client.audio.speech.create(
        model="tts-1", voice="joe", input=SENTENCE, response_format="flac", speed=2.0
    )
    normal_samples, rate = sf.read(io.BytesIO(normal.content))
    fast_samples, _ = sf.read(io.BytesIO(fast.content))
    assert normal.content[:4] == b"RIFF" and rate == 22050 and len(normal_samples) / rate > 1.0
    # Speed 2 is about half as long. Durations are drawn with noise (the voice's noise_w), so a
    # sentence this short varies by 10-15% from run to run: 0.68 was seen.
    assert 0.35 < len(fast_samples) / len(normal_samples) < 0.75

    with pytest.raises(openai.APIStatusError) as too_long:
        client.audio.speech.create(model="tts-1", voice="alloy", input="word " * 1000)
    assert too_long.value.status_code == 413 and "POST /v1/jobs" in too_long.value.message
    opus = client.audio.speech.create(model="tts-1", voice="alloy", input=SENTENCE, response_format="opus")
    assert opus.content[:4] == b"OggS" and b"OpusHead" in opus.content[:100]
    with pytest.raises(openai.BadRequestError, match="response_format 'wma' is not supported"):
        client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", response_format="wma")  # type: ignore[arg-type]
    with pytest.raises(openai.AuthenticationError, match="invalid API key"):
        openai.OpenAI(base_url=f"{gateway}/v1", api_key="sk-wrong", max_retries=0).models.list()


def test_health_ready_openapi_and_page(gateway: str, worker: WorkerProcess) -> None:
    assert httpx.get(f"{gateway}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{gateway}/readyz")
    assert ready.status_code == 200 and ready.json()["workers"] >= 1
    spec = httpx.get(f"{gateway}/openapi.json").json()
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/audio", "/v1/audio/speech"} <= set(
        spec["paths"]
    )
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    page = httpx.get(gateway)
    assert page.status_code == 200 and "/v1/jobs" in page.text and "<audio" in page.text
    assert "connect-src 'self'" in page.headers["content-security-policy"]


@pytest.fixture(scope="module")
def local_gateway(
    s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayProcess, str, Path]]:
    """A gateway on a Redis database no worker listens to, with local-folder storage, a rate limit
    of 5 requests a minute, and one speech request waited on at a time for 1.5 s at most."""
    url = f"{REDIS_SERVER}/12"
    redis.Redis.from_url(url).flushdb()
    folder = tmp_path_factory.mktemp("local-storage")
    env = farm_env(
        url,
        s3_endpoint,
        TTSFARM_STORAGE_URL=str(folder),
        TTSFARM_GATEWAY_RATE_LIMIT="5",
        TTSFARM_GATEWAY_SPEECH_TIMEOUT_SECONDS="1.5",
        TTSFARM_GATEWAY_SPEECH_WAITS="1",
    )
    for process in start_gateway(tmp_path_factory, env):
        yield process, url, folder


def test_local_storage_streams_and_rate_limit(local_gateway: tuple[GatewayProcess, str, Path]) -> None:
    process, url, folder = local_gateway
    # A job finished the way a worker records one, with its audio in the storage folder.
    job_id, data = uuid.uuid4().hex, b"RIFF" + bytes(range(256)) * 300
    (folder / audio_key(job_id, "wav")).write_bytes(data)
    owner = f"local-{uuid.uuid4().hex[:8]}"
    registry = JobRegistry(url)
    registry.created(job_id, owner=owner)  # a job belongs to the key that made it
    digest = hashlib.sha256(data).hexdigest()
    location = str(folder / audio_key(job_id, "wav"))
    registry.succeeded(job_id, JobResult(job_id, location, None, "wav", 22050, 1.0, len(data), digest, ()))

    headers = {"Authorization": f"Bearer {KeyStore(url).add(owner)}"}
    if time.time() % 60 > 50:  # the six requests below must fall in one minute's window
        time.sleep(60.5 - time.time() % 60)
    with httpx.Client(base_url=process.url, headers=headers) as api:
        assert httpx.get(f"{process.url}/readyz").status_code == 503  # no worker on this database
        job = api.get(f"/v1/jobs/{job_id}").json()
        assert job["state"] == "succeeded" and str(folder) not in str(job)
        audio = api.get(f"/v1/jobs/{job_id}/audio")
        assert audio.status_code == 200 and audio.content == data
        assert audio.headers["content-type"] == "audio/wav"
        (folder / audio_key(job_id, "wav")).unlink()
        assert api.get(f"/v1/jobs/{job_id}/audio").status_code == 404  # moved away: 404, not a cut body
        answers = [api.get("/v1/voices") for _ in range(3)]
    assert [a.status_code for a in answers[:1]] == [200]
    limited = answers[-1]
    assert limited.status_code == 429 and 1 <= int(limited.headers["retry-after"]) <= 60
    assert "5 requests a minute" in limited.json()["error"]["message"]


def test_speech_answers_504_when_slow_and_503_when_busy(
    local_gateway: tuple[GatewayProcess, str, Path], s3_endpoint: str, tmp_path: Path
) -> None:
    """A worker answers pings but reads another queue: the speech job waits, and times out."""
    process, url, _ = local_gateway
    idle_env = farm_env(url, s3_endpoint, TTSFARM_QUEUE="nobody-submits-here")
    idle = WorkerProcess(idle_env, tmp_path / "idle-worker.log", "idle", concurrency=1)
    try:
        readyz = f"{process.url}/readyz"
        wait_for(lambda: httpx.get(readyz, timeout=10).status_code == 200, 10, "the gateway to see it")
        ask_slow_and_busy(process, url)
    finally:
        idle.stop()


def ask_slow_and_busy(process: GatewayProcess, url: str) -> None:
    speech = {"model": "tts-1", "voice": "alloy", "input": "Nobody will speak this."}

    def ask(results: list[httpx.Response]) -> None:
        headers = {"Authorization": f"Bearer {new_key(url)}"}
        results.append(httpx.post(f"{process.url}/v1/audio/speech", json=speech, headers=headers, timeout=30))

    jobs = redis.Redis.from_url(url)
    before = len(list(jobs.scan_iter("ttsfarm:job:*")))
    first: list[httpx.Response] = []
    waiting = threading.Thread(target=ask, args=(first,))
    waiting.start()
    wait_for(lambda: len(list(jobs.scan_iter("ttsfarm:job:*"))) > before, 10, "the first request's job")
    time.sleep(0.2)  # then it waits on it (no worker reads its queue)
    second: list[httpx.Response] = []
    ask(second)
    waiting.join()
    assert second[0].status_code == 503 and second[0].headers["retry-after"] == "1"
    assert "waiting on 1 speech requests already" in second[0].json()["error"]["message"]
    slow = first[0]
    assert slow.status_code == 504, slow.text
    assert slow.headers["x-should-retry"] == "false"  # the job is there: a retry would add one
    job_id = slow.json()["error"]["message"].split()[1]
    assert f"GET /v1/jobs/{job_id}" in slow.json()["error"]["message"]
    assert JobRegistry(url).status(job_id).state == "queued"  # it is still a job, to follow or cancel


def test_no_credentials_reach_a_client(s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Redis down, its password in the URL: the gateway starts, says 503, and never says the URL."""
    dead = f"redis://:hunter2secret@127.0.0.1:{free_port()}/0"
    for process in start_gateway(tmp_path_factory, farm_env(dead, s3_endpoint)):
        answers = [
            httpx.get(f"{process.url}/readyz", timeout=30),
            httpx.post(
                f"{process.url}/v1/jobs",
                json={"text": "hi"},
                headers={"Authorization": "Bearer tfk_00000000_" + "x" * 43},
                timeout=30,
            ),
        ]
        for answer in answers:
            assert answer.status_code == 503
            assert answer.json()["error"]["message"].startswith(
                "the farm's queue or storage cannot be reached"
            )
            assert "hunter2" not in answer.text and "127.0.0.1" not in answer.text


def test_audio_redirects_to_a_presigned_url(
    redis_url: str, s3_endpoint: str, worker: WorkerProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = farm_env(redis_url, s3_endpoint, TTSFARM_GATEWAY_AUDIO_REDIRECT="true")
    for process in start_gateway(tmp_path_factory, env):
        headers = {"Authorization": f"Bearer {new_key(redis_url)}"}
        with httpx.Client(base_url=process.url, headers=headers, timeout=30) as api:
            job = wait_done(api, api.post("/v1/jobs", json={"text": SENTENCE}).json()["id"])
            answer = api.get(job["result"]["audio_url"])
        assert answer.status_code == 307
        location = answer.headers["location"]
        assert location.startswith(s3_endpoint) and "X-Amz-Signature=" in location
        audio = httpx.get(location)  # no API key: the signature is the permission
        assert hashlib.sha256(audio.content).hexdigest() == job["result"]["sha256"]


def test_audio_is_read_where_the_worker_stored_it(
    redis_url: str, s3_endpoint: str, worker: WorkerProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A gateway whose own storage is another than the workers' (a local folder here, S3 there)
    still serves a job's audio: it follows the job's result, as ``ttsfarm fetch`` does."""
    elsewhere = tmp_path_factory.mktemp("gateway-storage")
    env = farm_env(redis_url, s3_endpoint, TTSFARM_STORAGE_URL=str(elsewhere))
    for process in start_gateway(tmp_path_factory, env):
        headers = {"Authorization": f"Bearer {new_key(redis_url)}"}
        with httpx.Client(base_url=process.url, headers=headers, timeout=30) as api:
            job = wait_done(api, api.post("/v1/jobs", json={"text": SENTENCE}).json()["id"])
            audio = api.get(f"/v1/jobs/{job['id']}/audio")
    assert audio.status_code == 200, audio.text
    assert hashlib.sha256(audio.content).hexdigest() == job["result"]["sha256"]
    assert not any(elsewhere.iterdir())
