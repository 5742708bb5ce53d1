"""Is an int8 model worth offering to CPU workers? fp32 against onnxruntime's dynamic int8
quantization of the same voice, on the CPU, same segments, one process.

    .venv/bin/python benchmarks/cpu_int8.py [--segments 24] [--repeats 3]

Prints one line per variant: size, seconds, audio s/s, and how far the audio is from fp32
(length change, log-mel distance on the common length). Noise is off so that the variants are
comparable item by item.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.log_mel import log_mel_distance
from ttsfarm.cli.sweep import corpus_items
from ttsfarm.core.voices import resolve_voice

CORPUS = Path(__file__).resolve().parent / "corpus.txt"
VARIANTS = {
    "int8 MatMul/Gemm": ["MatMul", "Gemm"],
    "int8 MatMul/Gemm/Conv": ["MatMul", "Gemm", "Conv"],
}


def session(model: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


def speak(sess: ort.InferenceSession, ids: list[list[int]]) -> tuple[float, list[np.ndarray]]:
    """One pass over the segments: seconds taken and the waveforms."""
    scales = np.array([0.0, 1.0, 0.0], dtype=np.float32)
    started = time.perf_counter()
    waves = []
    for row in ids:
        feeds = {
            "input": np.array([row], dtype=np.int64),
            "input_lengths": np.array([len(row)], dtype=np.int64),
            "scales": scales,
        }
        waves.append(sess.run(None, feeds)[0].reshape(-1))
    return time.perf_counter() - started, waves


def alternate(
    models: dict[str, Path], ids: list[list[int]], repeats: int
) -> dict[str, tuple[float, list[np.ndarray]]]:
    """Each variant's best pass; the variants take turns, so machine noise hits all alike."""
    sessions = {name: session(path) for name, path in models.items()}
    for sess in sessions.values():
        speak(sess, ids[:2])  # warm-up, not counted
    best: dict[str, tuple[float, list[np.ndarray]]] = {}
    for _ in range(repeats):
        for name, sess in sessions.items():
            seconds, waves = speak(sess, ids)
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, waves)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--segments", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    voice = resolve_voice("joe")
    ids = [list(item.phoneme_ids) for item in corpus_items(voice, CORPUS.read_text(encoding="utf-8"))]
    ids = ids[: args.segments]
    models = {"fp32": voice.model_path}
    with tempfile.TemporaryDirectory() as folder:
        for name, ops in VARIANTS.items():
            target = Path(folder) / f"{len(ops)}.onnx"
            quantize_dynamic(voice.model_path, target, op_types_to_quantize=ops, weight_type=QuantType.QInt8)
            models[name] = target
        results = alternate(models, ids, args.repeats)
        sizes = {name: path.stat().st_size / 1e6 for name, path in models.items()}
    reference = results["fp32"][1]
    rate = voice.sample_rate
    passes = f"best of {args.repeats} alternating passes"
    print(f"{len(ids)} segments, batch 1, {passes}, onnxruntime {ort.__version__}, CPU")
    print("| variant | MB | seconds | audio s/s | length change | log-mel distance to fp32 |")
    print("|---|---|---|---|---|---|")
    for name, (seconds, waves) in results.items():
        audio = sum(len(w) for w in waves) / rate
        change = sum(len(w) for w in waves) / sum(len(w) for w in reference) - 1
        distance = np.mean(
            [
                log_mel_distance(a[: min(len(a), len(b))], b[: min(len(a), len(b))], rate)
                for a, b in zip(reference, waves, strict=True)
            ]
        )
        figures = (
            f"{sizes[name]:.1f} | {seconds:.2f} | {audio / seconds:.1f} | {change:+.2%} | {distance:.4f}"
        )
        print(f"| {name} | {figures} |")


if __name__ == "__main__":
    main()
