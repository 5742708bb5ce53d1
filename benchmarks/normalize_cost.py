"""What reading text aloud (``synthesis.normalize``) costs, and what it buys: docs/reading.md.

Cost (the default): seconds per 1,000 words of prose (benchmarks/corpus.txt) and of
number-heavy text (the sentences below, repeated), for English normalisation against
espeak-ng's phonemization of the same sentences; best of --repeats. ``--nemo`` measures NeMo's
grammars (nemo_text_processing) on the same texts instead: run it in a venv that has them::

    .venv/bin/python benchmarks/normalize_cost.py [--repeats 5]
    python3 -m venv NEMO_ENV && NEMO_ENV/bin/pip install nemo-text-processing
    NEMO_ENV/bin/python benchmarks/normalize_cost.py --nemo

Quality, the ASR round trip: the number-heavy sentences are spoken by ttsfarm on the CPU with
and without normalisation (``--make-wavs``, project venv), then transcribed by Whisper base
(``--asr``, in the venv of benchmarks/quality.py). A sentence is read right when its transcript
says what the expected spoken form says: both sides go through the same word normaliser (our
English reader, so that Whisper's "$49.95" and "forty-nine dollars and ninety-five cents" are
alike, then lowercase words only); WER is jiwer's over those words::

    .venv/bin/python benchmarks/normalize_cost.py --make-wavs DIR
    .venv-quality/bin/python benchmarks/normalize_cost.py --asr DIR [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROSE: Final = ROOT / "benchmarks" / "corpus.txt"
WORDS: Final = 1_000
WIDTHS: Final = (6, 10, 10, 6, 8, 8)
"""Of the cost table's columns after the first."""
SYSTEMS: Final = ("as-written", "normalised")
"""Folders of --make-wavs: the same sentences without and with normalisation."""

# (written, expected spoken form)
SENTENCES: Final = [
    (
        "The ticket costs $49.95 at the door.",
        "The ticket costs forty-nine dollars and ninety-five cents at the door.",
    ),
    ("The meeting starts at 8:30 pm on Friday.", "The meeting starts at eight thirty PM on Friday."),
    ("She finished 3rd out of 120 runners.", "She finished third out of one hundred twenty runners."),
    ("The flight lands on March 15, 2024.", "The flight lands on March fifteenth, twenty twenty-four."),
    ("Prices rose by 50% in the 1990s.", "Prices rose by fifty percent in the nineteen nineties."),
    ("He drove at 100 km/h for 10 km.", "He drove at one hundred kilometers per hour for ten kilometers."),
    ("The parcel weighs 5 kg.", "The parcel weighs five kilograms."),
    ("Henry VIII married six times.", "Henry the Eighth married six times."),
    ("Dr. Smith lives at No. 5 Elm Street.", "Doctor Smith lives at number five Elm Street."),
    ("The store opens at 8:00 every day.", "The store opens at eight o'clock every day."),
    ("It cost £5 and €10 in 1984.", "It cost five pounds and ten euros in nineteen eighty-four."),
    ("The report is due on 2024-03-15.", "The report is due on March fifteenth, twenty twenty-four."),
    ("Louis XIV ruled for 72 years.", "Louis the Fourteenth ruled for seventy-two years."),
    (
        "Call 555-123-4567 before 5 pm.",
        "Call five five five, one two three, four five six seven before five PM.",
    ),
    # five digits: Whisper writes 1,250 as "1250", which no reader can tell from a year
    (
        "The 21st floor holds 12,500 books.",
        "The twenty-first floor holds twelve thousand five hundred books.",
    ),
]

WORDS_PROMPT: Final = (
    "Everything is written out in words, just as it is spoken: forty-nine dollars and ninety-five "
    "cents, the third of March, nineteen eighty-four, eight o'clock."
)
"""The second transcription's prompt: Whisper writes numbers as digits ("March 15" whether the voice
said fifteen or fifteenth); prompted with words it mostly writes what it heard, in words."""

_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"])")
_NOT_WORD: Final = re.compile(r"[^a-z ]+")
_SPOKEN_AS_ONE: Final = (
    (" a m ", " am "),
    (" p m ", " pm "),
    (" o clock ", " oclock "),
    ("per cent", "percent"),
)


