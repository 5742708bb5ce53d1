"""The host's side of a shared engine: one batcher served to the worker's consumer processes.

See ``synthesis.engine_link`` for why and for the messages. Each consumer gets a link: a thread
that reads its requests and hands segments to the batcher, and a thread that sends the answers,
so that the batcher's runners never wait on a socket. A consumer that goes away only closes its
link; its segments already queued still run, and their answers are dropped.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import shutil
import tempfile
import threading
from concurrent.futures import Future
from multiprocessing.connection import Connection, Listener
from typing import Any, Final

from synthesis.batching import SegmentBatcher
from synthesis.engine_link import FAMILY, EngineFacts, HostFacts, hang_up
from ttsfarm.core.voices import Voice

log = logging.getLogger(__name__)

SOCKET_NAME: Final = "engine.sock"
WAITING_CONSUMERS: Final = 64
"""Connections the socket holds before :meth:`EngineHost.serve` takes them (more consumers
than this wait in their ``connect`` instead)."""
_STOP: Final = object()


class EngineHost:
    """Serves ``batcher`` on a Unix socket in a private folder under ``temp_dir``.

    The socket is there from the start, so consumers can be started (and connect) while the
    engine still loads; their connections wait until :meth:`serve`."""

    facts: HostFacts
    """What consumers are told about the engine; set by :meth:`serve`."""

    def __init__(self, batcher: SegmentBatcher, temp_dir: str | None = None) -> None:
        self.batcher = batcher
        self.authkey = os.urandom(32)
        self._folder = tempfile.mkdtemp(prefix="ttsfarm-engine-", dir=temp_dir)
        self.address = os.path.join(self._folder, SOCKET_NAME)
        self._listener = Listener(self.address, FAMILY, backlog=WAITING_CONSUMERS, authkey=self.authkey)
        self._links: list[_Link] = []
        self._links_lock = threading.Lock()
        self._closed = False
        self._batches = 0
        batcher.observe(self._batch_ran)
        self._acceptor = threading.Thread(target=self._accept, name="ttsfarm-engine-host", daemon=True)

    def serve(self, on_gpu: bool) -> None:
        """Take consumers from now on: the engine is loaded (``on_gpu``: on a GPU)."""
        self.facts = HostFacts(self.batcher.max_batch, self.batcher.runners, on_gpu, os.getpid())
        self._acceptor.start()

    def close(self) -> None:
        """Stop taking consumers and close every link (the batcher is the caller's to close)."""
        with self._links_lock:
            self._closed = True
            links, self._links = self._links, []
        self._listener.close()
        for link in links:
            link.close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def _accept(self) -> None:
        while True:
            try:
                connection = self._listener.accept()
            except Exception as error:  # closed; or a wrong key, a peer that hung up mid-handshake
                with self._links_lock:
                    if self._closed:
                        return
                log.warning("engine host: refused a connection (%s)", error)
                continue
            link = _Link(connection, self)
            with self._links_lock:
                closed = self._closed  # a link accepted as the host closed is closed too
                if not closed:
                    self._links.append(link)
            if closed:
                link.close()
                return

    def _batch_ran(self, lengths: Any, seconds: float) -> None:
        """Each batch is told to one consumer, in turn: their metrics then add up to the engine's."""
        with self._links_lock:
            self._links = [link for link in self._links if link.open]
            if not self._links:
                return
            link = self._links[self._batches % len(self._links)]
            self._batches += 1
        link.send(("batch", list(lengths), seconds))


class _Link:
    """One consumer's connection: requests in on one thread, answers out on another."""

    def __init__(self, connection: Connection, host: EngineHost) -> None:
        self._connection = connection
        self._host = host
        self._outbox: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._queued: dict[int, Future[Any]] = {}
        """Segments of this consumer in the batcher, by request number, until answered."""
        self._lock = threading.Lock()
        """Guards ``_queued`` and ``open``."""
        self.open = True
        threading.Thread(target=self._read, name="ttsfarm-engine-link-in", daemon=True).start()
        threading.Thread(target=self._write, name="ttsfarm-engine-link-out", daemon=True).start()

    def send(self, message: tuple[Any, ...]) -> None:
        if self.open:
            self._outbox.put(message)

    def close(self) -> None:
        """Once, from whichever thread ends the link first (the host, its reader or its writer)."""
        with self._lock:
            if not self.open:
                return
            self.open = False
        self._outbox.put(_STOP)
        hang_up(self._connection)

    def _read(self) -> None:
        try:
            while True:
                kind, number, *args = self._connection.recv()
                self._serve(kind, number, args)
        except (EOFError, OSError):  # the consumer stopped, or the host is closing
            pass
        except Exception:  # a message that does not unpickle or fit: the consumer sees the end
            log.exception("engine host: a consumer's link failed; closing it")
        finally:
            self.close()

    def _serve(self, kind: str, number: int, args: list[Any]) -> None:
        batcher = self._host.batcher
        if kind == "submit":
            try:
                future = batcher.submit(*args)
            except Exception as error:  # the batcher is closed
                self.send(("error", number, portable(error)))
                return
            with self._lock:
                self._queued[number] = future
            future.add_done_callback(lambda done: self._answer(number, done))
        elif kind == "cancel":  # the batcher skips a cancelled segment it has not run yet
            with self._lock:
                queued = self._queued.pop(number, None)
            if queued is not None:
                queued.cancel()
        elif kind == "engine":  # may load a voice for seconds: not on this thread
            threading.Thread(target=self._load, args=(number, args[0]), daemon=True).start()
        elif kind == "stats":
            self.send(("done", number, batcher.stats))
        elif kind == "describe":
            self.send(("done", number, self._host.facts))
        else:
            self.send(("error", number, ValueError(f"unknown engine request {kind!r}")))

    def _load(self, number: int, voice: Voice) -> None:
        try:
            self.send(("done", number, EngineFacts.of(self._host.batcher.engine(voice))))
        except Exception as error:
            self.send(("error", number, portable(error)))

    def _answer(self, number: int, future: Future[Any]) -> None:
        with self._lock:
            self._queued.pop(number, None)
        if future.cancelled():
            return
        error = future.exception()
        self.send(("done", number, future.result()) if error is None else ("error", number, portable(error)))

    def _write(self) -> None:
        while (message := self._outbox.get()) is not _STOP:
            try:
                self._connection.send(message)
            except (OSError, ValueError):  # the consumer went away: its answers are dropped
                self.close()
                return
            except Exception as error:  # an answer that does not pickle: its job is told why
                log.exception("engine host: could not send %s to a consumer", message[0])  # type: ignore[index]
                if not self._send_failure(message, error):
                    self.close()  # the consumer sees the end: what waits there fails, nothing hangs
                    return

    def _send_failure(self, message: Any, error: Exception) -> bool:
        """Answer the request ``message`` answered with ``error`` instead; False if that fails too."""
        if message[0] not in ("done", "error"):
            return True  # a batch note: nobody waits on it
        try:
            self._connection.send(("error", message[1], RuntimeError(f"the engine's answer failed: {error}")))
        except Exception:
            return False
        return True


def portable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling (ttsfarm's errors do), else a RuntimeError that says it."""
    try:
        back: BaseException = pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return back
