"""The consumer's side of a shared engine: a batcher whose engine runs in another process.

A GPU worker with several consumer processes (``TTSFARM_CONSUMERS``) keeps one engine, in the
process that owns the GPU (``synthesis.engine_host``). Each consumer runs Celery and its jobs'
own work (registry, text, encoding, storage) under an interpreter lock of its own, and sends the
segments through a :class:`RemoteBatcher` to that engine, whose batcher forms batches from the
segments of every consumer: one engine's memory on the GPU, and batches as full as ever.

The link is one Unix socket per consumer (``multiprocessing.connection``: pickled messages, a
random key known only to the worker's processes). Messages are tuples; a request carries a
number its answer repeats:

- consumer to host: ``("submit", n, voice, item, scales)``, ``("cancel", n)`` (of a submit),
  ``("engine", n, voice)``, ``("stats", n)``, ``("describe", n)``;
- host to consumer: ``("done", n, value)``, ``("error", n, exception)`` and
  ``("batch", lengths, seconds)``, one batch the engine ran (each batch goes to one consumer,
  so that the consumers' metrics add up to the engine's).
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection
from typing import Any, Final

from synthesis.batching import BatcherStats, BatchObserver, EngineInfo
from synthesis.engine import EngineItem, EngineOptions, Scales, Spoken, voice_scales
from synthesis.sessions import CUDA
from ttsfarm.core.errors import TransientError
from ttsfarm.core.voices import Voice

log = logging.getLogger(__name__)

FAMILY: Final = "AF_UNIX"
ANSWER_TIMEOUT_SECONDS: Final = 600.0
"""Longest wait for the host to load a voice's engine or to report its counters."""


class EngineLost(TransientError):
    """The process that runs the engine is gone: the job is tried again (by a worker that has one)."""


@dataclass(frozen=True)
class EngineFacts:
    """What a consumer knows of an engine that runs in the host process."""

    voice: Voice
    options: EngineOptions
    provider: str
    precision: str
    warmup_seconds: float
    kind: str

    @classmethod
    def of(cls, engine: EngineInfo) -> EngineFacts:
        return cls(
            engine.voice,
            engine.options,
            engine.provider,
            engine.precision,
            engine.warmup_seconds,
            engine.kind,
        )

    @property
    def on_gpu(self) -> bool:
        return self.provider == CUDA

    def default_scales(self) -> Scales:
        return voice_scales(self.voice)


@dataclass(frozen=True)
class HostFacts:
    """The host's batcher, as ``("describe", n)`` answers."""

    max_batch: int
    runners: int
    on_gpu: bool
    pid: int


def hang_up(connection: Connection) -> None:
    """Close ``connection`` so that a thread blocked reading it wakes, and the peer sees the end
    at once (closing the handle alone does neither while a read is in progress)."""
    try:
        with socket.socket(fileno=os.dup(connection.fileno())) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed already
        pass
    connection.close()


