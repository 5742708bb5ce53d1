"""End-to-end audiobook benchmark in this process: a CSV book in, every output file out.

The book is examples/ellery-book.csv with each chapter's rows repeated --repeat times (the
default, 12, gives 6 chapters and 264 sentences, about 25 minutes of speech). Prints the time
to a finished book and audio seconds per second, then the time of a second run of the same
command, which must find the book finished and render nothing.

    .venv/bin/python benchmarks/audiobook_local.py --repeat 12 --provider cpu
"""

from __future__ import annotations

import argparse
import csv
import io
import tempfile
import time
from pathlib import Path

from synthesis.build import local_synthesizer
from ttsfarm.audiobook.book import read_book
from ttsfarm.audiobook.builder import build_audiobook
from ttsfarm.audiobook.render import LocalRenderer
from ttsfarm.jobs import SynthesisOptions
from ttsfarm.progress import BookProgress
from ttsfarm.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "ellery-book.csv"


def repeated_book(repeat: int) -> str:
    """The example book with every chapter's rows repeated ``repeat`` times, in order."""
    rows = list(csv.DictReader(EXAMPLE.open(encoding="utf-8", newline="")))
    chapters = list(dict.fromkeys(row["chapter"] for row in rows))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["chapter", "title", "text"], lineterminator="\n")
    writer.writeheader()
    for chapter in chapters:
        for _ in range(repeat):
            writer.writerows(row for row in rows if row["chapter"] == chapter)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=12, help="copies of each chapter's rows")
    parser.add_argument("--provider", default=None, help="auto, cpu or cuda (default: settings)")
    parser.add_argument("--length-scale", type=float, default=None)
    parser.add_argument("--outdir", type=Path, default=None, help="keep the book here (default: temp)")
    parser.add_argument("--progress", action="store_true", help="show the progress bar")
    args = parser.parse_args()

    settings = Settings.load().with_options(provider=args.provider)
    with tempfile.TemporaryDirectory(prefix="ttsfarm-bench-") as temp:
        folder = Path(temp)
        outdir = args.outdir or folder / "out"
        source = folder / "book.csv"
        source.write_text(repeated_book(args.repeat), encoding="utf-8")
        book = read_book(str(source), SynthesisOptions(voice=settings.voice, length_scale=args.length_scale))
        rows = sum(len(chapter.rows) for chapter in book.chapters)
        with local_synthesizer(settings) as synthesizer:
            renderer = LocalRenderer(synthesizer)
            started = time.perf_counter()
            with BookProgress(disable=not args.progress) as progress:
                report = build_audiobook(book, outdir, renderer, str(source), progress=progress)
            elapsed = time.perf_counter() - started
            again_started = time.perf_counter()
            again = build_audiobook(book, outdir, renderer, str(source))
            again_elapsed = time.perf_counter() - again_started
        manifest = report.manifest
        sentences = sum(len(chapter.sentences) for chapter in manifest.chapters)
        print(
            f"book: {len(manifest.chapters)} chapters, {rows} rows, {sentences} segments, "
            f"{report.parts_total} parts, provider {settings.provider}"
        )
        print(f"audio: {manifest.duration:.1f} s ({manifest.duration / 60:.1f} min)")
        print(f"first run (model load, synthesis, mastering, encoding): {elapsed:.1f} s")
        print(f"audio seconds per second: {manifest.duration / elapsed:.2f}")
        print(f"second run: {again_elapsed:.2f} s, finished already: {again.already_done}")


if __name__ == "__main__":
    main()
