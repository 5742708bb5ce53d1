"""``ttsfarm bench``: the engine's batch-size sweep on this machine (see docs/benchmarks.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Final

import click

from ttsfarm.cli.options import deprecated, device_options, on_device, voice_option
from ttsfarm.core.settings import Settings

DEFAULT_CORPUS: Final = Path("benchmarks") / "corpus.txt"
DEFAULT_CPU_SIZES: Final = "1,2,4"
DEFAULT_GPU_SIZES: Final = "1,2,4,8,16,32,64"


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter("give batch sizes as numbers separated by commas, e.g. 1,8,32") from None
    if not sizes or min(sizes) < 1:
        raise click.BadParameter("batch sizes must be at least 1")
    return sizes


@click.command()
@device_options
@click.option("--provider", type=click.Choice(["auto", "cuda", "cpu"]), hidden=True)  # their old name
@click.option("--precision", type=click.Choice(["auto", "fp32", "fp16"]), help="Default: the setting.")
@click.option("--buckets/--no-buckets", default=None, help="Shape buckets (default: on for CUDA only).")
@click.option(
    "--batch-sizes", help=f"Comma-separated (default {DEFAULT_CPU_SIZES} on CPU, {DEFAULT_GPU_SIZES} on GPU)."
)
@click.option("--batches", default=20, show_default=True, help="Timed batches per batch size and series.")
@click.option("--short-runs", default=50, show_default=True, help="Runs of the batch-1 short-sentence probe.")
@click.option(
    "--text",
    "text_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help=f"UTF-8 text whose segments make the mix (default {DEFAULT_CORPUS}).",
)
@voice_option
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Also write JSON here."
)
@click.pass_obj
def bench(
    settings: Settings,
    gpu: int | None,
    cpu: bool,
    provider: str | None,
    precision: str | None,
    buckets: bool | None,
    batch_sizes: str | None,
    batches: int,
    short_runs: int,
    text_path: Path | None,
    voice: str | None,
    json_path: Path | None,
) -> None:
    """Sweep batch sizes over a realistic mix of segment lengths and print the table."""
    from synthesis.build import engine_options
    from synthesis.engines import load_engine
    from ttsfarm.cli.sweep import corpus_items, format_table, short_latency, sweep, table_line
    from ttsfarm.core.voices import resolve_voice

    path = text_path or DEFAULT_CORPUS
    if not path.is_file():
        raise click.UsageError(f"no text to benchmark with: {path} does not exist (give --text FILE)")
    given = _sizes(batch_sizes) if batch_sizes else None
    largest = max(given or _sizes(DEFAULT_GPU_SIZES))  # the GPU's layout must hold the largest batch
    if provider is not None:
        deprecated("--provider", "--gpu N or --cpu")
    settings = on_device(settings.with_options(provider=provider, precision=precision), gpu, cpu)
    options = engine_options(settings, largest)
    if buckets is not None:
        options = dataclasses.replace(options, shape_buckets=buckets)
    engine = load_engine(
        resolve_voice(voice or settings.voice, settings.voices_dir), options, settings.engine
    )
    items = corpus_items(engine.voice, path.read_text(encoding="utf-8"), settings.max_phoneme_ids)
    sizes = given or _sizes(DEFAULT_GPU_SIZES if engine.on_gpu else DEFAULT_CPU_SIZES)
    click.echo(
        f"{engine.voice.name} on {engine.provider}, {engine.precision}, {engine.kind}, "
        f"buckets {'on' if engine.buckets else 'off'}; {len(items)} segments from {path}"
    )
    probe = short_latency(engine, short_runs)
    click.echo(f"batch 1, short sentence: P50 {probe.p50_ms:.1f} ms, P99 {probe.p99_ms:.1f} ms")
    click.echo(format_table([]))
    rows = sweep(engine, items, sizes, batches, report=lambda row: click.echo(table_line(row)))
    click.echo(
        f"sessions built: {engine.sessions_built} ({engine.session_seconds:.1f} s); "
        f"frame overflows: {engine.frame_overflows}"
    )
    if json_path is not None:
        data = {
            "provider": engine.provider,
            "precision": engine.precision,
            "engine": engine.kind,
            "buckets": engine.buckets,
            "segments": len(items),
            "short_p50_ms": probe.p50_ms,
            "short_p99_ms": probe.p99_ms,
            "rows": [row.to_dict() for row in rows],
        }
        json_path.write_text(json.dumps(data, indent=2), encoding="utf-8")
