"""API keys of the HTTP gateway, kept in the farm's Redis as hashes only.

A key reads ``tfk_<id>_<secret>``: the id (8 hex digits, not secret) finds the key's record, and
the secret (43 URL-safe characters, 256 random bits) is checked against the SHA-256 kept there
with :func:`hmac.compare_digest`, in constant time. The key itself is printed once by
``ttsfarm keys add`` and stored nowhere. A plain SHA-256 suits random 256-bit secrets: there is
no dictionary to try, so a slow password hash would only slow every request.

Layout in Redis::

    ttsfarm:gateway:keys        hash  name -> key id
    ttsfarm:gateway:key:<id>    hash  name, sha256, created_at, callback_secret, and the key's own
                                      limits where it has any: jobs_in_flight, chars_per_day,
                                      priority

A key's callback secret signs the callbacks of its jobs (``gateway.callbacks``); unlike the key,
it is kept as it is, since the gateway signs with it, and the key's holder can read it.

Every gateway process reads the same records, so a key added or revoked anywhere counts at once
on every gateway.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ttsfarm.core.errors import InvalidInput
from ttsfarm.core.job_limits import PRIORITIES, check_priority
from ttsfarm.farm.registry import KEY_PREFIX, connect, reach

KEY_PREFIX_TEXT: Final = "tfk"
NAMES_KEY: Final = f"{KEY_PREFIX}gateway:keys"
RECORD_PREFIX: Final = f"{KEY_PREFIX}gateway:key:"
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_KEY: Final = re.compile(rf"{KEY_PREFIX_TEXT}_(?P<id>[0-9a-f]{{8}})_(?P<secret>[A-Za-z0-9_-]{{43}})")
_ID_BYTES: Final = 4
_SECRET_BYTES: Final = 32


@dataclass(frozen=True)
class KeyLimits:
    """What one key may use, kept in its record. ``None``: the gateway's setting for every key
    (``TTSFARM_GATEWAY_KEY_JOBS``, ``TTSFARM_GATEWAY_KEY_CHARS_PER_DAY``); 0: no limit."""

    jobs_in_flight: int | None = None
    chars_per_day: int | None = None
    priority: str = PRIORITIES[0]
    """The highest priority the key's jobs get: ``bulk`` keeps them behind every interactive job
    that waits, its speech requests too."""

    def __post_init__(self) -> None:
        check_priority(self.priority)
        for name in ("jobs_in_flight", "chars_per_day"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                what = name.replace("_", " ")
                raise InvalidInput(f"a key's {what} is a whole number, 0 or more, not {value!r}")

    def to_record(self) -> dict[str, str]:
        """The fields of the key's record: those set, and the priority."""
        record = {"priority": self.priority}
        for name in ("jobs_in_flight", "chars_per_day"):
            if getattr(self, name) is not None:
                record[name] = str(getattr(self, name))
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, str]) -> KeyLimits:
        jobs, chars = record.get("jobs_in_flight"), record.get("chars_per_day")
        return cls(
            None if jobs is None else int(jobs),
            None if chars is None else int(chars),
            record.get("priority", PRIORITIES[0]),
        )

    def job_priority(self, asked: str) -> str:
        """The priority a job asking for ``asked`` (checked) gets: at most the key's own."""
        return max(check_priority(asked), self.priority, key=PRIORITIES.index)

    def allows(self, asked: str) -> bool:
        """Whether a job of this key may ask for priority ``asked`` (checked)."""
        return self.job_priority(asked) == asked


@dataclass(frozen=True)
class ApiKey:
    """What is kept of a key: never the key itself."""

    name: str
    key_id: str
    created_at: float
    limits: KeyLimits = KeyLimits()


