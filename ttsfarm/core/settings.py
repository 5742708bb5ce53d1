"""Settings: one frozen object built at the edge from a config file and ``TTSFARM_*`` variables.

Precedence, highest first: environment variables, the config file, the defaults below.
The config file is ``$TTSFARM_CONFIG`` if set, else ``configs/ttsfarm.toml`` in the current
folder if it exists. :meth:`Settings.load` is called at the edges only (a ``ttsfarm`` command,
``celery -A worker.app``, the gateway's app factory, ``Client.from_env``); every value is
checked when a :class:`Settings` is made, so a bad one stops the start with a
:class:`~ttsfarm.core.errors.SettingsError`. Everything below takes the object or plain arguments.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Final, Literal, get_args

from ttsfarm.core.errors import SettingsError

ENV_PREFIX: Final = "TTSFARM_"
DEFAULT_CONFIG_PATH: Final = Path("configs") / "ttsfarm.toml"
NO_BROKER_MESSAGE: Final = "no broker configured: set TTSFARM_BROKER_URL (e.g. redis://127.0.0.1:6379/0)"


ProviderName = Literal["auto", "cuda", "cpu"]
PrecisionName = Literal["auto", "fp16", "fp32"]
EngineName = Literal["auto", "single", "staged"]
CudaLayout = Literal["auto", "nchw", "nhwc"]

PROBE_TIMEOUT_SECONDS: Final = 10.0
"""How long a worker's health probe batch may take (it waits behind queued batches) before the
health check fails: the worker (``worker/health.py``) and ``docker/healthcheck.py`` both use it."""


@dataclass(frozen=True)
class Settings:
    """Everything ttsfarm reads from its environment, by concern: farm, storage, engine,
    batching, gateway, metrics. The user settings (README.md) come first in their group; the
    rest are tuning knobs (docs/deploy.md, "Advanced settings")."""

    # Farm: the broker, the queue and the workers that take its jobs.
    broker_url: str | None = None
    """Celery broker, e.g. ``redis://127.0.0.1:6379/0``. Unset: jobs run in-process."""
    result_backend: str | None = None
    """Where job states and results are kept; defaults to the broker."""
    redis_tls_ca_file: str | None = None
    """PEM file of the CA that signed Redis's certificate, for ``rediss://`` URLs; unset means
    the system's trust store. The server's certificate and host name are always checked."""
    redis_tls_cert_file: str | None = None
    """PEM client certificate, for a Redis that asks clients for one (``tls-auth-clients yes``)."""
    redis_tls_key_file: str | None = None
    """The private key of ``redis_tls_cert_file`` (unset: the key is in that file)."""
    queue: str = "ttsfarm"
    """The Celery queue jobs go to (books' chapters go to ``QUEUE.finish``)."""
    max_queued_jobs: int = 10_000
    """Submits are refused (:class:`~ttsfarm.core.errors.QueueFull`) while the queue holds this many
    jobs; 0 means no limit. Each queued job keeps its whole text in Redis (at most 200,000
    characters, about 200 KB): 10,000 of the longest are about 2 GB, which a Redis sized for the
    farm holds, and a producer stuck in a loop is stopped long before Redis runs out of memory
    and takes the workers' queue down with it."""
    max_job_audio_seconds: float = 4 * 3600
    """Jobs estimated to make more audio than this are refused at submit (``ttsfarm.core.admission``,
    from their phonemes), saying so; 0 means no limit. 200,000 characters of prose make about
    3.4 hours."""
    max_job_temp_mb: int = 1_500
    """Jobs estimated to need more temp space than this (their 16-bit WAV, twice for a mastered
    job) are refused at submit; 0 means no limit. 4 hours of a 22,050 Hz voice, mastered, need
    about 1,270 MB. A worker needs at most its concurrency times this in ``temp_dir``."""
    concurrency: int | None = None
    """Jobs one worker runs at a time; their segments share batches. Unset means 32 on a GPU
    (16 left an H200 worker at 3,486 stored audio s/s, 32 gave 4,026: ``docs/benchmarks.md``)
    and 16 on a CPU."""
    consumers: int = 1
    """Processes a worker takes jobs in, sharing its one engine (``worker/consumers.py``): each
    runs ``concurrency`` jobs, their per-job work under an interpreter lock of its own, while
    one process owns the GPU and batches the segments of all of them. 1 runs everything in one
    process. Many short jobs need several (docs/benchmarks.md, "Many short jobs")."""
    finish_processes: int | None = None
    """Processes that master and encode finished audio (a book's chapters, jobs given a
    loudness), a step less urgent than the work that feeds the GPU; unset means one per CPU."""
    temp_dir: str | None = None
    """Where jobs write their audio before it is stored; unset means the system's temp folder."""
    visibility_timeout_seconds: int = 15 * 60
    """Redis hands an unacknowledged job to another worker after this long. A live worker renews
    the messages of its running jobs (``worker/leases.py``), so this bounds only how soon the
    jobs of a worker that vanished (killed, frozen, cut off) come back, not how long a job runs."""
    stop_grace_seconds: float = 300.0
    """On SIGTERM a worker takes no new jobs and lets running ones finish for this long; then
    they stop and go back to the queue at once. Keep Docker's stop grace period above it."""
    retry_backoff_seconds: float = 2.0
    """First retry of a job after a transient error waits this long; each next one twice as long."""

    # Storage: where finished audio goes.
    storage_url: str = "ttsfarm-output"
    """``s3://bucket/prefix`` or a local folder for finished audio."""
    s3_endpoint_url: str | None = None
    """For MinIO and other S3-compatible stores; unset means AWS."""
    s3_region: str | None = None
    """The bucket's region (a bucket the workers create gets it); unset: boto3's own."""
    s3_create_bucket: bool = False
    """Create the bucket at worker start if it does not exist."""
    presign_seconds: int = 15 * 60
    """Lifetime of a presigned URL (a job result's, the gateway's audio redirect), in seconds: minutes,
    so a leaked link soon stops working; 0 gives a plain URL. ``Client.fetch`` and ``ttsfarm fetch``
    read the audio where it is stored and need none."""

    # Engine: the voice, the device, and how the voice runs on it.
    voice: str = "joe"
    """Default voice name, or the path of a Piper ``.onnx`` file."""
    voices_dir: str | None = None
    """Extra folder of Piper voices (``NAME.onnx`` + ``NAME.onnx.json``)."""
    provider: ProviderName = "auto"
    """``auto`` (GPU if there is one), ``cuda`` or ``cpu``."""
    gpu: int = 0
    """The GPU a worker is pinned to."""
    cpu_threads: int = 0
    """ONNX Runtime threads on CPU; 0 means one per core."""
    precision: PrecisionName = "auto"
    """``auto`` (fp16 flow and decoder on CUDA, fp32 on CPU), ``fp16`` or ``fp32`` (the exact reference)."""
    engine: EngineName = "auto"
    """``staged``: engine v2, the voice in stages with CUDA graphs; ``single``: one session per
    shape bucket; ``auto``: staged on a GPU for batches of 8 and more, else single
    (``synthesis.engines.wants_staged``)."""
    cuda_layout: CudaLayout = "auto"
    """The convolutions' memory layout of the staged engine's waveform stage on CUDA: ``nchw``,
    ``nhwc`` (onnxruntime's ``prefer_nhwc``, each waveform graph then on an arena of its own:
    1.07-1.17x in the farm, exact lengths, for 2.5-3x the GPU memory), or ``auto``: NHWC where the
    GPU has room for it when the engine loads (``synthesis.build.waveform_layout``), else NCHW;
    see docs/benchmarks.md, runs 13 and 17. Several workers on one GPU: set ``nchw``. The stages
    that predict the durations, and the single-session engine, always run ``nchw``: NHWC changes
    the durations, and so the lengths."""
    prewarm: bool | None = None
    """Build the shape buckets' sessions and capture their graphs from the start (GPU only),
    in the background while the first jobs already run; unset means on for farm workers, off
    for one-off commands."""

    # Batching: how segments of many jobs are gathered into batches and the GPU kept fed.
    max_batch: int | None = None
    """Segments per batch; unset means 32 on a GPU (the knee on an H200) and 1 on a CPU, where
    batching does not pay (``docs/benchmarks.md``)."""
    max_wait_ms: float = 80.0
    """How long the batcher waits for a batch to fill before it runs what it has."""
    max_phoneme_ids: int = 400
    """Longest segment, in phoneme ids: text is split at sentences, clauses, then words to fit."""
    max_padded_ids: int | None = None
    """Cap on batch size times longest item, in phoneme ids; unset means 16,384 on a GPU
    and none on a CPU."""
    max_padding_ratio: float | None = None
    """Largest share of padding a batch may carry (farther-length items wait for the next);
    unset means 0.15 on a CPU and no cap on a GPU, where batches are padded to buckets anyway."""
    batch_runners: int | None = None
    """Threads that form and run batches; unset means 3 on a GPU (batches are made ready
    while others run) and 1 on a CPU."""
    concurrent_runs: int | None = None
    """Engine runs on the device at once; unset means 3 on a GPU and 1 on a CPU."""
    text_processes: int | None = None
    """Processes that segment and phonemize text; unset means up to 4 on a GPU and 0 on a
    CPU (0: each job segments in its own thread)."""

    # Gateway: the HTTP front door (``ttsfarm serve``).
    gateway_auth: bool = True
    """The HTTP gateway asks every ``/v1`` request for an API key (``ttsfarm keys add``). Turn it
    off only where another layer in front of the gateway authenticates every request."""
    gateway_rate_limit: int = 600
    """Requests one API key may make per minute through the gateway; 0 means no limit."""
    gateway_key_jobs: int = 1000
    """Jobs one API key may have queued or running at once (across all gateways); 0 means no
    limit. Past it the key's submissions get 429 until some finish."""
    gateway_key_chars_per_day: int = 0
    """Characters one API key may submit per day (UTC), across all gateways; 0 means no limit."""
    gateway_key_speech_waits: int = 16
    """Speech requests one API key may have waiting on one gateway process (of
    ``gateway_speech_waits``); 0 means no limit of its own."""
    gateway_max_body_bytes: int = 2 * 1024 * 1024
    """Largest request body the gateway reads: room for a job's 200,000 characters as escaped JSON."""
    gateway_body_seconds: float = 30.0
    """Longest a request body may take to arrive in full; a slower one is answered 408."""
    gateway_speech_max_chars: int = 4096
    """Longest input ``POST /v1/audio/speech`` speaks in one request (OpenAI's own limit); longer
    texts go through ``POST /v1/jobs``."""
    gateway_speech_timeout_seconds: float = 120.0
    """How long ``POST /v1/audio/speech`` waits for its job before answering 504 with the job id."""
    gateway_speech_waits: int = 64
    """Speech requests one gateway process waits on at once; more are answered 503."""
    gateway_voices: str = ""
    """OpenAI's voice names (``alloy``, ``nova``, ...) mapped to the farm's voices, as
    ``alloy=joe,nova=amy``; a name not listed speaks with ``voice``, the default."""
    gateway_audio_redirect: bool = False
    """``GET /v1/jobs/{id}/audio`` answers with a redirect to a presigned S3 URL instead of
    streaming the audio through the gateway (S3 storage only; its endpoint must be reachable
    by the gateway's clients)."""

    # Metrics: each farm worker's Prometheus endpoint.
    metrics_port: int = 9808
    """A farm worker serves Prometheus metrics at ``/metrics`` on this port; 0 turns them off.
    Two workers on one host (host networking) need two ports."""
    metrics_address: str = "0.0.0.0"
    """The address the metrics server listens on (``127.0.0.1`` keeps it to this host)."""

    def __post_init__(self) -> None:
        for name, kind in _CHOICES.items():
            value = getattr(self, name)
            choices = get_args(kind)
            if value not in choices:
                listed = f"{', '.join(choices[:-1])} or {choices[-1]}"
                raise SettingsError(f"{ENV_PREFIX}{name.upper()} must be {listed}, not {value!r}")
        for name in _AT_LEAST_ONE:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SettingsError(f"{ENV_PREFIX}{name.upper()} must be at least 1, not {value}")
        for name in _NOT_NEGATIVE:
            value = getattr(self, name)
            if value is not None and value < 0:
                raise SettingsError(f"{ENV_PREFIX}{name.upper()} must be 0 or more, not {value}")
        if self.max_phoneme_ids < MIN_PHONEME_IDS:  # else every job would fail at its first segment
            raise SettingsError(
                f"{ENV_PREFIX}MAX_PHONEME_IDS must be at least {MIN_PHONEME_IDS}, not {self.max_phoneme_ids}"
            )

    @property
    def farm_mode(self) -> bool:
        return bool(self.broker_url)

    @property
    def backend_url(self) -> str | None:
        return self.result_backend or self.broker_url

    def redis_tls(self) -> dict[str, str]:
        """The TLS options of a ``rediss://`` connection, as redis-py and kombu both take them."""
        options = {"ssl_cert_reqs": "required"}
        if self.redis_tls_key_file and not self.redis_tls_cert_file:
            raise SettingsError(
                f"{ENV_PREFIX}REDIS_TLS_KEY_FILE is set without {ENV_PREFIX}REDIS_TLS_CERT_FILE: set both"
            )
        for name, option in _TLS_FILES.items():
            path = getattr(self, name)
            if path is None:
                continue
            if not Path(path).is_file():
                raise SettingsError(f"{ENV_PREFIX}{name.upper()}={path}: no such file")
            options[option] = path
        return options

    @classmethod
    def load(
        cls, environ: Mapping[str, str] | None = None, config_path: str | Path | None = None
    ) -> Settings:
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        path = config_path or environ.get(f"{ENV_PREFIX}CONFIG")
        if path is None and DEFAULT_CONFIG_PATH.is_file():
            path = DEFAULT_CONFIG_PATH
        if path is not None:
            values.update(_read_config(Path(path)))
        for spec in fields(cls):
            raw = environ.get(ENV_PREFIX + spec.name.upper())
            if raw is not None:
                values[spec.name] = raw
        return cls(**{name: _convert(name, value) for name, value in values.items()})

    def with_options(self, **options: Any) -> Settings:
        """These settings with each command-line option that was given in place; an option left
        out (``None``) keeps the setting. Unlike :func:`dataclasses.replace`, ``None`` never
        clears a setting."""
        return replace(self, **{k: v for k, v in options.items() if v is not None})


