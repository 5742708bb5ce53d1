"""The farm as users see it: a cancelled or failed job ends in a final state Flower shows, tasks
show a short summary of their arguments, a key reused for another request is refused, `status`
of a failed job exits 1, and a job is fetched from where its worker stored it."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner

from producer import Client, JobFailed
from tests.farm.conftest import EXAMPLE, WorkerProcess, broken_voice, farm_env, wait_for
from ttsfarm.cli import main
from ttsfarm.core.errors import Cancelled, InvalidInput

AUTH = ("ops", "secret")


def flower_task(flower: str, job_id: str) -> dict[str, object]:
    reply = requests.get(f"{flower}/api/task/info/{job_id}", auth=AUTH, timeout=10)
    return reply.json() if reply.status_code == 200 else {}  # type: ignore[no-any-return]


@pytest.fixture
def watching(client: Client, worker: WorkerProcess, flower: str) -> str:
    """Flower once it has its events: it answers on its port before it has subscribed to them,
    and a job sent and taken in between would show there without its summary."""
    job_id = client.submit("Flower watches this one.")
    client.wait(job_id, timeout=120)
    wait_for(lambda: flower_task(flower, job_id).get("state") == "SUCCESS", 60, "Flower to see the jobs")
    return flower


def test_flower_shows_a_cancelled_job_as_revoked_with_a_short_summary(
    client: Client, worker: WorkerProcess, watching: str
) -> None:
    flower = watching
    # the worker before Flower (as in test_farm): Flower lists the workers it found at its start
    text = EXAMPLE * 4
    job_id = client.submit(text, format="mp3")
    wait_for(lambda: client.status(job_id).segments_done > 0, 60, "the first segment")
    client.cancel(job_id)
    with pytest.raises(Cancelled):
        client.wait(job_id, timeout=30)
    wait_for(
        lambda: flower_task(flower, job_id).get("state") == "REVOKED", 20, "Flower to show the task revoked"
    )
    args = str(flower_task(flower, job_id)["args"])
    first_words = " ".join(text.split()[:4])
    assert f"job {job_id}, voice joe, mp3, {len(text):,} chars: '{first_words}" in args
    assert len(args) < 200 and text[:400] not in args


def test_flower_shows_a_failed_job_as_failed(
    client: Client, worker: WorkerProcess, watching: str, tmp_path: Path
) -> None:
    flower = watching
    job_id = client.submit("Nobody speaks this.", voice=broken_voice(tmp_path))
    with pytest.raises(JobFailed):
        client.wait(job_id, timeout=30)
    wait_for(
        lambda: flower_task(flower, job_id).get("state") == "FAILURE", 20, "Flower to show the task failed"
    )


def test_a_key_reused_for_another_text_is_refused(client: Client, worker: WorkerProcess) -> None:
    first = client.submit("The first text.", key="order-77")
    assert client.submit("The first text.", key="order-77") == first
    with pytest.raises(
        InvalidInput, match=f"idempotency key 'order-77' is taken by job {first}, made for a different"
    ):
        client.submit("A different text.", key="order-77")
    with pytest.raises(InvalidInput, match="made for a different text, voice, settings, format or loudness"):
        client.submit("The first text.", key="order-77", format="mp3")
    assert client.wait(first, timeout=60).duration > 0
    assert client.submit("The first text.", key="order-77") == first  # still bound, still the same


def test_status_of_a_failed_or_cancelled_job_exits_1(
    redis_url: str, s3_endpoint: str, client: Client, worker: WorkerProcess, tmp_path: Path
) -> None:
    failed = client.submit("Nobody speaks this either.", voice=broken_voice(tmp_path))
    with pytest.raises(JobFailed):
        client.wait(failed, timeout=30)
    runner = CliRunner(env=farm_env(redis_url, s3_endpoint))
    done = runner.invoke(main, ["status", failed])
    assert done.exit_code == 1 and f"{failed}  failed" in done.output
    ok = client.submit("This one works.")
    client.wait(ok, timeout=60)
    assert runner.invoke(main, ["status", ok]).exit_code == 0


def test_fetch_reads_from_where_the_worker_put_the_audio(
    client: Client, worker: WorkerProcess, tmp_path: Path
) -> None:
    job_id = client.submit("Fetched from its own place.")
    result = client.wait(job_id, timeout=60)
    # a producer whose own storage setting names another place still finds the job's audio
    elsewhere = replace(client.settings, storage_url=str(tmp_path / "elsewhere"))
    with Client(elsewhere) as other:
        other.fetch(job_id, tmp_path / "got.wav")
    assert hashlib.sha256((tmp_path / "got.wav").read_bytes()).hexdigest() == result.sha256
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--voice", "nobody"], "unknown voice 'nobody'"), (["--speaker", "3"], "has a single speaker")],
)
def test_submit_refuses_an_unknown_voice_or_speaker_at_once(
    redis_url: str, s3_endpoint: str, extra: list[str], message: str
) -> None:
    done = CliRunner(env=farm_env(redis_url, s3_endpoint)).invoke(main, ["submit", "Hello.", *extra])
    assert done.exit_code == 1 and message in done.output
    assert done.output.strip().count("\n") == 0  # one line, and no job id: nothing was queued
