"""Engine v2: a voice run as three stages, the waveform stage replayed as a CUDA graph.

``synthesis.stages`` cuts the voice: front (phoneme ids to the prior and durations), expand (the
prior repeated by the durations, plus noise) and waveform (flow and decoder). On the GPU:

- the front runs per ``(rows, phoneme ids)`` bucket, fp32, one session per bucket with fixed
  shapes, never in the layout ``TTSFARM_CUDA_LAYOUT`` sets (``synthesis.stage_options``), run in
  the caller's thread. With ``capture_front`` (opt-in: docs/benchmarks.md, runs 14-16) its graph
  is rewritten so that it can be captured too (``synthesis.front_graph``: masked indexing made
  dense, the duration noise an input filled before each replay), and fronts are replayed one at
  a time on a thread of their own (the *front lane*), which owns their buffers; a front that
  cannot be made so runs plain, with a log line saying why;
- the host reads the durations (a few kilobytes) and picks the batch's frame bucket from the
  frames it really needs; nothing the size of the frames is built on the host;
- expand (a few small kernels that lay out each frame's phoneme and the frame mask from the
  durations, a gather, and the noise) writes ``z_p`` and the mask straight into
  the fixed input buffers of that ``(rows, frames)`` bucket's waveform session, once the
  bucket's previous batch is out (each waveform slot is held from expand until its audio has
  been copied to the host);
- the waveform session, fp16, was captured as a CUDA graph when its bucket was first used, and
  is replayed. Replays go one at a time on one thread of their own (the engine's *graph
  lane*), which does nothing else but build the waveform sessions: expand before a replay (in
  the runner's thread, or on the front lane with ``capture_front``) and the copy of the audio to
  the host after it (in the runner's thread) run elsewhere, so the lane takes the interpreter
  lock twice per batch, not once per session run. Fronts and copies of other batches run
  meanwhile.

Frames are chosen from the real durations, so nothing overflows a bucket and no frames are
reserved per phoneme id in advance. Exact lengths hold: each item gets ``sum(durations) * hop``
samples, the durations being those of the fp32 front. Without CUDA (tests, or a graph that will
not capture) the same stages run with dynamic shapes and no graphs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Final, TypeVar

import numpy as np
import onnx
import onnxruntime as ort

from synthesis.buckets import ID_BUCKETS, Bucket, bucket_for, row_bucket
from synthesis.conv_bias import with_biases_apart
from synthesis.engine import (
    EngineBasics,
    EngineItem,
    EngineOptions,
    EngineOutOfMemory,
    Scales,
    cut_items,
    is_missing_fp16_plan,
    is_out_of_memory,
    padded_feeds,
    warmup_ids,
)
from synthesis.frame_plan import FRAME_BUCKETS, FRAMES_PER_ID_AT_MOST, Plan, frame_bucket
from synthesis.front_graph import FRONT_NOISE, capturable_front
from synthesis.host_buffers import host_buffers
from synthesis.lanes import graph_lane
from synthesis.layer_norms import with_fused_layer_norms
from synthesis.precision import convert_to_fp16
from synthesis.relative_positions import with_gathered_relative_positions
from synthesis.sessions import (
    FIXED_SHAPE_ARENA,
    NHWC,
    CudaOptions,
    Precision,
    build_session,
    check_device,
    providers_for,
    session_options,
    share_gpu_arena,
    wants_cuda,
)
from synthesis.stage_options import GRAPH_OPTIONS, stage_cuda_options, waveform_cuda_options
from synthesis.stages import (
    AUDIO_OUTPUT,
    COPY_INPUT,
    COPY_OUTPUT,
    EXPAND_DURATIONS,
    EXPAND_FRAMES,
    EXPAND_LOG_STD,
    EXPAND_MEAN,
    EXPAND_NOISE_SCALE,
    UnsupportedGraph,
    VoiceStages,
    copy_model,
    extra_input,
    split_voice,
    with_fixed_inputs,
)
from ttsfarm.voices import Voice

log = logging.getLogger(__name__)

DEFAULT_MAX_GRAPHS: Final = 64
"""Waveform buckets (captured graphs, each with its own buffers) kept; least recently used go."""
SKIP_CAPTURE: Final = (("gpu_graph_id", "-1"),)
"""Run options for a waveform session's first run: not captured, so that cuDNN builds its plans
(and says when it has none in fp16) outside the capture."""

STAGES: Final = (
    "front",
    "plan",
    "slot_wait",
    "expand",
    "lane_wait",
    "waveform",
    "lane_return",
    "copy",
    "cut",
)
"""What ``stage_seconds`` adds up, in a batch's order: ``front`` (its inputs padded and bound,
and its run), ``plan`` (the frame bucket from the durations), ``slot_wait`` (for the waveform slot
of the batch's shape to be free), ``expand``, ``lane_wait`` (from the replay's submit to its
start on the graph lane), ``waveform`` (the replay), ``lane_return`` (from the replay's end to
the runner going on: the hand-back and the interpreter lock), ``copy`` (to the host) and
``cut`` (the items' audio copied out of the lent host buffer, and the buffer given back).
Without buckets (no slots, no lane) only the front, the plan and the cut are counted."""
T = TypeVar("T")


@dataclass
class WaveformSlot:
    """One ``(rows, frames)`` shape of the waveform stage: a session and its fixed buffers."""

    session: ort.InferenceSession
    binding: Any
    inputs: dict[str, ort.OrtValue]
    output: ort.OrtValue
    fp32: bool
    runs: int = 0
    held: threading.Lock = field(default_factory=threading.Lock)
    """Held from the moment expand writes a batch into :attr:`inputs` until its audio has been
    copied out of :attr:`output` to the host."""


@dataclass
class FrontSlot:
    """One ``(rows, ids)`` shape of the captured front: a session and its fixed buffers."""

    session: ort.InferenceSession
    binding: Any
    inputs: dict[str, ort.OrtValue]
    outputs: dict[str, ort.OrtValue]
    noise_shape: tuple[int, ...]


@dataclass(frozen=True)
class FrontResult:
    """What the front stage hands to expand: device values, and the durations on the host."""

    mean_t: ort.OrtValue
    log_std_t: ort.OrtValue
    extras: dict[str, ort.OrtValue]
    durations: np.ndarray
    """Frames per phoneme, ``(rows, ids)``, int64."""


class StagedEngine(EngineBasics):
    """Same interface as :class:`synthesis.engine.Engine`; see the module docstring."""

    def __init__(self, voice: Voice, options: EngineOptions | None = None) -> None:
        self.voice = voice
        self.options = options = options or EngineOptions()
        use_cuda = wants_cuda(options.provider)
        self.precision: Precision = "fp16" if use_cuda and options.precision != "fp32" else "fp32"
        self.buckets = use_cuda if options.shape_buckets is None else options.shape_buckets
        self.graphs = use_cuda and self.buckets
        """Waveform buckets are captured as CUDA graphs; without CUDA they run as plain sessions."""
        self.sessions_built = 0
        self.session_seconds = 0.0
        self.capture_seconds = 0.0
        self.frame_overflows = 0
        """Batches that needed more frames than :data:`MAX_BATCH_FRAMES` allows, and ran in halves."""
        self.precision_fallbacks = 0
        self.last_bucket: Bucket | None = None
        self.warmup_seconds = 0.0
        self.stage_seconds = dict.fromkeys(STAGES, 0.0)
        """Time spent in each stage so far, and in the steps and waits between them
        (:data:`STAGES`)."""
        self._stage_lock = threading.Lock()
        """Guards ``stage_seconds``: the runners add their fronts' time at once."""
        model = onnx.load(str(voice.model_path))
        if options.gathered_positions:
            model = with_gathered_relative_positions(model)[0]
        stages = split_voice(model)
        if use_cuda and options.fused_layer_norms:  # experimental: lengths move (run 20)
            stages = replace(stages, front=with_fused_layer_norms(stages.front)[0])
        if use_cuda and options.fused_conv_bias:  # experimental: cuDNN fuses the other biases
            stages = replace(stages, waveform=with_biases_apart(stages.waveform, {"ConvTranspose"})[0])
        elif use_cuda and options.conv_bias_adds:
            front, waveform = (with_biases_apart(stage)[0] for stage in (stages.front, stages.waveform))
            stages = replace(stages, front=front, waveform=waveform)
        self.stages: VoiceStages = stages
        self._waveform_fp32 = stages.waveform
        half = self.precision == "fp16"
        self._waveform = convert_to_fp16(stages.waveform, whole_graph=True) if half else None
        self._device = "cuda" if use_cuda else "cpu"
        front_cuda, waveform_cuda = stage_cuda_options(options, self.graphs)
        self._arena: CudaOptions = (FIXED_SHAPE_ARENA,) if self.buckets else ()
        """Every session sees one shape with buckets: its own arena needs no room to grow."""
        self._front_providers = providers_for(use_cuda, options.device_id, (*self._arena, *front_cuda))
        captured_front = (*self._arena, *front_cuda, *GRAPH_OPTIONS)
        self._front_graph_providers = providers_for(use_cuda, options.device_id, captured_front)
        self._front_options = session_options(options.cpu_threads, False, options.profile_prefix)
        own_arenas = NHWC in waveform_cuda or options.capture_front
        shared = self.graphs and not own_arenas and share_gpu_arena(options.device_id, "graphs")
        if self.graphs and not shared and not own_arenas:
            log.warning("the GPU arena is taken by bucket sessions: each waveform graph keeps its own")
        self._graph_options = session_options(options.cpu_threads, shared, options.profile_prefix, True)
        self._skip_capture = ort.RunOptions()
        for key, value in SKIP_CAPTURE:
            self._skip_capture.add_run_config_entry(key, value)
        self._lock = threading.Lock()
        self._fronts: OrderedDict[tuple[int, int] | None, ort.InferenceSession] = OrderedDict()
        self._front_slots: OrderedDict[tuple[int, int], FrontSlot] = OrderedDict()
        fixed_fronts = self.buckets and options.capture_front
        self._front_lane = graph_lane(options.device_id, "fronts") if fixed_fronts else None
        """Set where fronts run as fixed-shape slots (captured on CUDA); ``None`` without buckets
        or ``capture_front``, or when the first one could not be built (plain fronts then)."""
        self._slots: OrderedDict[tuple[int, int], WaveformSlot] = OrderedDict()
        self._building: dict[object, threading.Lock] = {}
        self._run_slots = threading.BoundedSemaphore(max(options.concurrent_runs, 1))
        self._lane = graph_lane(options.device_id) if self.buckets else None
        expand = stages.expand.SerializeToString()
        self._expand = self._build(expand, self._front_options, self._front_providers)
        self._copier: ort.InferenceSession | None = None
        """Copies a slot's audio to host memory (slots exist only with buckets)..."""
        if self.buckets:
            copier = providers_for(use_cuda, options.device_id, ())
            self._copier = self._build(copy_model().SerializeToString(), self._front_options, copier)
            self._host = host_buffers(options.device_id if use_cuda else None)
            """... into this device's buffers, lent from the copy until :meth:`release`."""
        self._waveform_dynamic: ort.InferenceSession | None = None
        first = self._first_front(self._front_key(1, len(warmup_ids(voice))))
        self._input_names = {i.name for i in first.get_inputs()}
        check_device(first, use_cuda, options.device_id)
        self.provider: str = first.get_providers()[0]
        captured = "front and waveform" if self.front_graphs else "waveform"
        layout = "NHWC" if NHWC in waveform_cuda else "NCHW"
        log.info(
            "voice %s loaded on %s (%s, staged%s)",
            voice.name,
            self.provider,
            self.precision,
            f", {captured} as CUDA graphs, waveform in {layout}" if self.graphs else "",
        )
        self._warm_up()

    @property
    def front_graphs(self) -> bool:
        """The fronts are replayed as CUDA graphs (false off the GPU, or once one could not be)."""
        return self.graphs and self._front_lane is not None

    def padded_shape(self, lengths: Sequence[int], length_scale: float) -> tuple[int, int]:
        """Rows and phoneme ids a batch of these item lengths is computed as."""
        key = self._front_key(len(lengths), max(lengths))
        return key if key else (len(lengths), max(lengths))

    def prepare(self, batch_sizes: Sequence[int], max_ids: int = ID_BUCKETS[-1]) -> int:
        """Build the front sessions and capture the waveform graphs for these batch sizes."""
        if not self.buckets:
            return 0
        done = 0
        scales = Scales(0.0, 1.0, 0.0)
        top = frame_bucket(int(max_ids * FRAMES_PER_ID_AT_MOST))
        for rows in sorted({row_bucket(size) for size in batch_sizes}):
            done += self._run_fillers(rows, max_ids, scales)
            if self.front_graphs:  # a front graph is captured at its second run
                done += self._run_fillers(rows, max_ids, scales)
            for frames in (size for size in FRAME_BUCKETS if size <= top):
                self._on_lane(partial(self._capture, rows, frames))
                done += 1
        return done

    def run(self, items: Sequence[EngineItem], scales: Scales) -> list[np.ndarray]:
        """Synthesize a batch; one float32 waveform per item, ``sum(durations) * hop`` long."""
        if not items:
            return []
        longest = max(len(item.phoneme_ids) for item in items)
        estimate = bucket_for(len(items), longest, scales.length_scale)
        if len(items) > 1 and estimate.rows * estimate.frames > self.options.max_batch_frames:
            return self._in_halves(items, scales)
        try:
            front_slot = self._captured_front(len(items), longest)
            if front_slot is not None:
                spoken = self._run_captured(front_slot, items, scales)
            else:
                spoken = self._run_plain(items, scales)
        except Exception as error:  # onnxruntime raises its own untyped errors
            if is_out_of_memory(error):
                raise EngineOutOfMemory(str(error)) from error
            raise
        if spoken is None:  # spoke longer than estimated: run it in halves
            self.frame_overflows += 1
            return self._in_halves(items, scales)
        audio, samples = spoken
        started = time.perf_counter()
        try:
            return cut_items(audio, samples, len(items))  # copies: the lent buffer goes back
        finally:
            self.release(audio)
            self._spent(cut=time.perf_counter() - started)

    def release(self, audio: np.ndarray) -> None:
        """Give back the host buffer a batch's audio came in (with buckets it was lent by
        :meth:`_to_host`; without, it is the session's own array, and nothing happens)."""
        if self.buckets:
            self._host.give(audio)

    def _run_plain(self, items: Sequence[EngineItem], scales: Scales) -> tuple[np.ndarray, np.ndarray] | None:
        """The front, expand and the copy to the host in this thread, the waveform replay on
        the graph lane. ``None`` if the batch needs more frames than a run may take."""
        with self._run_slots:
            started = time.perf_counter()
            front = self._run_front(items, scales)
            self._spent(front=time.perf_counter() - started)
        planned = self._planned(front.durations, len(items))
        if planned is None:
            return None
        plan, samples = planned
        return self._run_waveform(front, plan, scales.noise_scale), samples

    def _run_captured(
        self, front: FrontSlot, items: Sequence[EngineItem], scales: Scales
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Front and expand on the front lane, the waveform replay on the graph lane, the copy
        to the host in this thread."""
        rows, width = front.inputs["input"].shape()
        feeds = padded_feeds(items, rows, width, scales, "sid" in self._input_names)
        feeds[FRONT_NOISE] = np.random.default_rng().standard_normal(front.noise_shape, dtype=np.float32)
        assert self._front_lane is not None  # set for good once the first front slot was built
        work = partial(self._front_to_slot, front, feeds, scales.noise_scale, len(items))
        prepared = self._front_lane.submit(work).result()
        if prepared is None:
            return None
        slot, samples = prepared
        return self._replayed(slot), samples

    def stage_totals(self) -> dict[str, float]:
        with self._stage_lock:
            return dict(self.stage_seconds)

    def _spent(self, **seconds: float) -> None:
        with self._stage_lock:
            for stage, spent in seconds.items():
                self.stage_seconds[stage] += spent

    def end_profiling(self) -> list[str]:
        if not self.options.profile_prefix:
            return []
        sessions = [*self._fronts.values(), *(slot.session for slot in self._slots.values())]
        return [str(session.end_profiling()) for session in sessions]

    # front

    def _captured_front(self, rows: int, longest: int) -> FrontSlot | None:
        """The front slot of the batch's bucket (built on first use), or ``None`` where fronts
        are plain sessions: without ``capture_front`` or buckets, or when the first one could
        not be built (:meth:`_first_front`)."""
        if self._front_lane is None:
            return None
        key = self._front_key(rows, longest)
        assert key is not None
        return self._cached(self._front_slots, key, partial(self._new_front_slot, *key))

    def _first_front(self, key: tuple[int, int] | None) -> ort.InferenceSession:
        """The first front session, built at load while nothing else runs: a front slot's where
        fronts run as slots. If the front cannot be made one, say why and use plain fronts for
        the engine's life."""
        if self._front_lane is not None and key is not None:
            try:
                return self._cached(self._front_slots, key, partial(self._new_front_slot, *key)).session
            except Exception as error:  # UnsupportedGraph, or onnxruntime's own untyped errors
                if is_out_of_memory(error):
                    raise
                log.warning("voice %s: no CUDA graph for the front (%s): plain runs", self.voice.name, error)
                self._front_lane = None
        return self._front(key)

    def _new_front_slot(self, rows: int, ids: int) -> FrontSlot:
        dims = {"input": (rows, ids), "input_lengths": (rows,), "sid": (rows,)}
        front = capturable_front(with_fixed_inputs(self.stages.front, dims))
        graph = front.model.graph
        inputs = {}
        for value in graph.input:  # every one fixed: with_fixed_inputs, or the noise's own shape
            shape = tuple(dim.dim_value for dim in value.type.tensor_type.shape.dim)
            if 0 in shape:
                raise UnsupportedGraph(f"the front's input {value.name} has no fixed shape")
            inputs[value.name] = self._buffer(shape, value.type.tensor_type.elem_type)
        outputs = {
            value.name: self._buffer(front.output_shapes[value.name], value.type.tensor_type.elem_type)
            for value in graph.output
        }
        model = front.model.SerializeToString()
        session = self._build(model, self._front_options, self._front_graph_providers)
        return FrontSlot(session, _bound(session, inputs, outputs), inputs, outputs, front.noise_shape)

    def _front_to_slot(
        self, front: FrontSlot, feeds: dict[str, np.ndarray], noise_scale: float, items: int
    ) -> tuple[WaveformSlot, np.ndarray] | None:
        """On the front lane: replay the front, plan the frames, and expand into a waveform
        slot, which is returned held (:meth:`_replayed` lets it go), with each item's
        samples. ``None`` if the batch needs more frames than a run may take."""
        for name, value in feeds.items():
            if name in front.inputs:
                front.inputs[name].update_inplace(value)
        started = time.perf_counter()
        front.session.run_with_iobinding(front.binding)
        self._spent(front=time.perf_counter() - started)
        names = self.stages.names
        rows, width = front.inputs["input"].shape()
        durations = front.outputs[names.durations].numpy().reshape(rows, width).astype(np.int64)
        planned = self._planned(durations, items)
        if planned is None:
            return None
        plan, samples = planned
        extras = {name: front.outputs[name] for name in names.extras}
        result = FrontResult(front.outputs[names.mean_t], front.outputs[names.log_std_t], extras, durations)
        return self._expanded(result, plan, noise_scale), samples

    def _front_key(self, rows: int, longest: int) -> tuple[int, int] | None:
        """The batch's (rows, ids) bucket, or a built one with more rows: a build costs a
        second or so, more than the spare rows (``prepare`` builds the full batch size)."""
        if not self.buckets:
            return None
        bucket = bucket_for(rows, longest, 1.0)
        with self._lock:
            built = self._front_slots if self._front_lane is not None else self._fronts
            if (bucket.rows, bucket.ids) in built:
                return bucket.rows, bucket.ids
            larger = [key for key in built if key and key[1] == bucket.ids and key[0] > bucket.rows]
        return min(larger) if larger else (bucket.rows, bucket.ids)

    def _run_front(self, items: Sequence[EngineItem], scales: Scales) -> FrontResult:
        longest = max(len(item.phoneme_ids) for item in items)
        key = self._front_key(len(items), longest)
        rows, width = key if key else (len(items), longest)
        feeds = padded_feeds(items, rows, width, scales, "sid" in self._input_names)
        session = self._front(key)
        binding = session.io_binding()
        for name, value in feeds.items():
            if name in self._input_names:
                binding.bind_cpu_input(name, value)
        names = self.stages.names
        on_device = [names.mean_t, names.log_std_t, *names.extras]
        for name in on_device:
            binding.bind_output(name, self._device, self.options.device_id)
        binding.bind_output(names.durations, "cpu")
        session.run_with_iobinding(binding)
        values = binding.get_outputs()
        durations = values[-1].numpy().reshape(rows, width).astype(np.int64)
        extras = dict(zip(names.extras, values[2:-1], strict=True))
        return FrontResult(values[0], values[1], extras, durations)

    def _front(self, key: tuple[int, int] | None) -> ort.InferenceSession:
        def make() -> ort.InferenceSession:
            model = self.stages.front
            if key is not None:
                rows, ids = key
                dims = {"input": (rows, ids), "input_lengths": (rows,), "sid": (rows,)}
                model = with_fixed_inputs(model, dims)
            return self._build(model.SerializeToString(), self._front_options, self._front_providers)

        return self._cached(self._fronts, key, make)

    # waveform (replays on the graph lane when there is one)

    def _run_waveform(self, front: FrontResult, plan: Plan, noise_scale: float) -> np.ndarray:
        """A planned batch's audio on the host: expanded into its slot here, replayed on the
        graph lane, copied here (with buckets); without, both stages run here as plain sessions."""
        if not self.buckets:
            return self._run_dynamic(self._expand_binding(front, plan, noise_scale))
        return self._replayed(self._expanded(front, plan, noise_scale))

    def _expanded(self, front: FrontResult, plan: Plan, noise_scale: float) -> WaveformSlot:
        """Expand ``front`` into the input buffers of the slot of the plan's shape, which is
        returned held: its previous batch is out, and :meth:`_replayed` lets it go."""
        expand = self._expand_binding(front, plan, noise_scale)
        slot = self._held_slot(plan.rows, plan.frames)
        try:
            for name, buffer in slot.inputs.items():
                expand.bind_ortvalue_output(name, buffer)
            started = time.perf_counter()
            self._expand.run_with_iobinding(expand)
            self._spent(expand=time.perf_counter() - started)
        except BaseException:
            slot.held.release()
            raise
        return slot

    def _replayed(self, slot: WaveformSlot) -> np.ndarray:
        """Replay a held slot on the graph lane, copy its audio to the host in this thread,
        and let the slot go (and the fp32 one that ran instead, if fp16 had no plan)."""
        assert self._lane is not None  # slots exist only with buckets, and so does the lane
        ran = slot
        try:
            rows, frames = slot.inputs[self.stages.names.mask].shape()[::2]
            submitted = time.perf_counter()
            ran, began, ended = self._lane.submit(partial(self._timed_replay, slot, rows, frames)).result()
            started = time.perf_counter()
            self._spent(lane_wait=began - submitted, lane_return=started - ended)
            audio = self._to_host(ran.output, rows)
            self._spent(copy=time.perf_counter() - started)
            return audio
        finally:
            if ran is not slot:
                ran.held.release()
            slot.held.release()

    def _timed_replay(self, slot: WaveformSlot, rows: int, frames: int) -> tuple[WaveformSlot, float, float]:
        """:meth:`_replay` on the graph lane, with when it began and ended (``perf_counter``)."""
        began = time.perf_counter()
        ran = self._replay(slot, rows, frames)
        ended = time.perf_counter()
        self._spent(waveform=ended - began)
        return ran, began, ended

    def _held_slot(self, rows: int, frames: int) -> WaveformSlot:
        """The ``(rows, frames)`` slot, held: its previous batch may still be in it. A slot not
        built yet (or dropped from the cache) is built on the graph lane, where every waveform
        session is built and run (in NCHW they share one arena); none is built while one is held."""
        key = (rows, frames)
        started = time.perf_counter()
        while True:
            with self._lock:
                slot = self._slots.get(key)
                if slot is not None:
                    self._slots.move_to_end(key)
            if slot is None:
                slot = self._on_lane(partial(self._slot, rows, frames))
            slot.held.acquire()
            with self._lock:
                if self._slots.get(key) is slot:
                    self._spent(slot_wait=time.perf_counter() - started)
                    return slot
            slot.held.release()  # it went fp32, or was dropped, meanwhile

    def _to_host(self, audio: ort.OrtValue, rows: int) -> np.ndarray:
        """A slot's audio copied to host memory inside a session run, with the GIL free: through
        ``OrtValue.numpy`` the graph lane held it for the whole copy, and in a worker it then
        also waited for it after every run while 32 job threads took turns (docs/benchmarks.md,
        runs 24-27). The copy goes into a buffer lent by ``self._host`` (page-locked on CUDA:
        ``synthesis.host_buffers``); the caller gives it back."""
        assert self._copier is not None  # built with buckets, the only way to a slot
        host = self._host.take(audio.shape())
        try:
            binding = self._copier.io_binding()
            binding.bind_ortvalue_input(COPY_INPUT, audio)
            binding.bind_output(COPY_OUTPUT, "cpu", 0, np.float32, list(host.shape), host.ctypes.data)
            self._copier.run_with_iobinding(binding)
        except BaseException:
            self._host.give(host)
            raise
        return host.reshape(rows, -1)

    def _on_lane(self, work: Callable[[], T]) -> T:
        if self._lane is None:
            return work()
        return self._lane.submit(work).result()

    def _planned(self, durations: np.ndarray, items: int) -> tuple[Plan, np.ndarray] | None:
        """The frame plan of a batch and each item's samples; ``None`` if the batch needs more
        frames than one run may take (it then runs in halves)."""
        started = time.perf_counter()
        totals = durations.sum(axis=1)
        plan = self._frame_plan(durations, totals)
        self._spent(plan=time.perf_counter() - started)
        if items > 1 and plan.rows * plan.frames > self.options.max_batch_frames:
            return None
        return plan, totals[:items] * self.voice.hop_length

    def _frame_plan(self, durations: np.ndarray, totals: np.ndarray) -> Plan:
        """The batch's :class:`Plan` for ``durations`` whose row sums are ``totals``, padded to
        its frame bucket (with buckets)."""
        rows, width = durations.shape
        frames_needed = max(int(totals.max()), 1)
        frames = frame_bucket(frames_needed) if self.buckets else frames_needed
        self.last_bucket = Bucket(rows, width, frames)
        return Plan(durations, frames)

    def _expand_binding(self, front: FrontResult, plan: Plan, noise_scale: float) -> Any:
        """The expand stage's binding with its inputs bound (its outputs are the caller's)."""
        expand = self._expand.io_binding()
        expand.bind_ortvalue_input(EXPAND_MEAN, front.mean_t)
        expand.bind_ortvalue_input(EXPAND_LOG_STD, front.log_std_t)
        expand.bind_cpu_input(EXPAND_DURATIONS, plan.durations)
        expand.bind_cpu_input(EXPAND_FRAMES, np.array(plan.frames, dtype=np.int64))
        expand.bind_cpu_input(EXPAND_NOISE_SCALE, np.array(noise_scale, dtype=np.float32))
        for name, value in front.extras.items():
            expand.bind_ortvalue_input(extra_input(name), value)
        return expand

    def _run_dynamic(self, expand: Any) -> np.ndarray:
        names = self.stages.names
        outputs = [names.prior, names.mask, *names.extras]
        for name in outputs:
            expand.bind_output(name, self._device, self.options.device_id)
        self._expand.run_with_iobinding(expand)
        if self._waveform_dynamic is None:
            model = self._waveform or self._waveform_fp32
            built = self._build(model.SerializeToString(), self._front_options, self._waveform_providers())
            self._waveform_dynamic = built
        binding = self._waveform_dynamic.io_binding()
        for name, value in zip(outputs, expand.get_outputs(), strict=True):
            binding.bind_ortvalue_input(name, value)
        binding.bind_output(AUDIO_OUTPUT, "cpu")
        self._waveform_dynamic.run_with_iobinding(binding)
        audio = binding.get_outputs()[0].numpy()
        return np.asarray(audio).reshape(audio.shape[0], -1)

    def _replay(self, slot: WaveformSlot, rows: int, frames: int) -> WaveformSlot:
        """Run the held slot's session; returns the slot that ran, held: ``slot``, or an fp32
        one made here if fp16 has no plan (the caller lets both go).

        With graphs, the first run is not captured: cuDNN builds its plans then (and says if it
        has none in fp16) outside any capture. The second run captures, later ones replay.
        """
        try:
            if self.graphs and slot.runs == 0:
                slot.session.run_with_iobinding(slot.binding, self._skip_capture)
            else:
                slot.session.run_with_iobinding(slot.binding)
            slot.runs += 1
            return slot
        except Exception as error:  # onnxruntime raises its own untyped errors
            if slot.fp32 or slot.runs or not is_missing_fp16_plan(error):
                raise
            first_line = str(error).splitlines()[0][:200]
        log.warning("no fp16 plan for %d x %d frames, it runs fp32: %s", rows, frames, first_line)
        self.precision_fallbacks += 1
        fp32 = self._new_slot(rows, frames, fp32=True)
        for name, buffer in slot.inputs.items():  # expand already wrote this batch's input there
            fp32.inputs[name].update_inplace(buffer.numpy())
        fp32.held.acquire()  # before others can see it: its output is this batch's until copied
        try:
            with self._lock:
                self._slots[(rows, frames)] = fp32
            return self._replay(fp32, rows, frames)
        except BaseException:
            fp32.held.release()
            raise

    def _capture(self, rows: int, frames: int) -> None:
        """Capture the ``(rows, frames)`` graph ahead of use (on the lane)."""
        slot = self._slot(rows, frames)
        started = time.perf_counter()
        while slot.runs < 2:
            if not slot.held.acquire(blocking=False):
                break  # a batch holds it (expanding, queued or copying): a later replay captures
            held = slot
            try:
                slot = self._replay(held, rows, frames)
            finally:
                if slot is not held:  # the fp32 slot that ran instead, held by _replay
                    slot.held.release()
                held.held.release()
        self.capture_seconds += time.perf_counter() - started

    def _slot(self, rows: int, frames: int) -> WaveformSlot:
        return self._cached(self._slots, (rows, frames), lambda: self._new_slot(rows, frames, fp32=False))

    def _new_slot(self, rows: int, frames: int, fp32: bool) -> WaveformSlot:
        names = self.stages.names
        model = self._waveform_fp32 if fp32 or self._waveform is None else self._waveform
        dims: dict[str, tuple[int, ...]] = {
            names.prior: (rows, names.channels, frames),
            names.mask: (rows, 1, frames),
        }
        types = dict.fromkeys(dims, onnx.TensorProto.FLOAT)
        for value in model.graph.input:
            if value.name in names.extras:  # split_voice checked: rows first, then fixed sizes
                tensor = value.type.tensor_type
                dims[value.name] = (rows, *(dim.dim_value for dim in tensor.shape.dim[1:]))
                types[value.name] = tensor.elem_type
        fixed = with_fixed_inputs(model, dims).SerializeToString()
        try:
            session = self._build(fixed, self._graph_options, self._waveform_providers(fp32))
        except Exception as error:  # onnxruntime raises its own untyped errors
            if not self.graphs or is_out_of_memory(error):
                raise
            log.warning("voice %s: no CUDA graph for the waveform (%s): plain runs", self.voice.name, error)
            self.graphs = False  # it was True, so this is CUDA; the providers follow
            session = self._build(fixed, self._graph_options, self._waveform_providers(fp32))
        inputs = {name: self._buffer(shape, types[name]) for name, shape in dims.items()}
        rank = len(model.graph.output[0].type.tensor_type.shape.dim)  # Piper's is (rows, 1, 1, samples)
        audio_shape = (rows, *[1] * (rank - 2), frames * self.voice.hop_length)
        output = self._buffer(audio_shape, onnx.TensorProto.FLOAT)
        return WaveformSlot(session, _bound(session, inputs, {AUDIO_OUTPUT: output}), inputs, output, fp32)

    def _waveform_providers(self, fp32: bool = False) -> list[Any]:
        options = waveform_cuda_options(self.options, self.graphs, self._arena, fp32)
        return providers_for(self._device == "cuda", self.options.device_id, options)

    def _buffer(self, shape: Sequence[int], elem_type: int) -> ort.OrtValue:
        """A buffer on the engine's device that a slot's session reads or writes at every run."""
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
        return ort.OrtValue.ortvalue_from_shape_and_type(
            list(shape), dtype, self._device, self.options.device_id
        )

    # sessions

    def _cached(self, cache: OrderedDict[Any, T], key: Any, make: Callable[[], T]) -> T:
        """The cached value for ``key``, made on first use; a build holds only its key's lock."""
        with self._lock:
            if key in cache:
                cache.move_to_end(key)
                return cache[key]
            building = self._building.setdefault((id(cache), key), threading.Lock())
        with building:
            with self._lock:
                if key in cache:
                    return cache[key]
            value = make()
            with self._lock:
                cache[key] = value
                self._building.pop((id(cache), key), None)
                while len(cache) > max(self.options.max_sessions, 1):
                    evicted, _ = cache.popitem(last=False)
                    log.info("voice %s: dropped the stage session of %s", self.voice.name, evicted)
        return value

    def _build(self, model: bytes, options: ort.SessionOptions, providers: list[Any]) -> ort.InferenceSession:
        started = time.perf_counter()
        session = build_session(model, options, providers)
        with self._lock:
            self.sessions_built += 1
            self.session_seconds += time.perf_counter() - started
        return session


def _bound(
    session: ort.InferenceSession, inputs: dict[str, ort.OrtValue], outputs: dict[str, ort.OrtValue]
) -> Any:
    """``session``'s binding to these fixed buffers, by name."""
    binding = session.io_binding()
    for name, buffer in inputs.items():
        binding.bind_ortvalue_input(name, buffer)
    for name, buffer in outputs.items():
        binding.bind_ortvalue_output(name, buffer)
    return binding
