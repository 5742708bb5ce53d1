"""A key's own limits, kept in its record: set by ``ttsfarm keys``, shown at ``/v1/keys/me``, and
held by the gateway in place of the settings, the priority of the key's jobs among them. Real
Redis (a database no worker reads), a real ``ttsfarm serve`` and the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
import redis

from tests.conftest import emptied
from tests.farm.conftest import REDIS_SERVER, farm_env, start_gateway, waiting

URL = f"{REDIS_SERVER}/9"
QUEUE = "ttsfarm"


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    yield from emptied(URL)


def keys_command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    run = [sys.executable, "-m", "ttsfarm", "keys", *args]
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def test_a_keys_own_limits_hold_in_place_of_the_settings(
    broker: redis.Redis, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = farm_env(URL, s3_endpoint, TTSFARM_GATEWAY_KEY_JOBS="50", TTSFARM_GATEWAY_KEY_CHARS_PER_DAY="0")
    narrow = keys_command(env, "add", "narrow", "--chars-per-day", "40", "--priority", "bulk").stdout.strip()
    wide = keys_command(env, "add", "wide").stdout.strip()
    listed = keys_command(env, "list").stdout
    assert "jobs settings, characters a day 40, priority bulk" in listed
    assert "jobs settings, characters a day settings, priority interactive" in listed
    text = "Thirty characters, give or take."
    for gateway in start_gateway(tmp_path_factory, env):
        with httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {narrow}"}) as api:
            me = api.get("/v1/keys/me").json()
            first = api.post("/v1/jobs", json={"text": text})
            over = api.post("/v1/jobs", json={"text": text})
            pushy = api.post("/v1/jobs", json={"text": "Me first.", "priority": "interactive"})
            keys_command(env, "limits", "narrow", "--chars-per-day", "0")
            later = api.post("/v1/jobs", json={"text": text})
        with httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {wide}"}) as api:
            bulk = api.post("/v1/jobs", json={"text": text})
            urgent = api.post("/v1/jobs", json={"text": "Someone waits.", "priority": "interactive"})
            unknown = api.post("/v1/jobs", json={"text": text, "priority": "urgent"})
    assert (me["jobs_in_flight"], me["chars_per_day"], me["priority"]) == (50, 40, "bulk")
    assert first.status_code == 202 and later.status_code == 202, (first.text, later.text)
    assert over.status_code == 429 and over.json()["error"]["code"] == "daily_characters"
    assert pushy.status_code == 403, pushy.text
    assert "this key's jobs are bulk at most" in pushy.json()["error"]["message"]
    assert bulk.status_code == urgent.status_code == 202
    assert unknown.status_code == 400 and "unknown priority 'urgent'" in unknown.json()["error"]["message"]
    queued = [json.loads(message)["headers"]["id"] for message in waiting(broker, QUEUE)]
    ids = [answer.json()["id"] for answer in (first, later, bulk, urgent)]
    assert queued[-1] == ids[-1]  # the interactive job is the next a worker takes
    assert sorted(queued) == sorted(ids)


def test_bad_limits_are_refused_with_what_to_fix(broker: redis.Redis, s3_endpoint: str) -> None:
    env = farm_env(URL, s3_endpoint)
    run = [sys.executable, "-m", "ttsfarm", "keys", "limits", "nobody", "--jobs", "3"]
    unknown = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
    negative = subprocess.run([*run[:-1], "-1"], env=env, capture_output=True, text=True, timeout=60)
    assert unknown.returncode != 0 and "no key called 'nobody'" in unknown.stderr
    assert negative.returncode != 0 and "-1 is not in the range x>=0" in negative.stderr
    assert "Traceback" not in unknown.stderr + negative.stderr
