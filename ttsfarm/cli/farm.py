"""Farm commands: submit, status, fetch, cancel and worker."""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from ttsfarm.cli.common import describe, options_from, text_from, utf8
from ttsfarm.cli.options import (
    FORMAT_METAVAR,
    LOG_LEVELS,
    device_options,
    log_level_option,
    loudness_option,
    on_device,
    renamed,
    sentence_silence_option,
    text_file_option,
    voice_options,
)
from ttsfarm.core.errors import JobNotFound, SettingsError
from ttsfarm.core.job_limits import DEFAULT_PRIORITY, PRIORITIES
from ttsfarm.core.jobs import (
    JobRequest,
    JobResult,
    JobStatus,
    audio_key,
    check_format,
    result_key,
    wait_until_done,
)
from ttsfarm.core.redact import redact
from ttsfarm.core.settings import NO_BROKER_MESSAGE, Settings

if TYPE_CHECKING:
    from producer.client import Client

_JOB_ID: Final = re.compile(r"[0-9a-f]{32}")


def _client(settings: Settings) -> Client:
    from producer.client import Client

    return Client(settings)


@click.command()
@click.argument("text", required=False)
@text_file_option
@click.option(
    "--format", "audio_format", metavar=FORMAT_METAVAR, default="wav", show_default=True, help="Audio format."
)
@voice_options
@loudness_option()
@sentence_silence_option
@click.option("--key", callback=utf8, help="Idempotency key: submitting the same key twice queues one job.")
@click.option(
    "--priority",
    type=click.Choice(PRIORITIES),
    default=DEFAULT_PRIORITY,
    show_default=True,
    help="interactive: taken before every bulk job that waits.",
)
@click.option("--wait", is_flag=True, help="Wait for the job and show its progress.")
@click.pass_obj
def submit(
    settings: Settings,
    text: str | None,
    text_file: str | None,
    audio_format: str,
    voice: str | None,
    speaker: int | None,
    length_scale: float | None,
    loudness: float | None,
    sentence_silence: float | None,
    key: str | None,
    priority: str,
    wait: bool,
) -> None:
    """Queue TEXT (or a file) on the farm and print its job id.

    Without a broker configured the job runs here and its audio goes to the storage folder.
    """
    text = text_from(text, text_file)
    audio_format = check_format(audio_format)
    if not settings.farm_mode:
        options = options_from(voice, speaker, length_scale, settings)
        request = JobRequest(
            text, options, audio_format, loudness=loudness, sentence_silence=sentence_silence
        )
        _run_here(settings, request)
        return
    client = _client(settings)
    voice = voice or settings.voice
    job_id = client.submit(
        text, voice, audio_format, speaker, length_scale, key, loudness, sentence_silence, priority=priority
    )
    click.echo(job_id)
    if wait:
        _follow(client, job_id)


def _run_here(settings: Settings, request: JobRequest) -> None:
    from synthesis.build import local_synthesizer
    from ttsfarm.core.progress import ProgressBar
    from ttsfarm.storage import open_storage

    storage = open_storage(settings)
    with local_synthesizer(settings) as synthesizer, ProgressBar(request.job_id) as bar:
        result = synthesizer.synthesize(
            request, storage, audio_key(request.job_id, request.format), bar.update
        )
    # Stored beside the audio, as a worker does: `status` and `fetch` find the job by it.
    storage.put_bytes(json.dumps(result.to_dict()).encode(), result_key(request.job_id), "application/json")
    click.echo(request.job_id)
    click.echo(describe(result), err=True)


def _local_result(settings: Settings, job_id: str) -> JobResult:
    """The result of a job run here by ``submit`` without a broker, from storage."""
    from ttsfarm.storage import open_storage

    stored = open_storage(settings).get_bytes(result_key(job_id)) if _is_job_id(job_id) else None
    if stored is None:
        raise JobNotFound(
            f"unknown job id {job_id}: with no broker configured (TTSFARM_BROKER_URL), only jobs that "
            f"`ttsfarm submit` ran here are known, by their results in {settings.storage_url}"
        )
    return JobResult.from_dict(json.loads(stored))


def _local_status(settings: Settings, job_id: str) -> JobStatus:
    """A job run here by ``submit`` without a broker: finished, with its result in storage."""

    result = _local_result(settings, job_id)
    return JobStatus(
        job_id,
        "succeeded",
        progress=1.0,
        segments_done=len(result.segments),
        segments_total=len(result.segments),
        audio_seconds=result.duration,
        result=result,
    )


def _is_job_id(job_id: str) -> bool:
    """Whether ``job_id`` could name a job (never a path into storage)."""
    return bool(_JOB_ID.fullmatch(job_id))


