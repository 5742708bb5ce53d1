"""A book end to end, stage by stage: where the time goes from a CSV to a finished audiobook.

The book is --hours of prose (sentences of benchmarks/corpus.txt and examples/ellery.txt,
shuffled so that no two parts are alike) in --chapters chapters, made in-process (as
`ttsfarm audiobook` without a broker) or, with --farm, through the farm: Redis (--redis-url, or
one started from --redis-server), --workers `ttsfarm worker` processes, and storage (a local
folder, or moto's S3 server with --s3), then uploaded there as `ttsfarm audiobook` does.

Prints when each stage ended (synthesis: the last part spoken; finishing: the last chapter
mastered and encoded; concat: the m4b and mp3 joined by stream copy; upload), the work each
stage of finishing took summed over the chapters (seconds, and milliseconds per audio second),
how far the progress bar's time left was off at a quarter, half and three quarters, and that a
second run of the same command does no work. With --measure, every chapter's loudness and true
peak as the final files hold them (its FLAC, and its stretch of the decoded m4b and mp3).

    .venv/bin/python benchmarks/book.py --hours 0.05 --chapters 3                  # in-process, CPU
    .venv/bin/python benchmarks/book.py --hours 0.05 --chapters 3 --farm --s3      # a CPU farm
    python3 benchmarks/book.py --hours 10 --chapters 40 --farm --gpu --redis-server PATH --json F
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import soundfile as sf

from bench.farm import farm_env, start_s3, start_worker, stop_workers
from synthesis.text import split_sentences
from ttsfarm.audiobook.book import read_book
from ttsfarm.audiobook.builder import BuildReport, build_audiobook
from ttsfarm.audiobook.chapters import CHAPTERS_CACHE
from ttsfarm.audiobook.part_cache import PARTS_FOLDER
from ttsfarm.core.encoding import decode
from ttsfarm.core.jobs import JobResult, SynthesisOptions
from ttsfarm.core.loudness import integrated_loudness, true_peak
from ttsfarm.core.progress import BookProgress
from ttsfarm.core.settings import Settings

HERE = Path(__file__).resolve().parent
PROSE: Final = (HERE / "corpus.txt", HERE.parent / "examples" / "ellery.txt")
WORDS_PER_HOUR: Final = 11_900
"""joe at its own pace, on this prose: 95,000 words made 7.98 hours (an H200, run 42)."""
SENTENCES_PER_ROW: Final = (4, 9)
FINISH_STEPS: Final = ("fetch", "join", "master", "encode", "store", "cpu")
ETA_POINTS: Final = (0.25, 0.5, 0.75)


def book_csv(words: int, chapters: int, seed: int = 1) -> str:
    """A CSV book of about ``words`` words in ``chapters`` chapters, one paragraph per row."""
    pool = [s for path in PROSE for s in split_sentences(path.read_text(encoding="utf-8").replace("\n", " "))]
    rng = random.Random(seed)
    rows: list[str] = []
    seen: set[str] = set()
    while sum(len(row.split()) for row in rows) < words:
        row = " ".join(rng.sample(pool, rng.randint(*SENTENCES_PER_ROW)))
        if row not in seen:
            seen.add(row)
            rows.append(row)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["chapter", "title", "text"])
    per_chapter = -(-len(rows) // chapters)
    for n, row in enumerate(rows):
        chapter = n // per_chapter + 1
        writer.writerow([chapter, f"Chapter {chapter}", row])
    return out.getvalue()


class Recorder(BookProgress):
    """The progress of a build, with when things happened and the time left it showed."""

    def __init__(self) -> None:
        super().__init__(disable=True)
        self.began = time.perf_counter()
        self.marks: dict[str, float] = {}
        self.samples: list[tuple[float, float]] = []
        """(seconds since the start, the time left shown then)."""

    def now(self) -> float:
        return time.perf_counter() - self.began

    def _update(self) -> None:
        super()._update()
        left = self.time_left()
        if left is not None:
            self.samples.append((self.now(), left))

    def part_done(self, part: str, estimated: int, sentences: int, audio: float) -> None:
        super().part_done(part, estimated, sentences, audio)
        self.marks["synthesis"] = self.now()

    def chapter_done(self, chapter: int, sentences: int) -> None:
        super().chapter_done(chapter, sentences)
        self.marks.setdefault("first chapter", self.now())
        self.marks["finishing"] = self.now()

    def stage(self, name: str) -> None:
        super().stage(name)
        self.marks[f"{name} began"] = self.now()

    def eta_errors(self, total: float) -> dict[str, float]:
        """At a quarter, half and three quarters of the time the book took: how far the time
        left shown then was from the time that was left (a share of it; + is too long)."""
        errors = {}
        for point in ETA_POINTS:
            shown = [(t, left) for t, left in self.samples if t <= point * total]
            if shown:
                at, left = shown[-1]
                errors[f"{point:.0%}"] = round((left - (total - at)) / (total - at), 3)
        return errors


def chapter_results(outdir: Path) -> list[JobResult]:
    folder = outdir / PARTS_FOLDER / CHAPTERS_CACHE
    return [JobResult.from_dict(json.loads(path.read_text())) for path in sorted(folder.glob("*.json"))]


def measured(outdir: Path, rate: int) -> dict[str, Any]:
    """Each chapter's loudness and true peak as the final files hold it: the chapter's FLAC, and
    its stretch of the decoded ``.m4b`` and ``.mp3`` (lowest and highest over the chapters)."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    books = {kind: decode(outdir / manifest["files"][kind]["file"], rate) for kind in ("m4b", "mp3")}
    figures: dict[str, list[tuple[float, float]]] = {"flac": [], "m4b": [], "mp3": []}
    for chapter in manifest["chapters"]:
        audio, _ = sf.read(outdir / chapter["audio"]["file"], dtype="float32")
        figures["flac"].append((integrated_loudness(audio, rate), true_peak(audio)))
        start = round(chapter["start"] * rate)
        for kind, book in books.items():
            stretch = book[start : start + len(audio)]
            figures[kind].append((integrated_loudness(stretch, rate), true_peak(stretch)))
    return {
        kind: {
            "lufs": [round(min(v[0] for v in values), 2), round(max(v[0] for v in values), 2)],
            "dbtp_max": round(max(v[1] for v in values), 2),
        }
        for kind, values in figures.items()
    }


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_local(args: argparse.Namespace, source: Path, outdir: Path) -> dict[str, Any]:
    from synthesis.build import finishing_pool, local_synthesizer
    from ttsfarm.audiobook.render import LocalRenderer

    settings = Settings.load().with_options(provider="cpu" if args.cpu else None, prewarm=True)
    book = read_book(str(source), SynthesisOptions(voice=settings.voice))
    loading = time.perf_counter()
    finishing = finishing_pool(settings)
    try:
        with local_synthesizer(settings) as synthesizer:
            synthesizer.batcher.engine(synthesizer.voice(settings.voice))
            load_s = time.perf_counter() - loading
            renderer = LocalRenderer(synthesizer, finishing)
            recorder = Recorder()
            report = build_audiobook(book, outdir, renderer, str(source), progress=recorder)
            total = recorder.now()
            again = time.perf_counter()
            second = build_audiobook(book, outdir, renderer, str(source))
            second_s = time.perf_counter() - again
    finally:
        finishing.close()
    return summary(args, report, recorder, total, None, second, second_s, outdir) | {
        "load_s": round(load_s, 1)
    }


