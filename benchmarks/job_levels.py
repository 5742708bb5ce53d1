"""How loud each job comes out, at the voice's own level and with a loudness asked for.

    .venv/bin/python benchmarks/job_levels.py [--texts benchmarks/quality_texts.txt] [--jobs 12]
        [--loudness -18]

Runs each line of --texts as one job through the in-process pipeline (the same one a worker
runs; CPU here), once at the voice's own level and once with --loudness, and prints each file's
integrated loudness (BS.1770, LUFS) and true peak (dBTP), then the spread across jobs. A prompt
catalog or a speech dataset hears that spread as some prompts louder than others.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import soundfile as sf

from synthesis.build import local_synthesizer
from ttsfarm.core.jobs import JobRequest
from ttsfarm.core.loudness import integrated_loudness, true_peak
from ttsfarm.core.settings import Settings
from ttsfarm.storage import LocalStorage

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=Path, default=ROOT / "benchmarks" / "quality_texts.txt")
    parser.add_argument("--jobs", type=int, default=12, help="at least 2")
    parser.add_argument("--loudness", type=float, default=-18.0)
    args = parser.parse_args()
    texts = [line.strip() for line in args.texts.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = texts[: max(args.jobs, 2)]
    levels: dict[str, list[float]] = {"own level": [], f"{args.loudness:g} LUFS": []}
    print("| job | own level, LUFS | own true peak, dBTP | mastered, LUFS | mastered true peak, dBTP |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder, local_synthesizer(Settings()) as synthesizer:
        storage = LocalStorage(folder)
        for number, text in enumerate(texts):
            row = []
            for (label, found), loudness in zip(levels.items(), (None, args.loudness), strict=True):
                request = JobRequest(text, format="flac", loudness=loudness)
                result = synthesizer.synthesize(request, storage, f"{number}-{label}.flac")
                audio, rate = sf.read(result.location, dtype="float32")
                found.append(integrated_loudness(audio, rate))
                row += [f"{found[-1]:.2f}", f"{true_peak(audio):.2f}"]
            print(f"| {number + 1}: {text[:40]}... | " + " | ".join(row) + " |")
    for label, found in levels.items():
        spread = max(found) - min(found)
        print(
            f"{label}: {min(found):.2f} to {max(found):.2f} LUFS, spread {spread:.2f} LU, "
            f"standard deviation {statistics.stdev(found):.2f} LU over {len(found)} jobs"
        )


if __name__ == "__main__":
    main()