def _kept(key_id: str, record: Mapping[str, str]) -> ApiKey:
    return ApiKey(record["name"], key_id, float(record.get("created_at", 0.0)), KeyLimits.from_record(record))


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class KeyStore:
    """Adds, lists, revokes and checks the gateway's API keys."""

    def __init__(self, url: str, tls: Mapping[str, str] | None = None) -> None:
        self.url = url
        self._redis = connect(url, tls)

    def add(self, name: str, limits: KeyLimits | None = None) -> str:
        """Make a key called ``name``, with ``limits`` of its own if given, and return it; only
        its hash is kept."""
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise InvalidInput(
                f"a key name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter "
                f"or digit, not {name!r}"
            )
        key_id = secrets.token_hex(_ID_BYTES)
        secret = secrets.token_urlsafe(_SECRET_BYTES)
        if not reach(self.url, self._redis.hsetnx, NAMES_KEY, name, key_id):
            raise InvalidInput(
                f"there is a key called {name!r} already: revoke it first, or pick another name"
            )
        record = {
            "name": name,
            "sha256": _digest(secret),
            "created_at": repr(time.time()),
            "callback_secret": secrets.token_urlsafe(_SECRET_BYTES),
            **(limits or KeyLimits()).to_record(),
        }
        reach(self.url, self._redis.hset, RECORD_PREFIX + key_id, mapping=record)
        return f"{KEY_PREFIX_TEXT}_{key_id}_{secret}"

    def list_keys(self) -> list[ApiKey]:
        """Every key, by name."""
        names: dict[str, str] = reach(self.url, self._redis.hgetall, NAMES_KEY)
        ids = [key_id for _, key_id in sorted(names.items())]
        records = [(key_id, reach(self.url, self._redis.hgetall, RECORD_PREFIX + key_id)) for key_id in ids]
        return [_kept(key_id, record) for key_id, record in records if record]  # not one revoked meanwhile

    def set_limits(self, name: str, limits: KeyLimits) -> None:
        """Give the key called ``name`` these limits, in place of those it had."""
        key_id = self._id_of(name)
        pipe = self._redis.pipeline()
        pipe.hdel(RECORD_PREFIX + key_id, "jobs_in_flight", "chars_per_day")
        for field, value in limits.to_record().items():
            pipe.hset(RECORD_PREFIX + key_id, field, value)
        reach(self.url, pipe.execute)

    def _id_of(self, name: str) -> str:
        key_id = reach(self.url, self._redis.hget, NAMES_KEY, name)
        if key_id is None:
            known = ", ".join(key.name for key in self.list_keys()) or "none yet"
            raise InvalidInput(f"no key called {name!r} (keys: {known})")
        return str(key_id)

    def revoke(self, name: str) -> None:
        """Remove the key called ``name``: the next request that sends it is refused."""
        key_id = self._id_of(name)
        pipe = self._redis.pipeline()
        pipe.delete(RECORD_PREFIX + key_id)
        pipe.hdel(NAMES_KEY, name)
        reach(self.url, pipe.execute)

    def callback_secret(self, name: str) -> str:
        """The secret that signs the callbacks of ``name``'s jobs (made now for a key from before
        callbacks, which had none)."""
        key_id = reach(self.url, self._redis.hget, NAMES_KEY, name)
        if key_id is None:
            raise InvalidInput(f"no key called {name!r}")
        made = secrets.token_urlsafe(_SECRET_BYTES)
        reach(self.url, self._redis.hsetnx, RECORD_PREFIX + key_id, "callback_secret", made)
        return str(reach(self.url, self._redis.hget, RECORD_PREFIX + key_id, "callback_secret"))

    def verify(self, key: str) -> ApiKey | None:
        """What is kept of the key (its name and limits among it, from the one read of its
        record), or ``None`` if it is not a key that is in force."""
        match = _KEY.fullmatch(key)
        if match is None:
            return None
        record: dict[str, str] = reach(self.url, self._redis.hgetall, RECORD_PREFIX + match["id"])
        expected = record.get("sha256", "")
        # Constant time, so the secret cannot be found by timing the answers; an unknown id is
        # compared too (against a digest no secret has), to answer it at the same pace.
        if hmac.compare_digest(_digest(match["secret"]), expected or _digest("")) and expected:
            return _kept(match["id"], record)
        return None
