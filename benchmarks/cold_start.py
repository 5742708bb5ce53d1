"""One worker start, timed: build the synthesizer from settings, run one short job, report.

    python benchmarks/cold_start.py VOICE.onnx

Prints one JSON line with the seconds from the start of this process to the first job done
(imports, model load and conversion, session build, warm-up and the job itself).
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synthesis.build import local_synthesizer  # noqa: E402
from ttsfarm.core.jobs import JobRequest  # noqa: E402
from ttsfarm.core.settings import Settings  # noqa: E402
from ttsfarm.storage import LocalStorage  # noqa: E402

TEXT = "The bridge opened on a Tuesday. Nobody in Ellery had expected the mayor to cry."


def main() -> None:
    imported = time.perf_counter()
    settings = Settings.load().with_options(voice=sys.argv[1])
    with tempfile.TemporaryDirectory() as folder, local_synthesizer(settings) as synthesizer:
        result = synthesizer.synthesize(JobRequest(TEXT), LocalStorage(folder), "first.wav")
        done = time.perf_counter()
        engine = synthesizer.batcher.engine(synthesizer.voice(settings.voice))
        report = {
            "imports_s": imported - STARTED,
            "first_job_done_s": done - STARTED,
            "audio_s": result.duration,
            "provider": engine.provider,
            "precision": engine.precision,
            "engine_warmup_s": engine.warmup_seconds,
            "session_build_s": engine.session_seconds,
        }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