def sentences(text: str) -> list[str]:
    """A simple split at sentence ends, the same for every system measured."""
    return [s for paragraph in text.split("\n\n") for s in _SENTENCE_END.split(paragraph.strip()) if s]


def texts() -> dict[str, list[str]]:
    """The prose and the number-heavy sentences, each repeated to at least :data:`WORDS` words."""
    prose = sentences(PROSE.read_text(encoding="utf-8"))
    numbers = [written for written, _ in SENTENCES]
    out = {}
    for name, base in (("prose", prose), ("numbers", numbers)):
        repeated = list(base)
        while sum(len(s.split()) for s in repeated) < WORDS:
            repeated += base
        out[name] = repeated
    return out


def best_of(repeats: int, work: Callable[[], object]) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        timings.append(time.perf_counter() - started)
    return min(timings)


def each(work: Callable[[str], object], items: list[str]) -> Callable[[], object]:
    return lambda: [work(item) for item in items]


def per_thousand(seconds: float, words: list[str]) -> float:
    return seconds * WORDS / sum(len(s.split()) for s in words)


# ---------------------------------------------------------------------------------------- cost


def measure_cost(repeats: int) -> None:
    from synthesis.normalize import reader_for
    from synthesis.phonemes import Phonemizer
    from ttsfarm.core.espeak import phonemize
    from ttsfarm.core.voices import resolve_voice

    voice = resolve_voice("joe")
    reader = reader_for(voice.espeak_voice)
    assert reader is not None
    plain, reading = Phonemizer(voice, normalize_text=False), Phonemizer(voice)
    print(f"seconds per {WORDS:,} words, best of {repeats} (voice {voice.name}, {voice.espeak_voice})")
    print("columns: normalise alone; espeak-ng on the normalised text; their ratio; all of")
    print("Phonemizer.ids (split, read, phonemize, map) with normalisation off and on")
    header = ("words", "normalise", "phonemize", "ratio", "ids off", "ids on")
    print(f"{'text':<8} " + " ".join(f"{h:>{w}}" for h, w in zip(header, WIDTHS, strict=True)))
    for name, batch in texts().items():
        spoken = [reader(s) for s in batch]
        normalise = best_of(repeats, each(reader, batch))
        espeak = best_of(repeats, each(lambda text: phonemize(voice.espeak_voice, text), spoken))
        off = best_of(repeats, each(plain.ids, batch))
        on = best_of(repeats, each(reading.ids, batch))
        words = sum(len(s.split()) for s in batch)
        n, e = per_thousand(normalise, batch), per_thousand(espeak, batch)
        print(
            f"{name:<8} {words:>6} {n:>10.4f} {e:>10.4f} {n / e:>6.2f}"
            f" {per_thousand(off, batch):>8.4f} {per_thousand(on, batch):>8.4f}"
        )


def measure_nemo(repeats: int) -> None:
    """NeMo's English grammars on the same texts (needs nemo_text_processing, hence pynini)."""
    import resource

    from nemo_text_processing.text_normalization.normalize import Normalizer

    started = time.perf_counter()
    normalizer = Normalizer(input_case="cased", lang="en", cache_dir=str(Path("/tmp") / "nemo-grammars"))
    print(f"NeMo grammars ready in {time.perf_counter() - started:.1f} s (built once, then cached)")
    print(f"{'text':<8} {'normalise s/1k words':>21}")
    for name, batch in texts().items():
        seconds = best_of(repeats, each(normalizer.normalize, batch))
        print(f"{name:<8} {per_thousand(seconds, batch):>21.3f}")
    print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    for written, _ in SENTENCES:
        print(f"  {written} -> {normalizer.normalize(written)}")


# ---------------------------------------------------------------------------------------- quality