def _follow(client: Client, job_id: str) -> None:
    from ttsfarm.core.progress import ProgressBar

    def show(status: JobStatus) -> None:
        if status.segments_total:
            bar.update(status)

    with ProgressBar(job_id[:8]) as bar:
        final = wait_until_done(job_id, client.status, on_status=show)
    _report(final.to_dict())
    final.outcome()  # a failed or cancelled job: one line and exit status 1


def _report(status: dict[str, object]) -> None:
    result = status.get("result")
    line = f"{status['job_id']}  {status['state']}"
    if status["state"] == "running":
        line += f"  {float(status['progress']):.0%}  {float(status['audio_seconds']):.1f} s audio"  # type: ignore[arg-type]
    if isinstance(result, dict):
        line += f"  {result['duration']:.1f} s  {result['location']}"
    if status.get("error"):
        line += f"  ({redact(str(status['error']))})"
    click.echo(line)


@click.command()
@click.argument("job_id")
@click.option("--wait", is_flag=True, help="Follow the job with a progress bar until it is done.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole status as JSON.")
@click.pass_obj
def status(settings: Settings, job_id: str, wait: bool, as_json: bool) -> None:
    """Show a job's state: queued, running (with progress), succeeded, failed or cancelled.
    Exits 1 when the job failed or was cancelled."""
    if not settings.farm_mode:
        current = _local_status(settings, job_id)
    else:
        client = _client(settings)
        if wait:
            _follow(client, job_id)
            return
        current = client.status(job_id)
    if current.state == "unknown":
        raise JobNotFound(f"unknown job id {job_id}")
    if as_json:
        click.echo(redact(json.dumps(current.to_dict(), indent=2)))
    else:
        _report(current.to_dict())
    if current.state in ("failed", "cancelled"):
        raise SystemExit(1)


@click.command()
@click.argument("job_id")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path),
    help="Where to write the audio; - for standard output.",
)
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@click.pass_obj
def fetch(settings: Settings, job_id: str, output: Path, force: bool) -> None:
    """Download a finished job's audio (checked against its SHA-256 before any of it is written)."""

    def fetch_to(target: Path, overwrite: bool) -> JobResult:
        if settings.farm_mode:
            return _client(settings).fetch(job_id, target, overwrite=overwrite)
        from producer.client import download
        from ttsfarm.storage import storage_at

        local = _local_result(settings, job_id)
        return download(local, target, storage_at(local.location, settings), overwrite=overwrite)

    if str(output) == "-":  # as `synth -o -`: the audio on standard output, the summary on stderr
        with tempfile.TemporaryDirectory(prefix="ttsfarm-fetch-") as folder:
            result = fetch_to(Path(folder) / "audio", overwrite=True)
            with (Path(folder) / "audio").open("rb") as audio:
                shutil.copyfileobj(audio, sys.stdout.buffer)
            sys.stdout.buffer.flush()
    else:
        result = fetch_to(output, force)
    summary = f"{output}: {result.duration:.1f} s of {result.format} audio, sha256 {result.sha256[:12]}..."
    click.echo(summary, err=str(output) == "-")


@click.command()
@click.argument("job_id")
@click.pass_obj
def cancel(settings: Settings, job_id: str) -> None:
    """Cancel a job: a queued one never runs, a running one stops and stores nothing."""
    if not settings.farm_mode:  # a job run here finished before `submit` returned
        _report(_local_status(settings, job_id).to_dict())
        click.echo("the job had finished: there was nothing to cancel", err=True)
        return
    _report(_client(settings).cancel(job_id).to_dict())


@click.command()
@device_options
@click.option("-c", "--concurrency", type=int, help="Jobs at a time; their segments share batches.")
@click.option(
    "--consumers",
    type=click.IntRange(min=1),
    help="Processes that take jobs, sharing this worker's one engine (many short jobs need several).",
)
@click.option("-n", "--hostname", help="Worker name (default ttsfarm-gpuN@host or ttsfarm-cpu@host).")
@log_level_option
@renamed("--loglevel", "--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False))
@click.pass_obj
def worker(
    settings: Settings,
    gpu: int | None,
    cpu: bool,
    concurrency: int | None,
    consumers: int | None,
    hostname: str | None,
    log_level: str,
) -> None:
    """Start a Celery worker for the farm (one per GPU), loading the model once."""
    from worker.app import run_worker
    from worker.consumers import run_consumers

    settings = on_device(settings, gpu, cpu).with_options(concurrency=concurrency, consumers=consumers)
    if not settings.farm_mode:
        raise SettingsError(NO_BROKER_MESSAGE)
    loglevel = log_level.upper()  # as Celery names them
    # The engine loads before Celery sets up its logging: at --log-level (or -v's, if lower), not
    # the command's default of warnings only, so that the log says which device and layout it took.
    root = logging.getLogger()
    root.setLevel(min(root.level, logging.getLevelName(loglevel)))
    if settings.consumers > 1:
        sys.exit(run_consumers(settings, hostname, loglevel))
    run_worker(settings, hostname, loglevel)