def run_farm(args: argparse.Namespace, source: Path, outdir: Path, folder: Path) -> dict[str, Any]:
    from producer.audiobook import FarmRenderer, upload_book
    from producer.client import Client

    redis_process = None
    redis_url = args.redis_url
    if args.redis_server:
        from farm_gpu import start_redis

        redis_process = start_redis(args.redis_server, args.port)
        redis_url = f"redis://127.0.0.1:{args.port}/0"
    server = None
    if args.s3:
        server, endpoint = start_s3()
        import boto3

        from bench.farm import CREDENTIALS

        os.environ.update(CREDENTIALS)
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="ttsfarm-book")
        storage_url = "s3://ttsfarm-book/farm"
    else:
        endpoint = ""
        storage_url = str(folder / "storage")
    env = farm_env(redis_url, endpoint, storage_url, TTSFARM_METRICS_PORT="0", PYTHONUNBUFFERED="1")
    if not args.s3:
        env.pop("TTSFARM_S3_ENDPOINT_URL")
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    where = (lambda n: ["--gpu", str(n)]) if args.gpu else (lambda n: ["--cpu"])
    starting = time.perf_counter()
    workers = [
        start_worker([*where(n), "-n", f"book{n}@%h"], env, folder / f"worker{n}.log")
        for n in range(args.workers)
    ]
    ready_s = time.perf_counter() - starting
    settings = Settings(broker_url=redis_url, storage_url=storage_url, s3_endpoint_url=endpoint or None)
    try:
        book = read_book(str(source), SynthesisOptions(voice=settings.voice))
        with Client(settings) as client:
            renderer = FarmRenderer(client)
            recorder = Recorder()
            report = build_audiobook(book, outdir, renderer, str(source), progress=recorder)
            built = recorder.now()
            uploading = time.perf_counter()
            upload_book(outdir, report.manifest, client.storage)
            upload_s = time.perf_counter() - uploading
            total = recorder.now()
            again = time.perf_counter()
            second = build_audiobook(book, outdir, renderer, str(source))
            second_s = time.perf_counter() - again
        cpu = worker_cpu(workers)
    finally:
        stop_workers(workers)
        if server is not None:
            server.stop()
        if redis_process is not None:
            redis_process.terminate()
    result = summary(args, report, recorder, total, upload_s, second, second_s, outdir)
    result |= {"ready_s": round(ready_s, 1), "built_s": round(built, 2), "worker_cpu_s": cpu}
    return result


