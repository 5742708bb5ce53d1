"""What finishing costs in CPU per second of audio, on real speech: mastering, a mastered job's
whole finish, a chapter's whole finish (join, master, FLAC, AAC and MP3 pieces, each measured),
and the encoders alone, with the choices made between them.

Speaks examples/ellery.txt once (`ttsfarm synth --loudness off`, about 125 s) and repeats it to
--seconds. Each row is the CPU time (this process and the ffmpegs it waits for) over the audio,
the lowest of --repeats. With --against REF, ``ttsfarm/core/mastering.py`` as it was at git REF is
measured beside today's, in the same run.

    .venv/bin/python benchmarks/mastering_cost.py [--seconds 600] [--repeats 3] [--against f5e5bd5~1]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ttsfarm.core.encoding import run_ffmpeg  # noqa: E402
from ttsfarm.core.files import sha256_file  # noqa: E402
from ttsfarm.core.finisher import finish_chapter  # noqa: E402
from ttsfarm.core.finishing import FinishRequest, PartAudio  # noqa: E402
from ttsfarm.core.jobs import SegmentTiming  # noqa: E402
from ttsfarm.core.mastering import master  # noqa: E402
from ttsfarm.core.synth_file import finish  # noqa: E402

TEXT = ROOT / "examples" / "ellery.txt"


def cpu_now() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def cpu_of(work: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = cpu_now()
        work()
        best = min(best, cpu_now() - started)
    return best


def module_at(ref: str, folder: Path) -> ModuleType:
    """The mastering module as it was at git ``ref``, loaded on its own (in ``ttsfarm/core/``,
    or in ``ttsfarm/`` before the core had its own folder)."""
    for place in ("ttsfarm/core/mastering.py", "ttsfarm/mastering.py"):
        shown = subprocess.run(["git", "show", f"{ref}:{place}"], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode == 0:
            break
    shown.check_returncode()
    source = shown.stdout
    if place == "ttsfarm/mastering.py":  # its imports of the core, where the core is now
        source = re.sub(r"\bttsfarm\.(?!core\b)", "ttsfarm.core.", source)
    path = folder / "mastering_then.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("mastering_then", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", help="a git ref: its mastering measured beside today's")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ttsfarm-cost-") as temp:
        folder = Path(temp)
        spoken = folder / "speech.flac"
        command = [sys.executable, "-m", "ttsfarm", "synth", "-f", str(TEXT), "-o", str(spoken)]
        subprocess.run([*command, "--loudness", "off", "--quiet"], check=True, cwd=ROOT)
        speech, rate = sf.read(spoken, dtype="float32")
        audio = np.tile(speech, int(np.ceil(args.seconds * rate / len(speech))))[: int(args.seconds * rate)]
        seconds = len(audio) / rate
        block = folder / "block.wav"
        sf.write(block, audio, rate, subtype="PCM_16")
        timings = [SegmentTiming("block", 0.0, seconds)]
        part = PartAudio(str(block), sha256_file(block), 0.0, tuple(timings))
        request = FinishRequest((part,), rate, -18.0, "benchmark")

        def encode(*codec: str) -> Callable[[], object]:
            return lambda: run_ffmpeg(["-i", str(block), *codec, "-b:a", "64k", "-f", "null", "-"], "encode")

        rows: dict[str, Callable[[], object]] = {
            "master() at -23 LUFS": lambda: master(audio, rate, -23.0),
            "master() at -18 LUFS": lambda: master(audio, rate, -18.0),
            "master() at -16 LUFS": lambda: master(audio, rate, -16.0),
        }
        if args.against:
            then = module_at(args.against, folder)
            rows[f"master() at -18 LUFS, {args.against}"] = lambda: then.master(audio, rate, -18.0)
        rows |= {
            "a mastered job: read, master, FLAC": lambda: finish(
                block, timings, folder / "job.flac", "flac", -18.0, None
            ),
            "a chapter: join, master, FLAC, AAC, MP3": lambda: finish_chapter(request, [block], folder, None),
            "encoder: AAC, fast coder (ours)": encode("-c:a", "aac", "-aac_coder", "fast"),
            "encoder: AAC, two-loop coder (ffmpeg's default)": encode("-c:a", "aac"),
            "encoder: MP3, LAME quality 7 (ours)": encode("-c:a", "libmp3lame", "-compression_level", "7"),
            "encoder: MP3, LAME default": encode("-c:a", "libmp3lame"),
            "encoder: FLAC": encode("-c:a", "flac"),
        }
        print(f"{seconds:.0f} s of joe's speech at {rate} Hz, lowest CPU time of {args.repeats}")
        print("| what | CPU s | CPU ms per audio s |")
        print("|---|---|---|")
        for name, work in rows.items():
            work()  # warm
            cpu = cpu_of(work, args.repeats)
            print(f"| {name} | {cpu:.2f} | {1000 * cpu / seconds:.2f} |")


if __name__ == "__main__":
    main()
