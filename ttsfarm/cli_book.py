"""``ttsfarm audiobook BOOK.csv -o OUTDIR``: a CSV of a book in, a finished audiobook out."""

from __future__ import annotations

import time
from pathlib import Path

import click

from ttsfarm.cli import main, options_from, voice_options
from ttsfarm.settings import Settings


@main.command()
@click.argument("csv_file", metavar="BOOK.csv")
@click.option("-o", "--outdir", required=True, type=click.Path(path_type=Path), help="Folder for the book.")
@voice_options
@click.option("--title", help="Book title (default: the CSV file's name).")
@click.option("--skip-empty", is_flag=True, help="Leave out rows whose text is empty instead of failing.")
@click.option(
    "--target-lufs",
    type=click.FloatRange(-40, -10),
    help="Loudness of every chapter in LUFS (default -18; true peaks stay below -1 dBTP).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.pass_obj
def audiobook(
    settings: Settings,
    csv_file: str,
    outdir: Path,
    voice: str | None,
    speaker: int | None,
    length_scale: float | None,
    title: str | None,
    skip_empty: bool,
    target_lufs: float | None,
    quiet: bool,
) -> None:
    """Speak BOOK.csv into OUTDIR: chapter files, one .m4b with chapter markers, an .mp3,
    subtitles and manifest.json. Run it again after an interrupt to resume."""
    from ttsfarm.audiobook import build_audiobook
    from ttsfarm.book import read_book
    from ttsfarm.book_progress import BookProgress
    from ttsfarm.mastering import TARGET_LUFS
    from ttsfarm.render import LocalRenderer

    book = read_book(csv_file, options_from(voice, speaker, length_scale, settings), title, skip_empty)
    target = TARGET_LUFS if target_lufs is None else target_lufs
    started = time.perf_counter()
    uploaded = None
    if settings.farm_mode:
        from producer.audiobook import FarmRenderer, upload_book
        from producer.client import Client

        with Client.from_env(settings) as client, BookProgress(disable=quiet) as progress:
            report = build_audiobook(book, outdir, FarmRenderer(client), csv_file, target, progress)
            uploaded = upload_book(outdir, report.manifest, client.storage)
    else:
        from worker.local import local_synthesizer

        with local_synthesizer(settings) as synthesizer, BookProgress(disable=quiet) as progress:
            report = build_audiobook(book, outdir, LocalRenderer(synthesizer), csv_file, target, progress)
    elapsed = time.perf_counter() - started
    manifest = report.manifest
    if uploaded is not None:
        click.echo(f"uploaded to storage under {uploaded}/", err=True)
    if report.already_done:
        click.echo(
            f"{outdir}: finished already ({manifest.duration:.1f} s, {len(manifest.chapters)} chapters)"
        )
        return
    click.echo(
        f"{outdir}: {len(manifest.chapters)} chapters, {manifest.duration:.1f} s of audio "
        f"({report.parts_rendered} of {report.parts_total} parts rendered, the rest from the cache) "
        f"in {elapsed:.1f} s; {manifest.files['m4b'].file}, {manifest.files['mp3'].file}, "
        f"{manifest.files['srt'].file}, manifest.json"
    )
