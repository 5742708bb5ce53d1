"""The job lifecycle's one home: states, the wait loop every waiter uses, and the error tree."""

from __future__ import annotations

import errno
import hashlib
import inspect
import json
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import ttsfarm.core.errors
from ttsfarm.core.errors import (
    Cancelled,
    InvalidInput,
    JobFailed,
    JobNotFound,
    PermanentError,
    StorageUnavailable,
    TransientError,
    TtsfarmError,
    WaitTimeout,
)
from ttsfarm.core.files import write_error
from ttsfarm.core.jobs import (
    JobRequest,
    JobResult,
    JobStatus,
    SynthesisOptions,
    check_key,
    check_text,
    wait_until_done,
)

RESULT = JobResult("a" * 32, "/tmp/a.wav", None, "wav", 22050, 1.5, 1000, "0" * 64, ())


def statuses(*states: JobStatus) -> Iterator[JobStatus]:
    yield from states
    while True:
        yield states[-1]


def test_the_wait_loop_follows_a_job_to_its_result() -> None:
    job_id = RESULT.job_id
    source = statuses(
        JobStatus(job_id, "queued"),
        JobStatus(job_id, "running", segments_done=1, segments_total=2),
        JobStatus(job_id, "succeeded", result=RESULT),
    )
    seen: list[str] = []
    final = wait_until_done(job_id, lambda _: next(source), poll=0, on_status=lambda s: seen.append(s.state))
    assert seen == ["queued", "running", "succeeded"]
    assert final.outcome() == RESULT


@pytest.mark.parametrize(
    "status, error, message",
    [
        (JobStatus("j1", "failed", error="no voice"), JobFailed, "job j1 failed: no voice"),
        (JobStatus("j1", "cancelled"), Cancelled, "job j1 was cancelled"),
    ],
)
def test_a_job_that_ended_otherwise_raises_its_error(
    status: JobStatus, error: type[Exception], message: str
) -> None:
    final = wait_until_done("j1", lambda _: status, poll=0)
    with pytest.raises(error, match=message):
        final.outcome()


def test_an_unknown_job_and_a_slow_one() -> None:
    with pytest.raises(JobNotFound, match="unknown job id j2"):
        wait_until_done("j2", lambda job_id: JobStatus(job_id, "unknown"), poll=0)
    with pytest.raises(WaitTimeout, match=r"job j3 is still running after 0\.05 s"):
        wait_until_done("j3", lambda job_id: JobStatus(job_id, "running"), timeout=0.05, poll=0.01)


def test_every_error_is_transient_or_permanent_and_drawn_in_the_tree() -> None:
    classes = [
        value
        for value in vars(ttsfarm.core.errors).values()
        if inspect.isclass(value) and issubclass(value, TtsfarmError)
    ]
    tree = ttsfarm.core.errors.__doc__ or ""
    for error in classes:
        assert error.__name__ in tree, error
        if error not in (TtsfarmError, PermanentError, TransientError):
            assert issubclass(error, PermanentError) != issubclass(error, TransientError), error


def test_a_full_disk_is_transient_and_a_bad_path_is_not() -> None:
    full = write_error("/data/out.wav", OSError(errno.ENOSPC, "No space left on device"))
    assert isinstance(full, StorageUnavailable) and isinstance(full, TransientError)
    assert str(full) == "cannot write /data/out.wav: No space left on device"
    denied = write_error("/data/out.wav", PermissionError(errno.EACCES, "Permission denied"))
    assert isinstance(denied, InvalidInput)


def test_a_loudness_travels_with_the_request_and_is_checked() -> None:
    plain = JobRequest("Level.", job_id="b" * 32)
    mastered = JobRequest("Level.", job_id="b" * 32, loudness=-20)
    assert mastered.loudness == -20.0 and isinstance(mastered.loudness, float)
    assert JobRequest.from_dict(mastered.to_dict()) == mastered
    assert JobRequest.from_dict(plain.to_dict()) == plain
    assert JobRequest.from_dict({k: v for k, v in plain.to_dict().items() if k != "loudness"}) == plain
    # Requests without a loudness hash as they did before jobs took one: existing keys still match.
    before = {"text": "Level.", "options": plain.options.to_dict(), "format": "wav"}
    blob = json.dumps(before, sort_keys=True, ensure_ascii=False).encode("utf-8")
    assert plain.fingerprint() == hashlib.sha256(blob).hexdigest() != mastered.fingerprint()
    assert "-20 LUFS" in mastered.summary() and "LUFS" not in plain.summary()
    assert JobRequest("Level.", loudness=np.float32(-18)).loudness == -18.0  # numpy numbers too
    result = JobResult.from_dict({**RESULT.to_dict(), "loudness": -20.0})
    assert result.loudness == -20.0 and JobResult.from_dict(result.to_dict()) == result
    stored_before = {k: v for k, v in RESULT.to_dict().items() if k != "loudness"}
    assert JobResult.from_dict(stored_before).loudness is None  # results stored before still read
    for bad in (-50, 0, float("nan"), float("inf"), "-18", True):
        with pytest.raises(InvalidInput, match="the loudness must be a number of LUFS from -40 to -10"):
            JobRequest("Level.", loudness=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: JobRequest("x \ud800 y"), r"the text has a lone surrogate \(U\+D800\) at character 3, "),
        (lambda: JobRequest("caf\udce9."), r"the text has a lone surrogate \(U\+DCE9\) at character 4, "),
        (lambda: JobRequest("hi", SynthesisOptions("jo\udfffe")), r"the voice .* \(U\+DFFF\) at character 3"),
        (
            lambda: check_key("k\ud83d"),
            r"the idempotency key has a lone surrogate \(U\+D83D\) at character 2",
        ),
        (lambda: check_key(5), "the idempotency key must be a string, not int"),
    ],
)
def test_text_that_is_not_unicode_is_refused_where_it_is(make: Callable[[], object], message: str) -> None:
    """Half of a character (an emoji's first UTF-16 half) or a byte that was not UTF-8: no encoding
    stores it, so it is refused at the request, with its place, before a broker or Redis sees it."""
    with pytest.raises(InvalidInput, match=message):
        make()


def test_text_with_any_character_of_unicode_is_taken() -> None:
    text = "Café, naïve, 東京, 😀 and \u200d: all of Unicode."
    assert JobRequest(text).text == check_text(text) == text
    assert check_key("clé-😀") == "clé-😀"