_TLS_FILES: Final = {
    "redis_tls_ca_file": "ssl_ca_certs",
    "redis_tls_cert_file": "ssl_certfile",
    "redis_tls_key_file": "ssl_keyfile",
}
_TYPES: Final = {f.name: str(f.type) for f in fields(Settings)}
_CHOICES: Final = {
    "provider": ProviderName,
    "cuda_layout": CudaLayout,
    "precision": PrecisionName,
    "engine": EngineName,
}
MIN_PHONEME_IDS: Final = 16
"""The shortest segment budget the text splitter works with (``synthesis.text.Segmenter``)."""
_AT_LEAST_ONE: Final = ("max_batch", "batch_runners", "concurrent_runs", "consumers", "finish_processes")
_NOT_NEGATIVE: Final = (
    "text_processes",
    "cpu_threads",
    "gpu",
    "presign_seconds",
    "metrics_port",
    "max_queued_jobs",
    "max_job_audio_seconds",
    "max_job_temp_mb",
)


def _read_config(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SettingsError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"config file {path} is not valid TOML: {error}") from None
    table = data.get("ttsfarm", data)
    unknown = sorted(set(table) - set(_TYPES))
    if unknown:
        raise SettingsError(f"config file {path}: unknown settings {', '.join(unknown)}")
    return dict(table)


def _convert(name: str, value: Any) -> Any:
    if name not in _TYPES:
        raise SettingsError(f"unknown setting {name!r}")
    kind = _TYPES[name]
    if value == "" and "None" in kind:
        return None
    try:
        if kind.startswith("int"):
            return int(value)
        if kind.startswith("float"):
            return float(value)
        if kind.startswith("bool"):
            return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")
    except (TypeError, ValueError):
        raise SettingsError(f"setting {ENV_PREFIX}{name.upper()}={value!r} is not a valid {kind}") from None
    return value
