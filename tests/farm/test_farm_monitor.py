"""The farm as users see it in Flower and through idempotency keys: a cancelled or failed job
ends in a final state Flower shows, tasks show a short summary of their arguments, and a key
reused for another request is refused."""

from __future__ import annotations

import pytest
import requests

from producer import Client, JobFailed
from tests.farm.conftest import WorkerProcess, wait_for
from tests.farm.test_farm import EXAMPLE
from ttsfarm.errors import Cancelled, InvalidInput

AUTH = ("ops", "secret")


def flower_task(flower: str, job_id: str) -> dict[str, object]:
    reply = requests.get(f"{flower}/api/task/info/{job_id}", auth=AUTH, timeout=10)
    return reply.json() if reply.status_code == 200 else {}  # type: ignore[no-any-return]


def test_flower_shows_a_cancelled_job_as_revoked_with_a_short_summary(
    flower: str, client: Client, worker: WorkerProcess
) -> None:
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


def test_flower_shows_a_failed_job_as_failed(flower: str, client: Client, worker: WorkerProcess) -> None:
    job_id = client.submit("Nobody speaks this.", voice="nobody")
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
    with pytest.raises(InvalidInput, match="made for a different text, voice or format"):
        client.submit("The first text.", key="order-77", format="mp3")
    assert client.wait(first, timeout=60).duration > 0
    assert client.submit("The first text.", key="order-77") == first  # still bound, still the same
