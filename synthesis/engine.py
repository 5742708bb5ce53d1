"""The single-session engine: each batch in one ONNX Runtime session run of the whole voice.

The model does not output lengths, so at load we expose Piper's per-phoneme duration tensor
(the output of the graph's only ``Ceil`` node). Each item's exact sample count is the sum of
its durations times the voice's hop length; everything past it is padding and is cut off.

On the GPU a batch is padded to a shape bucket (``synthesis.buckets``) and runs in that bucket's own
session, and the flow and decoder run in fp16 (``synthesis.precision``); on the CPU there is one
fp32 session and no bucket padding (docs/decisions/0001, 0002 and 0007). On a GPU with batches of 8
and more, the
staged engine (``synthesis.staged``) is the one that runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import onnxruntime as ort

from synthesis.background import Background
from synthesis.buckets import FRAME_STEP, ID_BUCKETS, MIN_FRAMES_INPUT, Bucket, bucket_for
from synthesis.devices import device
from synthesis.durations_model import durations_model
from synthesis.engine_base import (
    PIPER_OUTPUT,
    EngineBasics,
    EngineOptions,
    check_piper_interface,
    is_missing_fp16_plan,
    is_out_of_memory,
)
from synthesis.gpus import gpu_present
from synthesis.items import (
    EngineItem,
    Scales,
    Spoken,
    cut_items,
    filler_ids,
    padded_feeds,
    spoken_items,
    voice_scales,
    warmup_ids,
)
from synthesis.plain_session import PlainSessions
from synthesis.session_cache import SessionBuilds, SessionCache
from synthesis.sessions import (
    Precision,
    Provider,
    build_session,
    check_device,
    providers_for,
    run_options,
    session_options,
    starter_options,
    wants_cuda,
)
from ttsfarm.core.errors import EngineOutOfMemory
from ttsfarm.core.voices import Voice

__all__ = [
    "Engine",
    "EngineItem",
    "EngineOptions",
    "EngineOutOfMemory",
    "Precision",
    "Provider",
    "Scales",
    "Spoken",
    "cut_items",
    "filler_ids",
    "gpu_present",
    "is_missing_fp16_plan",
    "voice_scales",
    "warmup_ids",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EditedModels:
    """The voice's graph with its durations exposed (and, with buckets, a frame floor)."""

    fp32: bytes
    fp16: bytes
    """Empty unless the engine runs fp16."""
    durations: str
    """The name of the durations output."""


