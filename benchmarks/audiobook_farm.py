"""End-to-end audiobook on the farm: a CSV book in, parts spread over real workers, the
finished book in S3. Starts an S3 endpoint (moto's server) and --workers worker processes;
Redis must be running (scripts/services). Prints time to a finished, uploaded book and audio
seconds per second.

    .venv/bin/python benchmarks/audiobook_farm.py --repeat 12 --workers 1
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from audiobook_local import repeated_book
from farm_load import farm_setup, start_s3, start_workers

from producer.audiobook import FarmRenderer, upload_book
from producer.client import Client
from ttsfarm.audiobook.book import read_book
from ttsfarm.audiobook.builder import build_audiobook
from ttsfarm.jobs import SynthesisOptions
from ttsfarm.progress import BookProgress


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=12, help="copies of each chapter's rows")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--provider", default="cpu")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    args = parser.parse_args()

    server, endpoint = start_s3()
    env, settings = farm_setup(args.redis_url, endpoint, "farm", args.provider)
    with tempfile.TemporaryDirectory(prefix="ttsfarm-bench-") as temp:
        folder = Path(temp)
        source = folder / "book.csv"
        source.write_text(repeated_book(args.repeat), encoding="utf-8")
        book = read_book(str(source), SynthesisOptions())
        sentences = sum(len(c.rows) for c in book.chapters)
        workers = start_workers(args.workers, env, args.concurrency, folder)
        try:
            with Client(settings) as client:
                started = time.perf_counter()
                with BookProgress(disable=True) as progress:
                    report = build_audiobook(
                        book, folder / "out", FarmRenderer(client), str(source), progress=progress
                    )
                    prefix = upload_book(folder / "out", report.manifest, client.storage)
                elapsed = time.perf_counter() - started
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait(30)
            server.stop()
    audio = report.manifest.duration
    print(f"book: {len(book.chapters)} chapters, {sentences} sentences, {report.parts_total} parts")
    print(f"farm: {args.workers} worker(s) x concurrency {args.concurrency}, provider {args.provider}")
    print("| audio s | wall s | audio s/s | uploaded to |")
    print("|---|---|---|---|")
    print(f"| {audio:.1f} | {elapsed:.1f} | {audio / elapsed:.1f} | {prefix}/ |")


if __name__ == "__main__":
    main()
