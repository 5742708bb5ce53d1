"""Sessions built on first use and kept, least recently used dropped first, for both engines.

A build (an ONNX Runtime session, or a waveform slot with its buffers) takes a second or two;
it holds only its own key's lock, so runners whose sessions exist go on running meanwhile.
:class:`SessionBuilds` counts and times every session an engine builds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import onnxruntime as ort

from synthesis.sessions import build_session

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class SessionCache(Generic[K, T]):
    """Up to ``capacity`` values by key, each made by :meth:`get` on first use."""

    def __init__(self, capacity: int, what: str) -> None:
        self.capacity = max(capacity, 1)
        self.what = what
        """What the values are, for the log line when one is dropped."""
        self._values: OrderedDict[K, T] = OrderedDict()
        self._building: dict[K, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], T]) -> T:
        """The value for ``key``, made now if there is none (by one thread; others wait)."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            building = self._building.setdefault(key, threading.Lock())
        with building:
            with self._lock:
                if key in self._values:  # another thread made it meanwhile
                    return self._values[key]
            value = make()
            self.put(key, value)
            with self._lock:
                self._building.pop(key, None)
        return value

    def find(self, key: K) -> T | None:
        """The value for ``key`` (now the most recently used), or ``None``."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
            return self._values.get(key)

    def put(self, key: K, value: T) -> None:
        """Keep ``value`` for ``key`` (in place of any other), dropping the least recently used."""
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.capacity:
                dropped, _ = self._values.popitem(last=False)
                log.info("dropped the %s of %s", self.what, dropped)

    def pop(self, key: K) -> T | None:
        with self._lock:
            return self._values.pop(key, None)

    def keys(self) -> list[K]:
        with self._lock:
            return list(self._values)

    def values(self) -> list[T]:
        with self._lock:
            return list(self._values.values())

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._values


class SessionBuilds:
    """Builds an engine's sessions, counting them and the seconds they took."""

    def __init__(self) -> None:
        self.built = 0
        self.seconds = 0.0
        self._lock = threading.Lock()

    def build(
        self, model: bytes | str, options: ort.SessionOptions, providers: list[Any]
    ) -> ort.InferenceSession:
        started = time.perf_counter()
        session = build_session(model, options, providers)
        self.count(time.perf_counter() - started)
        return session

    def count(self, seconds: float) -> None:
        """Count one build that took ``seconds``."""
        with self._lock:
            self.built += 1
            self.seconds += seconds
