"""Callbacks: when a job that carries a callback URL ends, the gateway posts its state there.

The body is the job as ``GET /v1/jobs/{id}`` shows it. It is signed with the callback secret of
the API key that made the job (``GET /v1/keys/me`` shows it to that key): the header
``X-Ttsfarm-Signature`` is ``sha256=`` and the hex HMAC-SHA256 of ``"<timestamp>.<body>"``, where
the timestamp (Unix seconds) is the ``X-Ttsfarm-Timestamp`` header, so a receiver can refuse old
or forged posts. A post that fails (no answer, or not 2xx) is tried again after 1, 2, 4, 8 and
16 s; after :data:`TRIES` it is given up, and the gateway's log says so.

Every gateway process runs a :class:`CallbackSender`; the callbacks wait in the farm's Redis, and
each post is claimed first, so one callback is posted once however many gateways run.

Layout in Redis::

    ttsfarm:gateway:callbacks         hash  job id -> {"url", "key", "tries"}
    ttsfarm:gateway:callbacks:due     zset  job id, scored by when to look at it next
    ttsfarm:gateway:callback:<job>    string  a sender's claim, for the length of one post
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from ttsfarm.core.errors import InvalidInput, TtsfarmError
from ttsfarm.core.jobs import JobStatus
from ttsfarm.farm.registry import KEY_PREFIX, connect, reach

log = logging.getLogger(__name__)

CALLBACKS_KEY: Final = f"{KEY_PREFIX}gateway:callbacks"
DUE_KEY: Final = f"{KEY_PREFIX}gateway:callbacks:due"
CLAIM_PREFIX: Final = f"{KEY_PREFIX}gateway:callback:"
TRIES: Final = 6
"""Posts of one callback at most: the first, then five more after 1, 2, 4, 8 and 16 s."""
POLL_SECONDS: Final = 0.5
"""How often a sender looks for jobs that ended."""
POST_TIMEOUT_SECONDS: Final = 10.0
CLAIM_SECONDS: Final = 30
BATCH: Final = 100
MAX_URL_CHARS: Final = 2000


def check_callback_url(url: str) -> str:
    """The URL if a callback may be posted there, or :class:`InvalidInput` saying why."""
    parts = urlsplit(url)
    if len(url) > MAX_URL_CHARS or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(f"callback_url must be an http or https URL of at most {MAX_URL_CHARS} characters")
    if parts.username or parts.password:
        raise InvalidInput("callback_url must not hold a user name or password: callbacks are signed instead")
    return url


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Ttsfarm-Signature`` value of ``body`` posted at ``timestamp``."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class CallbackSender:
    """Keeps the callbacks of this gateway's farm: :meth:`add` one, and a thread of its own
    posts each once its job ended."""

    def __init__(
        self,
        url: str,
        statuses: Callable[[list[str]], list[JobStatus]],
        body_of: Callable[[JobStatus], bytes],
        secret_of: Callable[[str], str],
        tls: Mapping[str, str] | None = None,
    ) -> None:
        self.url = url
        self._redis = connect(url, tls)
        self._statuses, self._body_of, self._secret_of = statuses, body_of, secret_of
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, job_id: str, callback_url: str, key_name: str) -> None:
        entry = json.dumps({"url": callback_url, "key": key_name, "tries": 0})
        pipe = self._redis.pipeline()
        pipe.hset(CALLBACKS_KEY, job_id, entry)
        pipe.zadd(DUE_KEY, {job_id: time.time()})
        reach(self.url, pipe.execute)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ttsfarm-callbacks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(POST_TIMEOUT_SECONDS + 5)

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self.send_due()
            except TtsfarmError as error:  # Redis away: the callbacks wait there for its return
                log.warning("callbacks: %s", error)
            except Exception:  # one bad callback must not stop the others for good
                log.exception("callbacks: unexpected error")

    def send_due(self) -> int:
        """Post the callbacks of jobs that ended and are due; how many were posted."""
        now = time.time()
        due = reach(self.url, self._redis.zrangebyscore, DUE_KEY, 0, now, start=0, num=BATCH)
        if not due:
            return 0
        posted = 0
        for status in self._statuses(list(due)):
            if not status.done and status.state != "unknown":
                reach(self.url, self._redis.zadd, DUE_KEY, {status.job_id: now + POLL_SECONDS})
                continue
            claim = CLAIM_PREFIX + status.job_id
            if not reach(self.url, self._redis.set, claim, "1", nx=True, ex=CLAIM_SECONDS):
                continue  # another gateway posts it
            try:
                posted += self._post(status)
            finally:
                reach(self.url, self._redis.delete, claim)
        return posted

    def _post(self, status: JobStatus) -> int:
        raw = reach(self.url, self._redis.hget, CALLBACKS_KEY, status.job_id)
        if raw is None:
            reach(self.url, self._redis.zrem, DUE_KEY, status.job_id)
            return 0
        entry: dict[str, Any] = json.loads(raw)
        body = self._body_of(status)
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "ttsfarm-callbacks",
            "X-Ttsfarm-Job-Id": status.job_id,
            "X-Ttsfarm-Timestamp": timestamp,
            "X-Ttsfarm-Signature": signature(self._secret_of(entry["key"]), timestamp, body),
        }
        request = urllib.request.Request(entry["url"], data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=POST_TIMEOUT_SECONDS) as answer:
                delivered = 200 <= answer.status < 300
                reason = f"it answered {answer.status}"
        except urllib.error.HTTPError as error:
            delivered, reason = False, f"it answered {error.code}"
        except (urllib.error.URLError, OSError) as error:
            delivered, reason = False, str(getattr(error, "reason", error))
        tries = entry["tries"] + 1
        if delivered or tries >= TRIES:
            if not delivered:
                log.warning("job %s: callback given up after %d tries: %s", status.job_id, tries, reason)
            pipe = self._redis.pipeline()
            pipe.hdel(CALLBACKS_KEY, status.job_id)
            pipe.zrem(DUE_KEY, status.job_id)
            reach(self.url, pipe.execute)
            return int(delivered)
        entry["tries"] = tries
        pipe = self._redis.pipeline()
        pipe.hset(CALLBACKS_KEY, status.job_id, json.dumps(entry))
        pipe.zadd(DUE_KEY, {status.job_id: time.time() + 2 ** (tries - 1)})  # 1, 2, 4, 8, 16 s
        reach(self.url, pipe.execute)
        wait = 2 ** (tries - 1)
        log.info("job %s: callback not delivered (%s): tried again in %d s", status.job_id, reason, wait)
        return 0
