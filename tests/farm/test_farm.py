"""The farm end to end: real Redis, real S3 endpoint, real worker processes, real voice."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import onnx
import pytest
import redis
import requests
import soundfile as sf
from click.testing import CliRunner
from onnx import TensorProto, helper

from producer import Client, JobFailed, JobSpec
from synthesis.gpus import gpu_present
from synthesis.pipeline import Synthesizer
from synthesis.text import split_sentences
from tests.farm.conftest import (
    BUCKET,
    EXAMPLE,
    PREFIX,
    WorkerProcess,
    broken_voice,
    farm_env,
    free_port,
    wait_for,
    waiting,
)
from ttsfarm.cli import main
from ttsfarm.core.errors import (
    BrokerUnavailable,
    Cancelled,
    InvalidInput,
    JobNotFound,
    StorageUnavailable,
    VoiceNotFound,
)
from ttsfarm.core.jobs import JobRequest, JobResult
from ttsfarm.core.settings import Settings
from ttsfarm.core.voices import resolve_voice
from ttsfarm.farm.celeryconf import TASK_NAME
from ttsfarm.farm.registry import JobRegistry
from ttsfarm.storage import LocalStorage
from worker.jobs import run_job

SENTENCES = split_sentences(EXAMPLE.replace("\n", " "))


def mixed_texts(count: int) -> list[str]:
    """Short and longer texts: one, two or three sentences."""
    return [" ".join(SENTENCES[n % 10 : n % 10 + 1 + n % 3]) for n in range(count)]


def farm_stats(client: Client) -> dict[str, float]:
    replies = client._app.control.broadcast("ttsfarm_stats", reply=True, timeout=5)
    return next(iter(replies[0].values()))


def test_a_dozen_jobs_from_several_threads(client: Client, worker: WorkerProcess, flower: str, s3) -> None:  # type: ignore[no-untyped-def]
    texts = mixed_texts(12)
    ids: list[str] = []
    lock = threading.Lock()

    def produce(chunk: list[str]) -> None:
        for text in chunk:
            job_id = client.submit(text, format="flac")
            with lock:
                ids.append(job_id)

    before = farm_stats(client)
    assert (before["runners"], before["text_processes"]) == (2, 1)
    threads = [threading.Thread(target=produce, args=(texts[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 12

    seen_states: set[str] = set()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        states = [client.status(i).state for i in ids]
        seen_states.update(states)
        if all(s == "succeeded" for s in states):
            break
        assert "failed" not in states, [client.status(i).error for i in ids]
        time.sleep(0.1)
    assert {"running", "succeeded"} <= seen_states

    for job_id in ids:
        result = client.wait(job_id, timeout=10)
        body = s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}/{job_id}.flac")["Body"].read()
        audio, rate = sf.read(io.BytesIO(body))
        assert rate == 22050
        assert abs(len(audio) / rate - result.duration) < 0.01
        words = len(" ".join(s.text for s in result.segments).split())
        assert 0.2 < result.duration / words < 0.6
        assert result.segments[-1].end == pytest.approx(result.duration)

    after = farm_stats(client)
    assert after["items"] > before["items"]
    batches, items = after["batches"] - before["batches"], after["items"] - before["items"]
    assert items / batches > 1, "jobs in flight together should share batches"

    auth = ("ops", "secret")
    tasks = requests.get(f"{flower}/api/tasks", auth=auth, timeout=10).json()
    assert set(ids) <= set(tasks)
    assert all(tasks[i]["state"] == "SUCCESS" and tasks[i]["runtime"] > 0 for i in ids)
    workers = requests.get(f"{flower}/api/workers", auth=auth, timeout=10).json()
    assert any(name.startswith("test-cpu@") for name in workers)
    assert requests.get(f"{flower}/api/tasks", timeout=10).status_code == 401


def test_the_worker_log_says_what_engine_it_loaded(worker: WorkerProcess) -> None:
    """The engine loads before Celery sets up its logging; its lines are in the log all the same."""
    log = worker.log_path.read_text()
    assert "engine ready: voice joe on CPUExecutionProvider (device 0), fp32" in log
    assert log.index("engine ready") < log.index(" ready.")  # loaded before the first job


def test_status_moves_from_queued_to_running_to_succeeded(client: Client, worker: WorkerProcess) -> None:
    job_id = client.submit(" ".join(SENTENCES[:12]))
    states = [client.status(job_id).state]
    progress = []
    while not client.status(job_id).done:
        status = client.status(job_id)
        states.append(status.state)
        progress.append(status.progress)
        time.sleep(0.05)
    states.append(client.status(job_id).state)
    compact = [s for n, s in enumerate(states) if n == 0 or s != states[n - 1]]
    assert compact in (["queued", "running", "succeeded"], ["running", "succeeded"])
    assert any(0 < p < 1 for p in progress)
    assert progress == sorted(progress)


def test_idempotency_key_synthesizes_once(client: Client, worker: WorkerProcess, s3) -> None:  # type: ignore[no-untyped-def]
    first = client.submit("Only once, please.", key="order-42")
    second = client.submit("Only once, please.", key="order-42")
    assert first == second
    client.wait(first, timeout=60)
    assert client.status(first).attempts == 1
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/{first}")["Contents"]
    assert sorted(o["Key"] for o in listed) == [f"{PREFIX}/{first}.json", f"{PREFIX}/{first}.wav"]


def test_cancel_of_a_finished_job_keeps_its_key(client: Client, worker: WorkerProcess) -> None:
    job_id = client.submit("Done and kept.", key="finished-then-cancelled")
    client.wait(job_id, timeout=60)
    assert client.cancel(job_id).state == "succeeded"
    assert client.submit("Done and kept.", key="finished-then-cancelled") == job_id
    assert client.status(job_id).attempts == 1


def test_a_cancel_that_came_too_late_keeps_the_key(redis_url: str) -> None:
    """The flag was set while the job ran, but it finished first: its key stays bound."""
    registry = JobRegistry(redis_url)
    request = JobRequest("Too late to stop.")
    registry.created(request.job_id)
    assert registry.claim_key("late-cancel", request.job_id) == request.job_id
    registry.start(request.job_id)
    registry.request_cancel(request.job_id)
    result = JobResult(request.job_id, "s3://b/k.wav", None, "wav", 22050, 1.0, 10, "0" * 64, ())
    registry.succeeded(request.job_id, result)
    assert registry.claim_key("late-cancel", "another-job") == request.job_id


def test_start_records_a_run_unless_the_job_is_done_or_to_be_cancelled(redis_url: str) -> None:
    registry = JobRegistry(redis_url)
    queued, done, cancelled, lost = (JobRequest(f"Start number {n}.") for n in range(4))
    for request in (queued, done, cancelled):
        registry.created(request.job_id)
    before = registry.start(queued.job_id)
    assert (before.state, before.attempts) == ("queued", 0)
    now = registry.status(queued.job_id)
    assert (now.state, now.attempts, now.error) == ("running", 1, None) and now.started_at
    registry.start(done.job_id)
    result = JobResult(done.job_id, "s3://b/k.wav", None, "wav", 22050, 1.0, 10, "0" * 64, ())
    registry.succeeded(done.job_id, result)
    again = registry.start(done.job_id)  # delivered again: left as it was
    assert (again.state, again.result, again.attempts) == ("succeeded", result, 1)
    assert registry.status(done.job_id) == again
    registry.request_cancel(cancelled.job_id)
    assert registry.start(cancelled.job_id).cancel_requested
    left = registry.status(cancelled.job_id)
    assert (left.state, left.attempts) == ("cancelled", 0)
    assert registry.start(lost.job_id).state == "unknown"  # its record lost with Redis: made anew
    assert (registry.status(lost.job_id).state, registry.status(lost.job_id).attempts) == ("running", 1)


def test_submit_many_is_one_call(client: Client, worker: WorkerProcess) -> None:
    ids = client.submit_many(["First of many.", JobSpec("Second of many.", format="ogg")])
    results = [client.wait(i, timeout=60) for i in ids]
    assert [r.format for r in results] == ["wav", "ogg"]


def test_fetch_downloads_the_audio(client: Client, worker: WorkerProcess, tmp_path: Path) -> None:
    job_id = client.submit("Fetch me.", format="mp3")
    result = client.wait(job_id, timeout=60)
    client.fetch(job_id, tmp_path / "got.mp3")
    assert sf.info(tmp_path / "got.mp3").duration == pytest.approx(result.duration, abs=0.1)


def test_a_job_given_a_loudness_is_stored_at_it(
    client: Client, worker: WorkerProcess, tmp_path: Path
) -> None:
    from ttsfarm.core.loudness import integrated_loudness, true_peak

    text = "Margaret and her brother opened a small bakery on the corner of Willow Street."
    job_id = client.submit(text, format="flac", loudness=-19.0)
    result = client.wait(job_id, timeout=60)
    client.fetch(job_id, tmp_path / "level.flac")
    audio, rate = sf.read(tmp_path / "level.flac", dtype="float32")
    assert len(audio) / rate == pytest.approx(result.duration, abs=1e-6)
    assert integrated_loudness(audio, rate) == pytest.approx(-19.0, abs=0.1)
    assert true_peak(audio) <= -1.0 and result.loudness == -19.0
    with pytest.raises(InvalidInput, match="the loudness must be a number of LUFS from -40 to -10"):
        client.submit(text, loudness=-60.0)
    # A key is for one request: the same key with another loudness is refused, the same one is the job.
    keyed = client.submit(text, format="flac", loudness=-19.0, key="level-1")
    assert client.submit(text, format="flac", loudness=-19.0, key="level-1") == keyed
    with pytest.raises(InvalidInput, match="made for a different text, voice, settings, format or loudness"):
        client.submit(text, format="flac", loudness=-23.0, key="level-1")
    client.wait(keyed, timeout=60)


def test_fetch_refuses_audio_that_does_not_match_its_checksum(
    client: Client,
    worker: WorkerProcess,
    s3,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    job_id = client.submit("Fetch me whole.", format="wav")
    client.wait(job_id, timeout=60)
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{job_id}.wav", Body=b"RIFF not the audio")  # damaged
    with pytest.raises(StorageUnavailable, match="did not arrive whole: fetch it again"):
        client.fetch(job_id, tmp_path / "got.wav")
    assert not (tmp_path / "got.wav").exists()


def test_cancel_a_running_job_stores_nothing(client: Client, worker: WorkerProcess, s3) -> None:  # type: ignore[no-untyped-def]
    job_id = client.submit(EXAMPLE * 4)
    wait_for(lambda: client.status(job_id).segments_done > 0, 60, "the first segment")
    assert client.cancel(job_id).state == "running"  # until the worker says it stopped
    with pytest.raises(Cancelled):
        client.wait(job_id, timeout=30)  # the worker recorded it: it ignores no cancel
    status = client.status(job_id)
    assert status.state == "cancelled" and status.segments_done < status.segments_total
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/{job_id}")
    assert client.wait(client.submit("Still serving."), timeout=60).duration > 0


def test_cancel_a_queued_job_never_runs(
    redis_url: str,
    s3_endpoint: str,
    client: Client,
    s3,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    with Client(replace(client.settings, queue="parked")) as parked:
        job_id = parked.submit("Never spoken.")
        assert parked.cancel(job_id).state == "cancelled"
        env = farm_env(redis_url, s3_endpoint, TTSFARM_QUEUE="parked")
        late = WorkerProcess(env, tmp_path / "parked.log", "parked", concurrency=2)
        try:
            queue = redis.Redis.from_url(redis_url)
            wait_for(lambda: not waiting(queue, "parked"), 30, "the parked queue to be consumed")
            log = tmp_path / "parked.log"
            wait_for(
                lambda: f"job {job_id} cancelled" in log.read_text(), 30, "the worker to record the cancel"
            )
        finally:
            late.stop()
        status = parked.status(job_id)
    assert status.state == "cancelled" and status.attempts == 0
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/{job_id}")


def test_unknown_job_id(client: Client) -> None:
    assert client.status("no-such-job").state == "unknown"
    with pytest.raises(JobNotFound, match="unknown job id"):
        client.wait("no-such-job", timeout=1)
    with pytest.raises(JobNotFound):
        client.cancel("no-such-job")


def test_an_unknown_voice_or_speaker_is_refused_at_submit(client: Client) -> None:
    """Checked against the voices the farm serves where the job is made: nothing is queued."""
    with pytest.raises(VoiceNotFound, match="unknown voice 'nobody': use one of joe"):
        client.submit("Who speaks?", voice="nobody")
    with pytest.raises(VoiceNotFound, match="has a single speaker"):
        client.submit("Who speaks?", speaker=3)
    with pytest.raises(VoiceNotFound, match="unknown voice 'nobody'"):
        client.submit_many(["A fine job.", JobSpec("Who speaks?", voice="nobody")])


def test_bad_voices_and_options_fail_as_expected_errors(
    client: Client, worker: WorkerProcess, redis_url: str, tmp_path: Path
) -> None:
    """Permanent failures the job's error explains: one WARNING line each, no traceback."""
    config = resolve_voice("joe").config_path
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])],
            "not-piper",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        )
    )
    onnx.save(model, tmp_path / "identity.onnx")
    (tmp_path / "garbage.onnx").write_bytes(b"not a model")
    for name in ("identity", "garbage"):
        shutil.copy(config, tmp_path / f"{name}.onnx.json")
    log_start = len(worker.log_path.read_text())
    expected = {
        client.submit("Hi.", voice=str(tmp_path / "identity.onnx")): "is not a Piper voice model",
        client.submit("Hi.", voice=str(tmp_path / "garbage.onnx")): "is not a Piper voice model",
    }
    raw = JobRequest("Too fast to check?").to_dict()  # what an older producer could still send
    raw["options"]["length_scale"] = "fast"
    JobRegistry(redis_url).created(raw["job_id"])
    client._app.send_task(TASK_NAME, args=[raw], task_id=raw["job_id"], queue=client.settings.queue)
    expected[raw["job_id"]] = r"length scale must be between 0\.1 and 10 .*not 'fast'"
    for job_id, message in expected.items():
        with pytest.raises(JobFailed, match=message):
            client.wait(job_id, timeout=60)
        assert client.status(job_id).attempts <= 1  # permanent: not retried
    log = worker.log_path.read_text()[log_start:]
    assert "Traceback" not in log and "raised unexpected" not in log, log
    for job_id in expected:
        assert log.count(f"WARNING worker.tasks: job {job_id} failed: ") == 1, log
    assert log.count("WARNING") == len(expected), log


