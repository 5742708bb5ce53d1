"""Watching what Redis runs, for tests that must know a command was sent (or was not)."""

from __future__ import annotations

import threading

import redis


class Monitor:
    """The commands Redis runs while it watches that name ``word`` (MONITOR sees every client's):
    their names, in order."""

    def __init__(self, url: str, word: str) -> None:
        self.url, self.word, self.seen = url, word, []
        self._stop, self._ready = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        assert self._ready.wait(5)

    def _watch(self) -> None:
        with redis.Redis.from_url(self.url).monitor() as monitor:
            self._ready.set()
            for command in monitor.listen():
                if self.word in command["command"]:
                    self.seen.append(command["command"].split()[0].upper())
                if self._stop.is_set():
                    return

    def stop(self) -> list[str]:
        self._stop.set()
        redis.Redis.from_url(self.url).ping()  # one more command ends the watch
        self._thread.join(5)
        return self.seen