def only_other_output(session: ort.InferenceSession) -> str:
    """The name of the graph's one output besides the audio: the durations."""
    (name,) = (value.name for value in session.get_outputs() if value.name != PIPER_OUTPUT)
    return str(name)


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
        self.builds = SessionBuilds()
        self.background = Background(f"ttsfarm-prepare-{voice.name}")
        self.frame_overflows = 0
        """Batches whose longest item needed more frames than its bucket reserved."""
        self.last_bucket: Bucket | None = None
        self.precision_fallbacks = 0
        """Buckets that run fp32 because cuDNN had no fp16 plan for their shapes."""
        self._edited: EditedModels | None = None
        self._edit_lock = threading.Lock()
        self._plain_sessions: PlainSessions | None = None
        self._plain_durations = ""
        """The durations output of :meth:`_plain`'s graph."""
        self._fp32_buckets: set[Bucket | None] = set()
        # Not options.waveform_cuda_options: this one graph predicts the durations as well, and
        # NHWC (what TTSFARM_CUDA_LAYOUT puts there) changes them; lengths must stay exact.
        self._providers = providers_for(use_cuda, options.device_id, options.cuda_options)
        self._shared_arena = use_cuda and self.buckets and device(options.device_id).share_arena("buckets")
        self._run_options = run_options(use_cuda, options.give_back_memory)
        self._session_options = session_options(
            options.cpu_threads, self._shared_arena, options.profile_prefix
        )
        self._sessions: SessionCache[Bucket | None, ort.InferenceSession] = SessionCache(
            options.max_sessions, f"voice {voice.name}'s session"
        )
        self._sessions_lock = threading.Lock()
        """Guards the fp32 buckets, the session options and the counters."""
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
            first = self._plain().current()
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
        """Build the sessions for these batch sizes ahead of use (without buckets, the full
        session, not the starter: what benchmarks time); returns how many runs it took."""
        if not self.buckets:
            self._plain().full()
            return 0
        scales = self.default_scales()
        return sum(self.run_fillers(rows, max_ids, scales) for rows in sorted(set(batch_sizes)))

    def speak(self, items: Sequence[EngineItem], scales: Scales) -> list[Spoken]:
        """Synthesize a batch in one session run: each item's audio and its durations."""
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

    def _plain(self) -> PlainSessions:
        """The voice's own graph with only its durations exposed, for one item at a time without
        buckets: its output is then exactly the item's length, and once the edited graph is
        cached (``synthesis.durations_model``) loading it needs neither onnx nor an edit. A
        starter session speaks first (``synthesis.plain_session``); its errors show here."""
        if self._plain_sessions is not None:  # made once; every CPU segment asks, so no lock after that
            return self._plain_sessions
        with self._edit_lock:
            if self._plain_sessions is None:
                try:
                    model = durations_model(self.voice)
                except ValueError:  # says what the graph lacks
                    raise
                except Exception as error:  # onnx raises its own untyped errors
                    reason = str(error).strip()[-300:]
                    raise ValueError(f"onnx cannot read {self.voice.model_path}: {reason}") from None
                quick_start = not wants_cuda(self.options.provider) and not self.options.profile_prefix
                name = f"voice {self.voice.name}"
                sessions = PlainSessions(partial(self._plain_session, model), name, quick_start)
                first = sessions.current()
                check_piper_interface(first, str(self.voice.model_path))
                self._plain_durations = only_other_output(first)
                self._plain_sessions = sessions
            return self._plain_sessions

    def _plain_session(self, model: str | bytes, starter: bool) -> ort.InferenceSession:
        started = time.perf_counter()
        options = self._session_options
        if starter:
            options = starter_options(self.options.cpu_threads, self.options.profile_prefix)
        try:
            session = build_session(model, options, self._providers)
        except Exception as error:  # onnxruntime raises its own untyped errors
            if is_out_of_memory(error):
                raise
            reason = str(error).strip()[-300:]
            raise ValueError(f"onnxruntime cannot load {self.voice.model_path}: {reason}") from None
        self.builds.count(time.perf_counter() - started)
        return session

    def _run_alone(self, item: EngineItem, scales: Scales) -> Spoken:
        feeds = padded_feeds([item], 1, len(item.phoneme_ids), scales, "sid" in self._input_names)
        try:
            with self._run_slots:
                session = self._plain().for_run()
                audio, durations = session.run(["output", self._plain_durations], feeds, self._run_options)
        except Exception as error:  # onnxruntime raises its own untyped errors
            if is_out_of_memory(error):
                raise EngineOutOfMemory(str(error)) from error
            raise
        frames = np.asarray(durations).reshape(-1).astype(np.int32)
        return Spoken(np.asarray(audio, dtype=np.float32).reshape(-1), frames)

    def _run_once(self, items: Sequence[EngineItem], scales: Scales) -> list[Spoken]:
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
                if bucket in self._fp32_buckets and self._sessions.find(bucket) is session:
                    raise  # the fp32 session itself failed
                if bucket not in self._fp32_buckets:
                    first_line = str(error).splitlines()[0][:200]
                    log.warning("no fp16 plan for %s, it runs fp32: %s", bucket, first_line)
                    self._fp32_buckets.add(bucket)
                    self.precision_fallbacks += 1
                    self._sessions.pop(bucket)
            audio, durations = self._execute(self._session(bucket), feeds)
        audio = audio.reshape(rows, -1)
        if bucket is not None and audio.shape[1] > bucket.frames * self.voice.hop_length:
            with self._sessions_lock:
                self.frame_overflows += 1
        frames = durations.reshape(rows, -1).astype(np.int64)
        samples = frames.sum(axis=1) * self.voice.hop_length
        lengths = [len(item.phoneme_ids) for item in items]
        return spoken_items(cut_items(audio, samples, len(items)), frames, lengths)

    def end_profiling(self) -> list[str]:
        """Stop profiling every session; the profile files written."""
        if not self.options.profile_prefix:
            return []
        plain = self._plain_sessions.alive() if self._plain_sessions is not None else []
        sessions = [*plain, *self._sessions.values()]
        return [str(session.end_profiling()) for session in sessions]

    def _bucket(self, rows: int, longest: int, length_scale: float) -> Bucket | None:
        """The batch's bucket, or a built one with more rows: a new session costs about 2 s."""
        if not self.buckets:
            return None
        wanted = bucket_for(rows, longest, length_scale)
        built = self._sessions.keys()
        if wanted in built:
            return wanted
        larger = [
            bucket
            for bucket in built
            if bucket is not None
            and (bucket.ids, bucket.frames) == (wanted.ids, wanted.frames)
            and bucket.rows > wanted.rows
        ]
        return min(larger, key=lambda bucket: bucket.rows) if larger else wanted

    def _session(self, bucket: Bucket | None) -> ort.InferenceSession:
        """The bucket's session, built on first use (about 2 s, holding only that bucket's lock)."""
        return self._sessions.get(bucket, lambda: self._build(bucket in self._fp32_buckets))

    def _build(self, fp32: bool) -> ort.InferenceSession:
        edited = self._edited_models()
        model = edited.fp32 if fp32 or not edited.fp16 else edited.fp16
        with self._sessions_lock:
            options, shared_arena = self._session_options, self._shared_arena
        try:
            return self.builds.build(model, options, self._providers)
        except Exception as error:  # onnxruntime raises its own untyped errors
            if not shared_arena:
                raise
            own_arena = session_options(self.options.cpu_threads, False, self.options.profile_prefix)
            session = self.builds.build(model, own_arena, self._providers)
            log.warning("session with the shared GPU arena failed (%s): sessions keep their own", error)
            with self._sessions_lock:  # only once that worked
                self._shared_arena, self._session_options = False, own_arena
            return session

    def _execute(self, session: ort.InferenceSession, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        with self._run_slots:
            return list(session.run(["output", self._edited_models().durations], feeds, self._run_options))
