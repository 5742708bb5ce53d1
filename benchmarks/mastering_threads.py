"""Whether mastering runs in parallel in threads, as a worker's job threads run it, on real speech.

Speaks ``examples/ellery.txt`` once (``ttsfarm synth --loudness off``, about 125 s), then times
each part of ``ttsfarm.mastering`` alone and in N threads at once. A ratio of 1.0 means the
threads ran in parallel; N means they ran one after the other (the part holds the interpreter
lock). Then masters a block of ten minutes (the speech repeated) in a fresh process and prints
its CPU time and how much it raised the process's peak memory (docs/deploy.md).

    .venv/bin/python benchmarks/mastering_threads.py [--threads 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ttsfarm import mastering  # noqa: E402

TEXT = ROOT / "examples" / "ellery.txt"
BLOCK_SECONDS = 600.0

BLOCK_PEAK = """
import resource, sys, time
import numpy as np, soundfile as sf
from ttsfarm.mastering import master
audio, rate = sf.read(sys.argv[1], dtype="float32")
block = np.tile(audio, int(np.ceil(float(sys.argv[2]) * rate / len(audio))))[: int(float(sys.argv[2]) * rate)]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu = time.process_time()
master(block, rate, -18.0)
cpu = time.process_time() - cpu
print(cpu, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


def at_once(work: Callable[[], object], threads: int) -> float:
    """Wall seconds for ``threads`` threads each doing ``work`` once, started together."""
    workers = [threading.Thread(target=work) for _ in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ttsfarm-mastering-") as folder:
        spoken = Path(folder) / "speech.flac"
        command = [sys.executable, "-m", "ttsfarm", "synth", "-f", str(TEXT), "-o", str(spoken)]
        subprocess.run([*command, "--loudness", "off", "--quiet"], check=True, cwd=ROOT)
        audio, rate = sf.read(spoken, dtype="float32")
        parts: dict[str, Callable[[], object]] = {
            "integrated_loudness (libebur128)": lambda: mastering.integrated_loudness(audio, rate),
            "oversample (libsoxr)": lambda: mastering.oversample(audio),
            "peak_envelope": lambda: mastering.peak_envelope(audio),
            "master": lambda: mastering.master(audio, rate, mastering.TARGET_LUFS),
        }
        print(f"{len(audio) / rate:.1f} s of speech, {args.threads} threads, median of {args.repeats}")
        print(f"| part | 1 thread ms | {args.threads} at once ms | ratio |")
        print("|---|---|---|---|")
        for name, work in parts.items():
            work()  # warm
            alone = statistics.median(at_once(work, 1) for _ in range(args.repeats))
            together = statistics.median(at_once(work, args.threads) for _ in range(args.repeats))
            print(f"| {name} | {alone * 1000:.0f} | {together * 1000:.0f} | {together / alone:.2f} |")
        done = subprocess.run(
            [sys.executable, "-c", BLOCK_PEAK, str(spoken), str(BLOCK_SECONDS)],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        cpu, peak_mib = (float(value) for value in done.stdout.split())
        per_second = cpu / BLOCK_SECONDS * 1000
        print(
            f"a {BLOCK_SECONDS:.0f} s block: {cpu:.2f} s of CPU ({per_second:.1f} ms per audio second), "
            f"peak memory +{peak_mib:.0f} MiB"
        )


if __name__ == "__main__":
    main()
