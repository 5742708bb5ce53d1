"""``ttsfarm audiobook BOOK -o OUTDIR``: a CSV, EPUB, text or Markdown book in, a finished
audiobook out."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Final

import click

from ttsfarm.cli.common import options_from
from ttsfarm.cli.options import loudness_option, renamed, target_lufs_alias, voice_options
from ttsfarm.core.settings import Settings

INTERRUPTED_STATUS: Final = 130
"""Exit status after Ctrl-C, as shells report a SIGINT."""


@click.command()
@click.argument("book_file", metavar="BOOK")
@click.option(
    "-o", "--output", metavar="OUTDIR", type=click.Path(path_type=Path), help="Folder for the book."
)
@renamed("--outdir", "--output", type=click.Path(path_type=Path))
@click.option("--list-chapters", is_flag=True, help="Show the chapters found and stop (no audio is made).")
@click.option(
    "--chapters",
    "selection",
    metavar="LIST",
    help="Chapters to read, by the numbers --list-chapters shows: 3 or 1,4-6 or 9- "
    "(default: all but the front and back matter).",
)
@voice_options
@click.option("--title", help="Book title (default: the book's own, else the file name).")
@click.option("--author", help="Author (default: from the EPUB).")
@click.option("--narrator", help="Narrator, written as composer (default: none).")
@click.option(
    "--cover", type=click.Path(path_type=Path), help="Cover picture, JPEG or PNG (default: the EPUB's cover)."
)
@click.option(
    "--skip-empty", is_flag=True, help="CSV: leave out rows whose text is empty instead of failing."
)
@loudness_option(off=False)
@target_lufs_alias
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.pass_obj
def audiobook(
    settings: Settings,
    book_file: str,
    output: Path | None,
    list_chapters: bool,
    selection: str | None,
    voice: str | None,
    speaker: int | None,
    length_scale: float | None,
    title: str | None,
    author: str | None,
    narrator: str | None,
    cover: Path | None,
    skip_empty: bool,
    loudness: float,
    quiet: bool,
) -> None:
    """Speak BOOK (.epub, .txt, .md or .csv) into OUTDIR: chapter files, one .m4b with chapter
    markers and cover, an .mp3, subtitles and manifest.json. Run it again after an interrupt
    to resume.

    \b
    EPUB: chapters from the book's table of contents; front and back matter left out.
    Text and Markdown: chapters at headings ("Chapter 3", "# Title") or at "* * *" lines.
    CSV: a 'text' column, rows grouped by 'chapter' (see docs/audiobook.md).
    """
    from ttsfarm.audiobook.builder import build_audiobook, cached_so_far
    from ttsfarm.audiobook.source import chapter_lines, open_book, select_chapters, with_info
    from ttsfarm.core.progress import BookProgress

    defaults = options_from(voice, speaker, length_scale, settings)
    found = open_book(book_file, defaults, title, skip_empty)
    if list_chapters:
        click.echo(f"{found.title}: {len(found.chapters)} chapters found")
        for line in chapter_lines(found):
            click.echo(line)
        return
    if output is None:
        raise click.UsageError(
            "give the folder for the book with -o OUTDIR (or --list-chapters to look first)"
        )
    book = with_info(select_chapters(found, selection), author, narrator, cover)
    started = time.perf_counter()
    uploaded = None
    try:
        if settings.farm_mode:
            from producer.audiobook import FarmRenderer, upload_book
            from producer.client import Client

            with Client(settings) as client, BookProgress(disable=quiet) as progress:
                report = build_audiobook(book, output, FarmRenderer(client), book_file, loudness, progress)
                progress.stage("uploading")
                uploaded = upload_book(output, report.manifest, client.storage)
        else:
            from synthesis.build import finishing_pool, local_synthesizer
            from ttsfarm.audiobook.render import LocalRenderer

            finishing = finishing_pool(settings)
            try:
                # a book is long enough to build the GPU's graphs first, as a farm worker does: many
                # parts at once must not capture a graph while other batches run
                warmed = settings if settings.prewarm is not None else replace(settings, prewarm=True)
                with local_synthesizer(warmed) as synthesizer, BookProgress(disable=quiet) as progress:
                    renderer = LocalRenderer(synthesizer, finishing)
                    report = build_audiobook(book, output, renderer, book_file, loudness, progress)
            finally:
                finishing.close()
    except KeyboardInterrupt:
        if settings.farm_mode:  # parts are kept by the farm, under ids made from their text
            kept = "the parts and chapters the farm finished are kept there, and finished chapters in "
            click.echo(
                f"interrupted: {kept}{output}/.parts; run the same command again to go on from there",
                err=True,
            )
        else:
            done, total, seconds = cached_so_far(book, output)
            click.echo(
                f"interrupted: {done} of {total} parts ({seconds:.0f} s of speech) are kept in "
                f"{output}/.parts; run the same command again to go on from there",
                err=True,
            )
        raise SystemExit(INTERRUPTED_STATUS) from None
    elapsed = time.perf_counter() - started
    manifest = report.manifest
    if uploaded is not None:
        click.echo(f"uploaded to storage under {uploaded}/", err=True)
    if report.already_done:
        click.echo(
            f"{output}: finished already ({manifest.duration:.1f} s, {len(manifest.chapters)} chapters); "
            "nothing was made"
        )
        return
    cached = report.parts_total - report.parts_rendered
    source = (
        f"all {report.parts_total} parts made now"
        if not cached
        else f"{report.parts_rendered} of {report.parts_total} parts made now "
        f"({report.audio_rendered:.0f} s of speech), {cached} from the cache of an earlier run "
        f"({report.audio_cached:.0f} s)"
    )
    click.echo(
        f"{output}: {len(manifest.chapters)} chapters, {manifest.duration:.1f} s of audio "
        f"in {elapsed:.1f} s; "
        f"{source}; {manifest.files['m4b'].file}, {manifest.files['mp3'].file}, "
        f"{manifest.files['srt'].file}, manifest.json"
    )