def make_wavs(folder: Path) -> None:
    """The sentences spoken by the in-process pipeline on the CPU, without and with reading."""
    from synthesis.build import local_synthesizer
    from synthesis.frontend import TextFrontend
    from synthesis.pipeline import Synthesizer
    from ttsfarm.core.jobs import JobRequest, SynthesisOptions
    from ttsfarm.core.settings import Settings
    from ttsfarm.storage import LocalStorage

    settings = Settings.load().with_options(provider="cpu")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "written.txt").write_text("".join(w + "\n" for w, _ in SENTENCES), encoding="utf-8")
    (folder / "spoken.txt").write_text("".join(s + "\n" for _, s in SENTENCES), encoding="utf-8")
    with local_synthesizer(settings) as built:
        for system in SYSTEMS:
            frontend = TextFrontend(settings.max_phoneme_ids, normalize_text=system == "normalised")
            synthesizer = Synthesizer(built.batcher, frontend)
            storage = LocalStorage(folder / system)
            (folder / system).mkdir(exist_ok=True)
            for index, (written, _) in enumerate(SENTENCES):
                request = JobRequest(written, SynthesisOptions(voice=settings.voice), "wav")
                synthesizer.synthesize(request, storage, f"{index:04d}.wav")
            frontend.close()
    print(f"{len(SENTENCES)} sentences x {len(SYSTEMS)} in {folder}")


def comparable(text: str) -> str:
    """Words only, as both sides are compared: digits and symbols read by our English reader
    (Whisper writes "$49.95", "8:30 p.m."), then lowercase letters and spaces."""
    from synthesis.normalize import EnglishReader

    words = " " + _NOT_WORD.sub(" ", EnglishReader()(text).lower().replace("'", "")) + " "
    for spaced, joined in _SPOKEN_AS_ONE:
        words = words.replace(spaced, joined)
    return " ".join(words.split())


def transcribe(quality: Any, model: Any, audio16k: Any, prompt: str | None) -> str:
    if prompt is None:
        return str(quality.transcribe(model, audio16k))
    segments, _ = model.transcribe(
        audio16k,
        language=quality.LANGUAGE,
        beam_size=quality.WHISPER_BEAM_SIZE,
        condition_on_previous_text=False,
        without_timestamps=True,
        initial_prompt=prompt,
    )
    return " ".join(segment.text.strip() for segment in segments).strip()


def measure_asr(folder: Path, json_path: Path | None) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import quality  # benchmarks/quality.py: Whisper base from its PyPI packages, on the CPU

    jiwer = quality.quality_import("jiwer")
    model = quality.load_whisper(None)
    results: dict[str, Any] = {}
    for system in SYSTEMS:
        for prompt_name, prompt in (("plain", None), ("words prompt", WORDS_PROMPT)):
            rows = []
            for index, (written, spoken) in enumerate(SENTENCES):
                audio, rate = quality.read_mono(folder / system / f"{index:04d}.wav")
                heard = transcribe(quality, model, quality.resample(audio, rate), prompt)
                reference, hypothesis = comparable(spoken), comparable(heard)
                wer = jiwer.wer(reference, hypothesis) if hypothesis else 1.0
                rows.append(
                    {"written": written, "heard": heard, "right": reference == hypothesis, "wer": wer}
                )
            results[f"{system}, {prompt_name}"] = {
                "right": sum(r["right"] for r in rows),
                "sentences": len(rows),
                "mean_wer": statistics.fmean(r["wer"] for r in rows),
                "rows": rows,
            }
    print(f"{'system, transcription':<26} {'read right':>10} {'mean WER':>9}")
    for name, result in results.items():
        print(f"{name:<26} {result['right']:>4} / {result['sentences']:<3} {result['mean_wer']:>9.3f}")
    for index, (written, _) in enumerate(SENTENCES):
        print(written)
        for name, result in results.items():
            row = result["rows"][index]
            print(f"    {name:<26} {'ok   ' if row['right'] else 'WRONG'} {row['heard']!r}")
    if json_path is not None:
        json_path.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--nemo", action="store_true", help="Measure NeMo's grammars instead of ours.")
    parser.add_argument("--make-wavs", type=Path, metavar="FOLDER", help="Speak the sentences, off and on.")
    parser.add_argument("--asr", type=Path, metavar="FOLDER", help="Transcribe --make-wavs's files.")
    parser.add_argument("--json", type=Path, help="With --asr: write every transcript here.")
    args = parser.parse_args()
    if args.make_wavs:
        make_wavs(args.make_wavs)
    elif args.asr:
        measure_asr(args.asr, args.json)
    elif args.nemo:
        measure_nemo(args.repeats)
    else:
        measure_cost(args.repeats)


if __name__ == "__main__":
    main()
