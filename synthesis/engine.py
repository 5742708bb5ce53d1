"""The ONNX Runtime sessions of one Piper voice: batched phoneme ids in, trimmed waveforms out.

The model does not output lengths, so at load we expose Piper's per-phoneme duration tensor
(the output of the graph's only ``Ceil`` node). Each item's exact sample count is the sum of
its durations times the voice's hop length; everything past it is padding and is cut off.

On the GPU a batch is padded to a shape bucket (``synthesis.buckets``) and runs in that bucket's own
session, and the flow and decoder run in fp16 (``synthesis.precision``); on the CPU there is one
fp32 session and no bucket padding. ``docs/benchmarks.md`` has the measurements behind this.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import onnxruntime as ort

from synthesis.buckets import FRAME_STEP, ID_BUCKETS, MIN_FRAMES_INPUT, Bucket, bucket_for
from synthesis.gpus import gpu_present
from synthesis.sessions import (
    CUDA,
    CudaOptions,
    Precision,
    Provider,
    build_session,
    check_device,
    providers_for,
    run_options,
    session_options,
    share_gpu_arena,
    wants_cuda,
)
from ttsfarm.errors import EngineOutOfMemory
from ttsfarm.voices import Voice

__all__ = [
    "Engine",
    "EngineItem",
    "EngineOptions",
    "EngineOutOfMemory",
    "Precision",
    "Provider",
    "Scales",
    "gpu_present",
]

log = logging.getLogger(__name__)

PAD_ID: Final = 0
"""Phoneme id used to right-pad shorter items in a batch (Piper's ``_``)."""

WARMUP_PHONEMES: Final = "h\u0259l\u02c8o\u028a."  # "hello." in IPA
"""A short utterance run once at load, so kernels and memory pools are ready."""

MAX_BATCH_FRAMES: Final = 1 << 17
"""Rows times decoder frames per session run; larger batches are split. cuDNN describes a tensor
with 32-bit sizes, and the last upsampling layer holds rows x frames x hop (256) x channels
(32 to 64) values: past 2**31 the run fails with ``CUDNN_STATUS_NOT_SUPPORTED``."""

DEFAULT_MAX_SESSIONS: Final = 64
"""Bucket sessions kept per voice; the least recently used goes first past this."""

NO_FP16_PLAN_MARKERS: Final = ("HEURISTIC_QUERY_FAILED", "CUDNN_FE failure")
"""How cuDNN says it has no plan for a convolution's shapes in fp16 (seen on an H200 for one
dilated convolution at 1 to 4 rows): that bucket then runs fp32. Any other error is raised."""

PIPER_INPUTS: Final = frozenset({"input", "input_lengths", "scales"})
PIPER_OUTPUT: Final = "output"
"""What every Piper voice's graph takes and gives (a multi-speaker voice also takes ``sid``)."""

OUT_OF_MEMORY_MARKERS: Final = (
    "out of memory",
    "failed to allocate",
    "cudnn_status_alloc_failed",
    "cublas_status_alloc_failed",
    "bad_alloc",
)


@dataclass(frozen=True)
class Scales:
    """The model's ``scales`` input; one value for a whole batch."""

    noise_scale: float
    length_scale: float
    noise_w: float

    def as_array(self) -> np.ndarray:
        return np.array([self.noise_scale, self.length_scale, self.noise_w], dtype=np.float32)


@dataclass(frozen=True)
class EngineItem:
    """One utterance for the model: phoneme ids with BOS/EOS, and a speaker id if any."""

    phoneme_ids: Sequence[int]
    speaker_id: int | None = None


@dataclass(frozen=True)
class EngineOptions:
    """How to build the ONNX Runtime sessions."""

    provider: Provider = "auto"
    """``cuda`` or ``auto`` use the GPU when onnxruntime-gpu sees one; ``cpu`` never does."""
    device_id: int = 0
    """Which GPU to pin the sessions to."""
    cpu_threads: int = 0
    """Intra-op threads on CPU; 0 means one per available core."""
    warmup: bool = True
    """Run a short utterance at load, so the first real job is not slow."""
    precision: Precision = "auto"
    """``fp16`` runs the flow and decoder in half precision on the GPU; ``fp32`` is the exact
    reference; ``auto`` is fp16 on CUDA and fp32 on CPU (fp16 is only used with CUDA)."""
    shape_buckets: bool | None = None
    """Pad batches to fixed shapes with one session each; ``None`` means on for CUDA only."""
    io_binding: bool = False
    """Bind inputs and outputs explicitly (the audio stays on the GPU until copied once)."""
    max_sessions: int = DEFAULT_MAX_SESSIONS
    """Bucket sessions kept at once."""
    cuda_options: CudaOptions = ()
    """Extra CUDA provider options for every session of the engine."""
    waveform_cuda_options: CudaOptions = ()
    """Extra CUDA provider options for the staged engine's waveform sessions only, e.g. the
    layout ``(("prefer_nhwc", "1"),)`` (``TTSFARM_CUDA_LAYOUT``): the sessions that compute the
    durations must not get it (NHWC there changed 7 of 79 segment lengths, run 13). The
    single-session engine, whose one graph holds the durations too, does not use them."""
    capture_front: bool = False
    """The staged engine, with buckets: its front rewritten (``synthesis.front_graph``), run on
    its own thread with fixed buffers, and on CUDA captured as a CUDA graph (every captured
    graph then keeps an arena of its own); off: plain front sessions in the caller's thread."""
    gathered_positions: bool = True
    """The text encoder's relative-position pads and slices as one ``Gather`` each
    (``synthesis.relative_positions``): the same outputs to the bit, fewer copies on the GPU.
    Off only to compare with the voice's graph as exported."""
    fused_layer_norms: bool = False
    """Experimental, for the staged engine on CUDA: its front's spelled-out layer norms as
    single nodes (``synthesis.layer_norms``). 1.09x engine alone on an H200, but 9 of 79 corpus
    segments came out a different length from the fp32 reference (run 20), so it is off."""
    conv_bias_adds: bool = True
    """The staged engine on CUDA: every convolution's bias added by an ``Add`` of its own
    (``synthesis.conv_bias``) instead of cuDNN's generic tensor kernel, which was a quarter of the
    waveform stage's GPU time. The same lengths and log-mel distances to the last digit; engine
    alone 1.07x (docs/benchmarks.md, run 31). Off only to compare; ``fused_conv_bias`` overrides it."""
    fused_conv_bias: bool = False
    """Experimental, for the staged engine on CUDA: the waveform sessions' convolution biases
    fused into the convolutions by cuDNN (CUDA option ``fuse_conv_bias``), each
    ``ConvTranspose``'s bias moved to an ``Add`` first (``synthesis.conv_bias``)."""
    max_batch_frames: int = MAX_BATCH_FRAMES
    """Batches over this many rows x decoder frames run in parts."""
    profile_prefix: str | None = None
    """Write onnxruntime's per-node profile to files starting with this (see :meth:`Engine.end_profiling`)."""
    concurrent_runs: int = 1
    """Session runs allowed at once (from different threads). With more than one, one run's
    host-side work (CPU nodes, copies, synchronisation) overlaps another's kernels."""
    give_back_memory: bool = True
    """On the CPU, return the memory each run freed to the system (``sessions.run_options``):
    on for workers, which run for days; off for one-off commands, where it only costs time."""


@dataclass(frozen=True)
class EditedModels:
    """The voice's graph with its durations exposed (and, with buckets, a frame floor)."""

    fp32: bytes
    fp16: bytes
    """Empty unless the engine runs fp16."""
    durations: str
    """The name of the durations output."""


def edit_model(voice: Voice, *, buckets: bool, fp16: bool, gathered_positions: bool = True) -> EditedModels:
    """Load and edit the voice's graph (``synthesis.graph``, ``synthesis.relative_positions``,
    ``synthesis.precision``); onnx is imported here, so a CPU engine that never batches does
    not pay for it."""
    import onnx

    from synthesis.graph import add_frame_floor, expose_durations
    from synthesis.precision import convert_to_fp16
    from synthesis.relative_positions import with_gathered_relative_positions

    model = onnx.load(str(voice.model_path))
    if gathered_positions:
        model = with_gathered_relative_positions(model)[0]
    durations = expose_durations(model)
    if buckets:
        add_frame_floor(model, FRAME_STEP)
    half = convert_to_fp16(model).SerializeToString() if fp16 else b""
    return EditedModels(model.SerializeToString(), half, durations)


def is_out_of_memory(error: BaseException) -> bool:
    text = str(error).lower()
    return any(marker in text for marker in OUT_OF_MEMORY_MARKERS)


def is_missing_fp16_plan(error: BaseException) -> bool:
    return any(marker in str(error) for marker in NO_FP16_PLAN_MARKERS)


def check_piper_interface(session: ort.InferenceSession, path: str) -> None:
    """Raise ``ValueError`` unless the session's graph has a Piper voice's inputs and output."""
    inputs = {value.name for value in session.get_inputs()}
    outputs = {value.name for value in session.get_outputs()}
    if not inputs >= PIPER_INPUTS or PIPER_OUTPUT not in outputs:
        raise ValueError(
            f"{path} takes {sorted(inputs)} and gives {sorted(outputs)}, where a Piper voice takes "
            f"{sorted(PIPER_INPUTS)} and gives {PIPER_OUTPUT!r}"
        )


def cut_items(audio: np.ndarray, samples: np.ndarray, count: int) -> list[np.ndarray]:
    """The first ``count`` rows of a batch's ``(rows, samples)`` audio, each trimmed to its own
    ``samples``, as arrays of their own (writable; nothing refers back to ``audio``).

    Copied through ``bytearray``, which keeps the interpreter lock for the whole copy: a numpy
    copy of this size lets go of it and must then win it back, and in a worker, behind 40-odd
    threads, the 32 copies of a batch took 25-30 ms where engine alone they took 3 (the ``cut``
    counter, docs/benchmarks.md, run 39; ``benchmarks/cut_items.py`` shows the waiting on a CPU)."""
    dtype = audio.dtype
    return [np.frombuffer(bytearray(audio[row, : samples[row]]), dtype=dtype) for row in range(count)]


def padded_feeds(
    items: Sequence[EngineItem], rows: int, width: int, scales: Scales, takes_sid: bool
) -> dict[str, np.ndarray]:
    """The graph's inputs for a batch padded to ``rows`` x ``width`` phoneme ids. Spare rows
    repeat the shortest item (their audio is discarded)."""
    lengths = np.array([len(item.phoneme_ids) for item in items], dtype=np.int64)
    shortest = int(np.argmin(lengths))
    ids = np.full((rows, width), PAD_ID, dtype=np.int64)
    all_lengths = np.full(rows, lengths[shortest], dtype=np.int64)
    all_lengths[: len(items)] = lengths
    for row in range(rows):
        source = items[row] if row < len(items) else items[shortest]
        ids[row, : all_lengths[row]] = source.phoneme_ids
    feeds = {"input": ids, "input_lengths": all_lengths, "scales": scales.as_array()}
    if takes_sid:
        sids = [item.speaker_id or 0 for item in items] + [0] * (rows - len(items))
        feeds["sid"] = np.array(sids, dtype=np.int64)
    return feeds


def warmup_ids(voice: Voice) -> list[int]:
    """Phoneme ids of :data:`WARMUP_PHONEMES` in the voice's own id map."""
    id_map = voice.phoneme_id_map
    ids = [*id_map["^"], *id_map["_"]]
    for phoneme in WARMUP_PHONEMES:
        if phoneme in id_map:
            ids += [*id_map[phoneme], *id_map["_"]]
    return [*ids, *id_map["$"]]


def filler_ids(voice: Voice, length: int) -> list[int]:
    """A speakable id sequence of exactly ``length`` ids (the warm-up word, repeated)."""
    base = warmup_ids(voice)
    head, inner, tail = base[:2], base[2:-1], base[-1:]
    body = (inner * (length // max(len(inner), 1) + 1))[: max(length - len(head) - len(tail), 0)]
    return [*head, *body, *tail][:length]


def voice_scales(voice: Voice) -> Scales:
    """The voice's own noise, length and noise-w scales (its config's ``inference`` section)."""
    return Scales(voice.noise_scale, voice.length_scale, voice.noise_w)


class EngineBasics:
    """What both engines (:class:`Engine`, ``synthesis.staged.StagedEngine``) share once loaded."""

    voice: Voice
    options: EngineOptions
    provider: str
    warmup_seconds: float

    @property
    def on_gpu(self) -> bool:
        return self.provider == CUDA

    @property
    def kind(self) -> str:
        """The engine's class name, as metrics and logs show it."""
        return type(self).__name__

    def default_scales(self) -> Scales:
        return voice_scales(self.voice)

    def stage_totals(self) -> dict[str, float]:
        """Seconds spent so far in each stage of the engine's runs (none for one session)."""
        return {}

    def run(self, items: Sequence[EngineItem], scales: Scales) -> list[np.ndarray]:
        raise NotImplementedError

    def _in_halves(self, items: Sequence[EngineItem], scales: Scales) -> list[np.ndarray]:
        """A batch too large for one run (frames over the limit), run as two."""
        middle = len(items) // 2
        return [*self.run(items[:middle], scales), *self.run(items[middle:], scales)]

    def _run_fillers(self, rows: int, max_ids: int, scales: Scales) -> int:
        """Run a batch of ``rows`` filler items at each phoneme-id bucket up to ``max_ids``: the
        sessions of those shapes are built before real batches need them. Returns the runs."""
        sizes = [size for size in ID_BUCKETS if size <= max_ids]
        for ids in sizes:
            self.run([EngineItem(filler_ids(self.voice, ids))] * rows, scales)
        return len(sizes)

    def _warm_up(self) -> None:
        """One short run, if the options ask for it: the device's first real batch is then fast."""
        if self.options.warmup:
            started = time.perf_counter()
            self.run([EngineItem(warmup_ids(self.voice))], self.default_scales())
            self.warmup_seconds = time.perf_counter() - started


class Engine(EngineBasics):
    """Owns the ONNX sessions of one voice. :meth:`run` may be called from several threads;
    at most ``options.concurrent_runs`` session runs go at once."""

    def __init__(self, voice: Voice, options: EngineOptions | None = None) -> None:
        """The engine's state, nothing loaded yet: :meth:`load` makes one ready to run."""
        self.voice = voice
        self.options = options = options or EngineOptions()
        use_cuda = wants_cuda(options.provider)
        if options.precision == "fp16" and not use_cuda:
            log.warning("fp16 needs the GPU; running fp32 on the CPU")
        self.precision: Precision = "fp16" if use_cuda and options.precision != "fp32" else "fp32"
        self.buckets = use_cuda if options.shape_buckets is None else options.shape_buckets
        self.sessions_built = 0
        self.session_seconds = 0.0
        self.frame_overflows = 0
        """Batches whose longest item needed more frames than its bucket reserved."""
        self.last_bucket: Bucket | None = None
        self.precision_fallbacks = 0
        """Buckets that run fp32 because cuDNN had no fp16 plan for their shapes."""
        self._edited: EditedModels | None = None
        self._edit_lock = threading.Lock()
        self._plain_session: ort.InferenceSession | None = None
        self._fp32_buckets: set[Bucket | None] = set()
        # Not options.waveform_cuda_options: this one graph predicts the durations as well, and
        # NHWC (what TTSFARM_CUDA_LAYOUT puts there) changes them; lengths must stay exact.
        self._providers = providers_for(use_cuda, options.device_id, options.cuda_options)
        self._shared_arena = use_cuda and self.buckets and share_gpu_arena(options.device_id)
        self._run_options = run_options(use_cuda, options.give_back_memory)
        self._session_options = session_options(
            options.cpu_threads, self._shared_arena, options.profile_prefix
        )
        self._sessions: OrderedDict[Bucket | None, ort.InferenceSession] = OrderedDict()
        self._sessions_lock = threading.Lock()
        """Guards the sessions, their buckets and the counters (runs and builds go unlocked)."""
        self._building: dict[Bucket | None, threading.Lock] = {}
        """One lock per bucket whose session is being built."""
        self._run_slots = threading.BoundedSemaphore(max(options.concurrent_runs, 1))
        self.provider = ""
        self._input_names: set[str] = set()
        self.warmup_seconds = 0.0

    @classmethod
    def load(cls, voice: Voice, options: EngineOptions | None = None) -> Engine:
        """Load ``voice``: edit its graph where buckets or fp16 need it (errors in the model show
        here, not at the first batch), build the first session on the device asked for, check
        that it runs there, and warm it up if ``options.warmup``."""
        engine = cls(voice, options)
        engine._open()
        return engine

    def _open(self) -> None:
        voice, options = self.voice, self.options
        if self.buckets or self.precision == "fp16":
            self._edited_models()  # errors in the model show at load, not at the first batch
        if self.buckets:
            first = self._session(self._bucket(1, len(warmup_ids(voice)), voice.length_scale))
        else:
            first = self._plain()
        self._input_names = {i.name for i in first.get_inputs()}
        check_device(first, wants_cuda(options.provider), options.device_id)
        self.provider = first.get_providers()[0]
        log.info("voice %s loaded on %s (%s)", voice.name, self.provider, self.precision)
        self._warm_up()

    def padded_shape(self, lengths: Sequence[int], length_scale: float) -> tuple[int, int]:
        """Rows and phoneme ids a batch of these item lengths is computed as."""
        bucket = self._bucket(len(lengths), max(lengths), length_scale)
        return (bucket.rows, bucket.ids) if bucket else (len(lengths), max(lengths))

    def prepare(self, batch_sizes: Sequence[int], max_ids: int = ID_BUCKETS[-1]) -> int:
        """Build the bucket sessions for these batch sizes ahead of use; returns how many ran."""
        if not self.buckets:
            return 0
        scales = self.default_scales()
        return sum(self._run_fillers(rows, max_ids, scales) for rows in sorted(set(batch_sizes)))

    def run(self, items: Sequence[EngineItem], scales: Scales) -> list[np.ndarray]:
        """Synthesize a batch in one session run; one float32 waveform per item."""
        if not items:
            return []
        longest = max(len(item.phoneme_ids) for item in items)
        if len(items) > 1 and self._frames_of(len(items), longest, scales) > self.options.max_batch_frames:
            return self._in_halves(items, scales)
        return self._run_once(items, scales)

    def _frames_of(self, rows: int, longest: int, scales: Scales) -> int:
        bucket = bucket_for(rows, longest, scales.length_scale)
        return (bucket.rows if self.buckets else rows) * bucket.frames

    def _edited_models(self) -> EditedModels:
        if self._edited is not None:  # built once; every batch asks, so no lock after that
            return self._edited
        with self._edit_lock:
            if self._edited is None:
                self._edited = edit_model(
                    self.voice,
                    buckets=self.buckets,
                    fp16=self.precision == "fp16",
                    gathered_positions=self.options.gathered_positions,
                )
            return self._edited

    def _plain(self) -> ort.InferenceSession:
        """The voice's own graph, unedited, for one item at a time without buckets: its output
        is then exactly the item's length, and loading it needs neither onnx nor an edit."""
        if self._plain_session is not None:  # built once; every CPU segment asks, so no lock after that
            return self._plain_session
        with self._edit_lock:
            if self._plain_session is None:
                started = time.perf_counter()
                path = self.voice.model_path
                try:
                    session = build_session(str(path), self._session_options, self._providers)
                except Exception as error:  # onnxruntime raises its own untyped errors
                    if is_out_of_memory(error):
                        raise
                    raise ValueError(f"onnxruntime cannot load {path}: {str(error).strip()[-300:]}") from None
                check_piper_interface(session, str(path))
                self._plain_session = session
                with self._sessions_lock:
                    self.sessions_built += 1
                    self.session_seconds += time.perf_counter() - started
            return self._plain_session

    def _run_alone(self, item: EngineItem, scales: Scales) -> np.ndarray:
        feeds = padded_feeds([item], 1, len(item.phoneme_ids), scales, "sid" in self._input_names)
        try:
            with self._run_slots:
                (audio,) = self._plain().run(["output"], feeds, self._run_options)
        except Exception as error:  # onnxruntime raises its own untyped errors
            if is_out_of_memory(error):
                raise EngineOutOfMemory(str(error)) from error
            raise
        return np.asarray(audio, dtype=np.float32).reshape(-1)

    def _run_once(self, items: Sequence[EngineItem], scales: Scales) -> list[np.ndarray]:
        if len(items) == 1 and not self.buckets:
            return [self._run_alone(items[0], scales)]
        longest = max(len(item.phoneme_ids) for item in items)
        bucket = self._bucket(len(items), longest, scales.length_scale)
        rows, width = (bucket.rows, bucket.ids) if bucket else (len(items), longest)
        feeds = padded_feeds(items, rows, width, scales, "sid" in self._input_names)
        if bucket is not None:
            feeds[MIN_FRAMES_INPUT] = np.array(bucket.frames, dtype=np.int64)
        with self._sessions_lock:
            self.last_bucket = bucket
        session = self._session(bucket)
        try:
            audio, durations = self._execute(session, feeds)
        except Exception as error:  # onnxruntime raises its own untyped errors
            if is_out_of_memory(error):
                raise EngineOutOfMemory(str(error)) from error
            if not self._edited_models().fp16 or not is_missing_fp16_plan(error):
                raise
            with self._sessions_lock:
                if bucket in self._fp32_buckets and self._sessions.get(bucket) is session:
                    raise  # the fp32 session itself failed
                if bucket not in self._fp32_buckets:
                    first_line = str(error).splitlines()[0][:200]
                    log.warning("no fp16 plan for %s, it runs fp32: %s", bucket, first_line)
                    self._fp32_buckets.add(bucket)
                    self.precision_fallbacks += 1
                    self._sessions.pop(bucket, None)
            audio, durations = self._execute(self._session(bucket), feeds)
        audio = audio.reshape(rows, -1)
        if bucket is not None and audio.shape[1] > bucket.frames * self.voice.hop_length:
            with self._sessions_lock:
                self.frame_overflows += 1
        samples = durations.reshape(rows, -1).sum(axis=1).astype(np.int64)
        samples *= self.voice.hop_length
        return cut_items(audio, samples, len(items))

    def end_profiling(self) -> list[str]:
        """Stop profiling every session; the profile files written."""
        if not self.options.profile_prefix:
            return []
        plain = [self._plain_session] if self._plain_session is not None else []
        with self._sessions_lock:
            sessions = [*plain, *self._sessions.values()]
        return [str(session.end_profiling()) for session in sessions]

    def _bucket(self, rows: int, longest: int, length_scale: float) -> Bucket | None:
        """The batch's bucket, or a built one with more rows: a new session costs about 2 s."""
        if not self.buckets:
            return None
        wanted = bucket_for(rows, longest, length_scale)
        with self._sessions_lock:
            if wanted in self._sessions:
                return wanted
            larger = [
                bucket
                for bucket in self._sessions
                if bucket is not None
                and (bucket.ids, bucket.frames) == (wanted.ids, wanted.frames)
                and bucket.rows > wanted.rows
            ]
        return min(larger, key=lambda bucket: bucket.rows) if larger else wanted

    def _session(self, bucket: Bucket | None) -> ort.InferenceSession:
        """The bucket's session, built on first use. A build (about 2 s) holds only that
        bucket's lock: runners whose sessions exist go on running meanwhile."""
        with self._sessions_lock:
            session = self._sessions.get(bucket)
            if session is not None:
                self._sessions.move_to_end(bucket)
                return session
            building = self._building.setdefault(bucket, threading.Lock())
        with building:
            with self._sessions_lock:
                session = self._sessions.get(bucket)  # another runner built it meanwhile
                if session is not None:
                    return session
            started = time.perf_counter()
            session = self._build(bucket in self._fp32_buckets)
            with self._sessions_lock:
                self.session_seconds += time.perf_counter() - started
                self.sessions_built += 1
                self._sessions[bucket] = session
                self._building.pop(bucket, None)
                while len(self._sessions) > max(self.options.max_sessions, 1):
                    evicted, _ = self._sessions.popitem(last=False)
                    log.info("voice %s: dropped the session of bucket %s", self.voice.name, evicted)
        log.debug("voice %s: session for %s built", self.voice.name, bucket)
        return session

    def _build(self, fp32: bool) -> ort.InferenceSession:
        edited = self._edited_models()
        model = edited.fp32 if fp32 or not edited.fp16 else edited.fp16
        with self._sessions_lock:
            options, shared_arena = self._session_options, self._shared_arena
        try:
            return build_session(model, options, self._providers)
        except Exception as error:  # onnxruntime raises its own untyped errors
            if not shared_arena:
                raise
            own_arena = session_options(self.options.cpu_threads, False, self.options.profile_prefix)
            session = build_session(model, own_arena, self._providers)
            log.warning("session with the shared GPU arena failed (%s): sessions keep their own", error)
            with self._sessions_lock:  # only once that worked
                self._shared_arena, self._session_options = False, own_arena
            return session

    def _execute(self, session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        with self._run_slots:
            return self._execute_now(session, feeds)

    def _execute_now(self, session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if not (self.options.io_binding and self.on_gpu):
            return list(session.run(["output", self._edited_models().durations], feeds, self._run_options))
        binding = session.io_binding()
        for name, value in feeds.items():
            binding.bind_cpu_input(name, value)
        binding.bind_output("output", "cuda", self.options.device_id)
        binding.bind_output(self._edited_models().durations, "cpu")
        session.run_with_iobinding(binding)
        return list(binding.copy_outputs_to_cpu())
