"""The device's gate (``synthesis.run_gate``): batches side by side, a capture alone, and a
capture waiting goes before batches that come after it."""

from __future__ import annotations

import threading
import time

from synthesis.run_gate import RunGate

WAIT = 5.0


def test_a_capture_waits_for_the_batches_on_the_device_and_new_batches_wait_for_it() -> None:
    gate = RunGate()
    order: list[str] = []
    first_in, first_out, capture_waiting = threading.Event(), threading.Event(), threading.Event()

    def first_batch() -> None:
        with gate.shared():
            order.append("batch 1 in")
            first_in.set()
            first_out.wait(WAIT)
            order.append("batch 1 out")

    def capture() -> None:
        capture_waiting.set()
        with gate.alone():
            order.append("capture")

    def later_batch() -> None:
        with gate.shared():
            order.append("batch 2")

    threads = [threading.Thread(target=first_batch)]
    threads[0].start()
    assert first_in.wait(WAIT)
    threads.append(threading.Thread(target=capture))
    threads[1].start()
    assert capture_waiting.wait(WAIT)
    while not gate.waiting_alone:  # the capture is in its wait
        time.sleep(0.01)
    threads.append(threading.Thread(target=later_batch))
    threads[2].start()
    time.sleep(0.2)
    assert order == ["batch 1 in"]  # the capture waits for batch 1; batch 2 waits behind the capture
    first_out.set()
    for thread in threads:
        thread.join(WAIT)
    assert order == ["batch 1 in", "batch 1 out", "capture", "batch 2"]
    assert gate.batches == 0


def test_nothing_runs_beside_a_capture() -> None:
    gate = RunGate()
    inside = {"batches": 0, "captures": 0}
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def enter(kind: str) -> None:
        with lock:
            inside[kind] += 1
            seen.append((inside["batches"], inside["captures"]))
        time.sleep(0.002)
        with lock:
            inside[kind] -= 1

    def batches() -> None:
        for _ in range(60):
            with gate.shared():
                enter("batches")

    def captures() -> None:
        for _ in range(15):
            with gate.alone():
                enter("captures")

    threads = [threading.Thread(target=batches) for _ in range(4)] + [threading.Thread(target=captures)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(seen) == 4 * 60 + 15
    assert all(captures == 0 or (captures == 1 and batches == 0) for batches, captures in seen)
    assert max(batches for batches, _ in seen) > 1  # batches did go side by side