def worker_cpu(workers: list[subprocess.Popen[bytes]]) -> float | None:
    try:
        import psutil
    except ImportError:
        return None
    seconds = 0.0
    for worker in workers:
        process = psutil.Process(worker.pid)
        for member in [process, *process.children(recursive=True)]:
            try:
                times = member.cpu_times()
                seconds += times.user + times.system + times.children_user + times.children_system
            except psutil.NoSuchProcess:
                continue
    return round(seconds, 1)


def summary(
    args: argparse.Namespace,
    report: BuildReport,
    recorder: Recorder,
    total: float,
    upload_s: float | None,
    second: BuildReport,
    second_s: float,
    outdir: Path,
) -> dict[str, Any]:
    audio = report.manifest.duration
    chapters = chapter_results(outdir)
    work = {step: round(sum(c.timings.get(step, 0.0) for c in chapters), 2) for step in FINISH_STEPS}
    joined = recorder.marks.get("joining began")
    return {
        "farm": args.farm,
        "book": {"hours": args.hours, "chapters": len(report.manifest.chapters), "parts": report.parts_total},
        "audio_s": round(audio, 1),
        "ended_s": {
            "synthesis": round(recorder.marks.get("synthesis", 0.0), 2),
            "first chapter": round(recorder.marks.get("first chapter", 0.0), 2),
            "finishing": round(recorder.marks.get("finishing", 0.0), 2),
            "concat": round(total - (upload_s or 0.0), 2),
        }
        | ({"upload": round(total, 2)} if upload_s is not None else {}),
        "concat_s": round(total - (upload_s or 0.0) - joined, 2) if joined is not None else None,
        "upload_s": round(upload_s, 2) if upload_s is not None else None,
        "finish_work_s": work,
        "finish_ms_per_audio_s": {k: round(1000 * v / audio, 2) for k, v in work.items()},
        "total_s": round(total, 2),
        "real_time": round(audio / total, 1),
        "eta_error": recorder.eta_errors(recorder.marks.get("finishing", total)),
        "bar_end": round(recorder.fraction, 3),
        "helper_cpu_s": round(children_cpu(), 1),
        "second_run": {"s": round(second_s, 2), "finished_already": second.already_done},
        "cores": os.cpu_count(),
    }


def print_table(result: dict[str, Any]) -> None:
    where = "through the farm" if result["farm"] else "in-process"
    book = result["book"]
    print(
        f"{result['audio_s']:.0f} s of audio ({book['chapters']} chapters, {book['parts']} parts) {where} "
        f"on {result['cores']} cores: {result['total_s']:.1f} s, {result['real_time']}x real time"
    )
    print("| stage | ended at s | work s (all chapters) | work ms per audio s |")
    print("|---|---|---|---|")
    ended = result["ended_s"]
    print(f"| synthesis (last part spoken) | {ended['synthesis']} | | |")
    for step in FINISH_STEPS:
        work, per_second = result["finish_work_s"][step], result["finish_ms_per_audio_s"][step]
        if work:
            label = "CPU of join, master and encode" if step == "cpu" else step
            print(f"| finishing: {label} | | {work} | {per_second} |")
    print(f"| finishing (last chapter) | {ended['finishing']} | | |")
    print(f"| concat (m4b and mp3, stream copy) | {ended['concat']} | {result['concat_s']} | |")
    if result["upload_s"] is not None:
        print(f"| upload | {ended['upload']} | {result['upload_s']} | |")
    print(f"progress bar: ended at {result['bar_end']:.0%}; time left off by {result['eta_error']}")
    again = result["second_run"]
    print(f"second run: {again['s']} s, finished already: {again['finished_already']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=0.05)
    parser.add_argument("--chapters", type=int, default=3)
    parser.add_argument("--farm", action="store_true", help="through the farm (else in-process)")
    parser.add_argument("--cpu", action="store_true", help="on the CPU even where there is a GPU")
    parser.add_argument("--gpu", action="store_true", help="farm workers on GPUs (--workers of them)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--redis-server", help="start this redis-server for the farm (on --port)")
    parser.add_argument("--port", type=int, default=6391)
    parser.add_argument("--s3", action="store_true", help="farm storage in moto's S3 server (else a folder)")
    parser.add_argument("--keep", type=Path, help="write the book here and keep it (default: a temp folder)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--measure", action="store_true", help="measure every chapter in the final files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ttsfarm-book-bench-") as temp:
        folder = Path(temp)
        source = folder / "book.csv"
        source.write_text(book_csv(round(args.hours * WORDS_PER_HOUR), args.chapters), encoding="utf-8")
        outdir = args.keep or folder / "out"
        if args.keep:
            shutil.rmtree(outdir, ignore_errors=True)
        result = run_farm(args, source, outdir, folder) if args.farm else run_local(args, source, outdir)
        if args.measure:
            result["final_files"] = measured(
                outdir, json.loads((outdir / "manifest.json").read_text())["sample_rate"]
            )
    print_table(result)
    if args.measure:
        print(f"measured on the final files, per chapter: {result['final_files']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
