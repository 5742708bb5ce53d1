"""Graph lanes: the one thread per device that replays a kind of captured CUDA graph."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

_lanes: dict[tuple[str, int], ThreadPoolExecutor] = {}
_lanes_lock = threading.Lock()


def graph_lane(device_id: int, stage: str = "graphs") -> ThreadPoolExecutor:
    """The one thread that runs every ``stage`` graph of this process on ``device_id``.

    Waveform graphs (``"graphs"``) share one arena: a replay writes to the addresses it was
    captured with, so no two may run at once, and nothing else may allocate from that arena
    (see ``synthesis.sessions.ArenaUser``). Weights live outside it. Front graphs
    (``"fronts"``) each keep an arena of their own, and their lane owns their buffers.
    """
    with _lanes_lock:
        if (stage, device_id) not in _lanes:
            prefix = f"ttsfarm-{stage}{device_id}"
            _lanes[(stage, device_id)] = ThreadPoolExecutor(1, thread_name_prefix=prefix)
        return _lanes[(stage, device_id)]
