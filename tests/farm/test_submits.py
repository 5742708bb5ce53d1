"""A submit checks all it is given before anything is queued, and leaves no record without a
message: a record waits as ``queued`` only for a message that is on its way to a worker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import redis
from kombu.exceptions import EncodeError

from producer import Client, JobSpec
from tests.farm.conftest import free_port, waiting
from ttsfarm.core.errors import BrokerUnavailable, InvalidInput, PermanentError
from ttsfarm.core.settings import Settings
from ttsfarm.farm.celeryconf import TASK_NAME
from ttsfarm.farm.registry import KEY_PREFIX, RECORDS_PER_ROUND_TRIP


@pytest.fixture
def farm(redis_url: str) -> Iterator[Client]:
    """A client whose queue no worker reads: what it queued stays there to be counted."""
    with Client(Settings(broker_url=redis_url, queue=f"checks-{uuid.uuid4().hex[:8]}")) as client:
        yield client


def records(redis_url: str) -> set[str]:
    return {str(key) for key in redis.Redis.from_url(redis_url).scan_iter(f"{KEY_PREFIX}job:*")}


def queued(redis_url: str, queue: str) -> int:
    return len(waiting(redis.Redis.from_url(redis_url), queue))


def bound_job(redis_url: str, key: str) -> str:
    return str(redis.Redis.from_url(redis_url, decode_responses=True).get(f"{KEY_PREFIX}key:{key}"))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            JobSpec("Bad \ud800 text."),
            r"job 3 of 3: the text has a lone surrogate \(U\+D800\) at character 5,",
        ),
        (JobSpec("Fine.", key="k\udce9"), r"job 3 of 3: the idempotency key .* \(U\+DCE9\) at character 2,"),
        (JobSpec("Fine.", voice="jo\udfffe"), r"job 3 of 3: the voice .* \(U\+DFFF\) at character 3,"),
        (JobSpec("Fine.", format="aiff"), "job 3 of 3: unknown audio format 'aiff'"),
        (
            JobSpec("1234 5678 90 " * 15_000),  # 195,000 characters: about 40 hours of numbers
            r"job 3 of 3: the text would make about \d+\.\d hours of audio .*TTSFARM_MAX_JOB_AUDIO_SECONDS",
        ),
    ],
    ids=["lone surrogate", "key", "voice", "format", "cost"],
)
def test_a_bad_job_anywhere_in_a_batch_queues_none(
    farm: Client, redis_url: str, bad: JobSpec, message: str
) -> None:
    before = records(redis_url)
    with pytest.raises(PermanentError, match=message + ".*; nothing was queued$"):
        farm.submit_many([JobSpec("Good one."), JobSpec("Good two.", key=uuid.uuid4().hex), bad])
    assert records(redis_url) == before
    assert queued(redis_url, farm.settings.queue) == 0


def test_a_key_taken_by_another_request_queues_none_of_the_batch(farm: Client, redis_url: str) -> None:
    key = uuid.uuid4().hex
    first = farm.submit("The key's own text.", key=key)
    before = records(redis_url)
    with pytest.raises(InvalidInput, match=f"idempotency key '{key}' is taken by job {first}"):
        farm.submit_many([JobSpec("Good one."), JobSpec("Another text.", key=key)])
    assert records(redis_url) == before
    assert queued(redis_url, farm.settings.queue) == 1  # the first submit's


def test_one_lone_surrogate_is_invalid_input_with_its_place(farm: Client, redis_url: str) -> None:
    before = records(redis_url)
    with pytest.raises(InvalidInput, match=r"^the text has a lone surrogate \(U\+D800\) at character 3, "):
        farm.submit("x \ud800 y")
    with pytest.raises(InvalidInput, match=r"^the idempotency key has a lone .* at character 2, "):
        farm.submit("A fine text.", key="k\ud800")
    assert records(redis_url) == before
    assert queued(redis_url, farm.settings.queue) == 0


def test_records_whose_messages_cannot_be_sent_are_failed_and_free_their_keys(
    farm: Client, redis_url: str
) -> None:
    """The broker down, the registry up: each record made is marked failed (its error naming the
    broker without its password), so that its key takes the request again."""
    dead = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    keys = [uuid.uuid4().hex, uuid.uuid4().hex]
    specs = [JobSpec("One.", key=keys[0]), JobSpec("Two.", key=keys[1])]
    settings = replace(farm.settings, broker_url=dead, result_backend=redis_url, max_queued_jobs=0)
    with (
        Client(settings) as broken,
        pytest.raises(BrokerUnavailable, match=r"cannot reach the broker at redis://\*\*\*@127\.0\.0\.1"),
    ):
        broken.submit_many(specs)
    failed = [bound_job(redis_url, key) for key in keys]
    for status in farm.statuses(failed):
        assert status.state == "failed"
        assert status.error and status.error.startswith("could not be queued: cannot reach the broker")
        assert "hunter2" not in status.error
    again = farm.submit_many(specs)
    assert again == [bound_job(redis_url, key) for key in keys] and set(again).isdisjoint(failed)
    assert [status.state for status in farm.statuses(again)] == ["queued", "queued"]


class Unsendable:
    """A request whose message JSON cannot carry: its send fails after its record was made."""

    job_id = uuid.uuid4().hex

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "payload": object()}

    def summary(self) -> str:
        return f"job {self.job_id}"

    def fingerprint(self) -> str:
        return "0" * 64


def test_a_send_that_fails_for_any_reason_fails_its_record(farm: Client, redis_url: str) -> None:
    key = uuid.uuid4().hex
    request = Unsendable()
    with pytest.raises(EncodeError):
        farm._queue(TASK_NAME, [request], [key], farm.settings.queue)
    status = farm.status(request.job_id)
    assert status.state == "failed" and status.error == (
        "could not be queued: EncodeError: Object of type object is not JSON serializable"
    )
    assert queued(redis_url, farm.settings.queue) == 0
    assert farm.submit("Queued at last.", key=key) != request.job_id


def test_a_batch_past_one_round_trip_of_records_queues_each_job_once(farm: Client, redis_url: str) -> None:
    """New records go to Redis a thousand to a round trip: a batch past that records and queues
    every job, and a key repeated inside the batch answers with the job of its first use."""
    key = uuid.uuid4().hex
    specs = [JobSpec(f"Sentence number {n}.") for n in range(RECORDS_PER_ROUND_TRIP + 5)]
    ids = farm.submit_many([*specs, JobSpec("Keyed.", key=key), JobSpec("Keyed.", key=key)])
    assert ids[-1] == ids[-2] == bound_job(redis_url, key)
    assert len(set(ids)) == len(specs) + 1
    assert {status.state for status in farm.statuses(ids)} == {"queued"}
    assert queued(redis_url, farm.settings.queue) == len(specs) + 1
