"""API keys of the HTTP gateway, kept in the farm's Redis as hashes only.

A key reads ``tfk_<id>_<secret>``: the id (8 hex digits, not secret) finds the key's record, and
the secret (43 URL-safe characters, 256 random bits) is checked against the SHA-256 kept there
with :func:`hmac.compare_digest`, in constant time. The key itself is printed once by
``ttsfarm keys add`` and stored nowhere. A plain SHA-256 suits random 256-bit secrets: there is
no dictionary to try, so a slow password hash would only slow every request.

Layout in Redis::

    ttsfarm:gateway:keys        hash  name -> key id
    ttsfarm:gateway:key:<id>    hash  name, sha256, created_at, callback_secret

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

from ttsfarm.errors import InvalidInput
from ttsfarm.farm.registry import KEY_PREFIX, connect, reach

KEY_PREFIX_TEXT: Final = "tfk"
NAMES_KEY: Final = f"{KEY_PREFIX}gateway:keys"
RECORD_PREFIX: Final = f"{KEY_PREFIX}gateway:key:"
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_KEY: Final = re.compile(rf"{KEY_PREFIX_TEXT}_(?P<id>[0-9a-f]{{8}})_(?P<secret>[A-Za-z0-9_-]{{43}})")
_ID_BYTES: Final = 4
_SECRET_BYTES: Final = 32


@dataclass(frozen=True)
class ApiKey:
    """What is kept of a key: never the key itself."""

    name: str
    key_id: str
    created_at: float


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class KeyStore:
    """Adds, lists, revokes and checks the gateway's API keys."""

    def __init__(self, url: str, tls: Mapping[str, str] | None = None) -> None:
        self.url = url
        self._redis = connect(url, tls)

    def add(self, name: str) -> str:
        """Make a key called ``name`` and return it; only its hash is kept."""
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
        }
        reach(self.url, self._redis.hset, RECORD_PREFIX + key_id, mapping=record)
        return f"{KEY_PREFIX_TEXT}_{key_id}_{secret}"

    def list_keys(self) -> list[ApiKey]:
        """Every key, by name."""
        names: dict[str, str] = reach(self.url, self._redis.hgetall, NAMES_KEY)
        keys = []
        for name, key_id in sorted(names.items()):
            created = reach(self.url, self._redis.hget, RECORD_PREFIX + key_id, "created_at")
            keys.append(ApiKey(name, key_id, float(created or 0.0)))
        return keys

    def revoke(self, name: str) -> None:
        """Remove the key called ``name``: the next request that sends it is refused."""
        key_id = reach(self.url, self._redis.hget, NAMES_KEY, name)
        if key_id is None:
            known = ", ".join(key.name for key in self.list_keys()) or "none yet"
            raise InvalidInput(f"no key called {name!r} (keys: {known})")
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

    def verify(self, key: str) -> str | None:
        """The name of the key, or ``None`` if it is not a key that is in force."""
        match = _KEY.fullmatch(key)
        if match is None:
            return None
        record: dict[str, str] = reach(self.url, self._redis.hgetall, RECORD_PREFIX + match["id"])
        expected = record.get("sha256", "")
        # Constant time, so the secret cannot be found by timing the answers; an unknown id is
        # compared too (against a digest no secret has), to answer it at the same pace.
        if hmac.compare_digest(_digest(match["secret"]), expected or _digest("")) and expected:
            return record["name"]
        return None