class RemoteBatcher:
    """A :class:`~synthesis.batcher.SegmentBatcher` whose batches run in the host process.

    ``on_lost`` is called once if the link breaks (the host stopped or died): every segment
    still waiting fails with :class:`EngineLost`, and so does every later one.
    """

    def __init__(self, address: str, authkey: bytes, on_lost: Callable[[], None] | None = None) -> None:
        self._connection: Connection = Client(address, family=FAMILY, authkey=authkey)
        self._on_lost = on_lost
        self._send_lock = threading.Lock()
        self._numbers = itertools.count()
        self._waiting: dict[int, Future[Any]] = {}
        self._waiting_lock = threading.Lock()
        self._lost: str | None = None
        self._closing = False
        self._observers: list[BatchObserver] = []
        self._engines: dict[str, EngineFacts] = {}
        self._reader = threading.Thread(target=self._read, name="ttsfarm-engine-link", daemon=True)
        self._reader.start()
        try:
            self.host: HostFacts = self._answer("describe")
        except BaseException:
            self.close()
            raise

    @property
    def max_batch(self) -> int:
        return self.host.max_batch

    @property
    def runners(self) -> int:
        return self.host.runners

    @property
    def stats(self) -> BatcherStats:
        """The host batcher's counters: every consumer's segments together."""
        stats: BatcherStats = self._answer("stats")
        return stats

    @property
    def engine_process(self) -> int:
        return self.host.pid

    @property
    def engines(self) -> Mapping[str, EngineInfo]:
        return dict(self._engines)

    def engine(self, voice: Voice) -> EngineFacts:
        """The host's engine for ``voice``, loaded there on first use."""
        key = str(voice.model_path)
        found = self._engines.get(key)
        if found is None:
            found = self._engines[key] = self._answer("engine", voice)
        return found

    def submit(self, voice: Voice, item: EngineItem, scales: Scales) -> Future[Spoken]:
        """Queue one segment in the host's batcher. Cancelling the future (a job that stopped,
        a health probe that timed out) takes the segment out there too, if it has not run."""
        return self._ask("submit", voice, item, scales)

    def observe(self, observer: BatchObserver) -> None:
        self._observers.append(observer)

    def close(self) -> None:
        """Close the link; segments still waiting fail (``on_lost`` is not called)."""
        self._closing = True
        hang_up(self._connection)
        self._reader.join(5)

    def _answer(self, kind: str, *args: Any) -> Any:
        """The host's answer to one request, waited for (an engine may take minutes to load)."""
        future = self._ask(kind, *args)
        try:
            return future.result(ANSWER_TIMEOUT_SECONDS)
        except FutureTimeout:
            future.cancel()
            waited = f"{ANSWER_TIMEOUT_SECONDS:.0f} s"
            raise EngineLost(f"the engine process did not answer {kind!r} in {waited}") from None

    def _ask(self, kind: str, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        number = next(self._numbers)
        with self._waiting_lock:
            if self._lost is not None:
                raise EngineLost(self._lost)
            self._waiting[number] = future
        try:
            with self._send_lock:
                self._connection.send((kind, number, *args))
        except (OSError, ValueError) as error:  # closed, or the host went away
            self._lose(f"the engine process cannot be reached ({error})")
        except Exception as error:  # a request that does not pickle: this one fails, the link is fine
            with self._waiting_lock:
                self._waiting.pop(number, None)
            future.set_exception(error)
        future.add_done_callback(lambda done: self._withdraw(number, done))
        return future

    def _withdraw(self, number: int, future: Future[Any]) -> None:
        """A future its caller cancelled: forgotten here, and taken out of the host's batcher."""
        if not future.cancelled():
            return
        with self._waiting_lock:
            if self._waiting.pop(number, None) is None or self._lost is not None:
                return
        try:
            with self._send_lock:
                self._connection.send(("cancel", number))
        except (OSError, ValueError):  # the link is going: the reader will say so
            pass

    def _read(self) -> None:
        reason = "the engine process closed the link"
        try:
            while True:
                message = self._connection.recv()
                if message[0] == "batch":
                    self._tell_observers(message[1], message[2])
                    continue
                kind, number, value = message
                with self._waiting_lock:
                    future = self._waiting.pop(number, None)
                if future is None:
                    continue
                try:
                    if kind == "done":
                        future.set_result(value)
                    else:
                        future.set_exception(value)
                except InvalidStateError:  # cancelled by its caller meanwhile
                    pass
        except (EOFError, OSError) as error:
            reason = f"{reason} ({type(error).__name__})"
        except Exception as error:  # a message that does not unpickle: the link cannot go on
            log.exception("the link to the engine failed")
            reason = f"the link to the engine failed ({type(error).__name__}: {error})"
        finally:
            self._lose(reason)

    def _tell_observers(self, lengths: list[int], seconds: float) -> None:
        for observer in self._observers:
            try:
                observer(lengths, seconds)
            except Exception:  # a metric's bug must not stop the answers
                log.exception("a batch observer failed")

    def _lose(self, reason: str) -> None:
        with self._waiting_lock:
            first = self._lost is None
            self._lost = self._lost or reason
            waiting, self._waiting = self._waiting, {}
        try:
            for future in waiting.values():
                with suppress(InvalidStateError):  # cancelled or answered meanwhile
                    future.set_exception(EngineLost(reason))
        finally:
            if first and not self._closing and self._on_lost is not None:
                self._on_lost()