def test_options_a_producer_can_check_are_refused_at_submit(
    redis_url: str, s3_endpoint: str, client: Client
) -> None:
    with pytest.raises(InvalidInput, match=r"length scale must be between 0\.1 and 10 .*not 20\.0"):
        client.submit("Slowly.", length_scale=20.0)
    with pytest.raises(InvalidInput, match="the speaker must be a speaker id"):
        client.submit("Who?", speaker=-1)
    done = CliRunner(env=farm_env(redis_url, s3_endpoint)).invoke(
        main, ["submit", "Quickly.", "--length-scale", "0"]
    )
    assert isinstance(done.exception, SystemExit) and done.exit_code == 1, done.exception
    assert (
        done.output.strip()
        == "Error: length scale must be between 0.1 and 10 (1 is normal speed, above 1 slower), not 0.0"
    )


@pytest.mark.parametrize("text, message", [("", "the text is empty"), ("x" * 200_001, "over the limit")])
def test_bad_text_is_refused_at_submit(client: Client, text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        client.submit(text)


def test_broker_down_at_submit_is_a_clear_error() -> None:
    started = time.monotonic()
    with (
        pytest.raises(BrokerUnavailable, match="cannot reach"),
        Client(Settings(broker_url=f"redis://127.0.0.1:{free_port()}/0")) as c,
    ):
        c.submit("Hello?")
    assert time.monotonic() - started < 15


def test_key_of_a_failed_job_can_be_tried_again(
    client: Client, worker: WorkerProcess, tmp_path: Path
) -> None:
    failed = client.submit("Second chance.", voice=broken_voice(tmp_path), key="retry-me")
    with pytest.raises(JobFailed):
        client.wait(failed, timeout=60)
    retried = client.submit("Second chance.", key="retry-me")
    assert retried != failed
    assert client.wait(retried, timeout=60).duration > 0
    assert client.submit("Second chance.", key="retry-me") == retried


def test_short_job_does_not_wait_behind_a_long_one(client: Client, worker: WorkerProcess) -> None:
    long_job = client.submit("\n\n".join([EXAMPLE] * 6))
    wait_for(lambda: client.status(long_job).segments_done > 0, 60, "the long job's first segment")
    short_job = client.submit("A quick one.")
    client.wait(short_job, timeout=120)
    long_status = client.status(long_job)
    short_finished = client.status(short_job).finished_at
    assert long_status.finished_at is None or short_finished < long_status.finished_at, (
        f"the short job waited for the long one ({long_status.segments_done}/{long_status.segments_total} "
        "segments of the long job were done)"
    )
    client.cancel(long_job)


def test_a_job_that_could_not_be_queued_frees_its_key(client: Client, worker: WorkerProcess) -> None:
    dead_broker = f"redis://127.0.0.1:{free_port()}/0"
    with (
        Client(
            replace(client.settings, broker_url=dead_broker, result_backend=client.settings.backend_url)
        ) as broken,
        pytest.raises(BrokerUnavailable, match="cannot reach the broker"),
    ):
        broken.submit("Queued at last.", key="flaky-broker")
    job_id = client.submit("Queued at last.", key="flaky-broker")
    assert client.wait(job_id, timeout=60).duration > 0


def test_a_finished_job_delivered_again_stays_succeeded(
    redis_url: str, synthesizer: Synthesizer, tmp_path: Path
) -> None:
    """A late cancel, or storage gone, must not turn a done job into cancelled or failed."""
    registry = JobRegistry(redis_url)
    request = JobRequest("Once is enough.")
    registry.created(request.job_id)
    first = run_job(request, synthesizer, LocalStorage(tmp_path / "store"), registry)
    registry.request_cancel(request.job_id)
    attempts = registry.status(request.job_id).attempts
    again = run_job(request, synthesizer, LocalStorage(tmp_path / "elsewhere"), registry)
    status = registry.status(request.job_id)
    assert again == first
    assert (status.state, status.attempts) == ("succeeded", attempts)
    assert not (tmp_path / "elsewhere").exists()


def test_fetch_into_a_folder_is_a_clear_error(client: Client, worker: WorkerProcess, tmp_path: Path) -> None:
    job_id = client.submit("Where to?")
    client.wait(job_id, timeout=60)
    with pytest.raises(InvalidInput, match="is a folder: give a file name"):
        client.fetch(job_id, tmp_path)


def test_fetch_replaces_a_file_only_when_asked(
    redis_url: str, s3_endpoint: str, client: Client, worker: WorkerProcess, tmp_path: Path
) -> None:
    job_id = client.submit("Keep what is there.")
    result = client.wait(job_id, timeout=60)
    kept = tmp_path / "kept.wav"
    kept.write_bytes(b"mine")
    with pytest.raises(InvalidInput, match="exists already"):
        client.fetch(job_id, kept)
    assert kept.read_bytes() == b"mine"
    client.fetch(job_id, kept, overwrite=True)
    assert kept.stat().st_size == result.size

    runner = CliRunner(env=farm_env(redis_url, s3_endpoint))
    (tmp_path / "a-file").write_bytes(b"")
    for target, message in [
        (kept, "exists already"),
        (tmp_path / "a-file" / "under.wav", "is a file, not a folder"),
        (Path("/proc/ttsfarm.wav"), "cannot write to /proc"),
    ]:
        done = runner.invoke(main, ["fetch", job_id, "-o", str(target)])
        assert isinstance(done.exception, SystemExit) and done.exit_code == 1, done.exception
        assert message in done.output and len(done.output.strip().splitlines()) == 1, done.output
    done = runner.invoke(main, ["fetch", job_id, "-o", str(kept), "--force"])
    assert done.exit_code == 0, done.output


def test_a_worker_with_a_bad_setting_stops_instead_of_failing_jobs(
    redis_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    env = farm_env(redis_url, s3_endpoint, TTSFARM_PRECISION="int4")
    done = subprocess.run(
        [sys.executable, "-m", "ttsfarm", "worker", "-n", "bad@%h"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "TTSFARM_PRECISION must be auto, fp16 or fp32" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(gpu_present(), reason="checks a machine without a GPU")
def test_a_worker_asked_for_a_gpu_it_does_not_have_stops(
    redis_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    env = farm_env(redis_url, s3_endpoint)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ttsfarm", "worker", "--gpu", "0", "-n", "gpuless@%h"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert time.monotonic() - started < 60
    assert "a GPU was asked for" in done.stderr and "--cpu" in done.stderr
    assert "Traceback" not in done.stderr
