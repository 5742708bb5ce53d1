"""Engine v2: a voice run as three stages, the waveform stage replayed as a CUDA graph.

``synthesis.stages`` cuts the voice: front (phoneme ids to the prior and durations), expand (the
prior repeated by the durations, plus noise) and waveform (flow and decoder). A batch goes:

- the front (``synthesis.front_stage``), fp32, in the caller's thread;
- the plan: the host reads the durations and picks the batch's frame bucket from the frames it
  really needs; nothing the size of the frames is built on the host;
- expand (a few small kernels that lay out each frame's phoneme and mask from the durations, a
  gather, and the noise) writes ``z_p`` and the mask straight into the fixed input buffers of the
  ``(rows, frames)`` waveform slot (``synthesis.waveform_graphs``), which is replayed as a CUDA
  graph on the device's graph lane, and its audio copied to page-locked host memory;
- the cut: each item's samples copied out of the batch's audio.

Frames are chosen from the real durations, so nothing overflows a bucket and no frames are
reserved per phoneme id in advance. Exact lengths hold: each item gets ``sum(durations) * hop``
samples, the durations being those of the fp32 front. On CUDA every convolution's bias is added
by an ``Add`` of its own (``synthesis.conv_bias``). Without buckets (a CPU, or tests) the same
stages run with dynamic shapes and no graphs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from contextlib import nullcontext
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from synthesis.background import Background
from synthesis.bucket_preparation import prepare_buckets
from synthesis.buckets import ID_BUCKETS, Bucket, bucket_for
from synthesis.conv_bias import with_biases_apart
from synthesis.devices import device
from synthesis.engine_base import EngineBasics, EngineOptions, is_out_of_memory
from synthesis.frame_plan import Plan, frame_bucket
from synthesis.front_stage import FrontKey, FrontResult, FrontStage
from synthesis.items import EngineItem, Scales, Spoken, cut_items, spoken_items, warmup_ids
from synthesis.precision import convert_to_fp16
from synthesis.relative_positions import with_gathered_relative_positions
from synthesis.session_cache import SessionBuilds, SessionCache
from synthesis.sessions import (
    FIXED_SHAPE_ARENA,
    NHWC,
    CudaOptions,
    Precision,
    check_device,
    providers_for,
    session_options,
    wants_cuda,
)
from synthesis.stage_options import stage_cuda_options, waveform_cuda_options
from synthesis.stage_timer import STAGES, StageTimer
from synthesis.stages import (
    AUDIO_OUTPUT,
    EXPAND_DURATIONS,
    EXPAND_FRAMES,
    EXPAND_LOG_STD,
    EXPAND_MEAN,
    EXPAND_NOISE_SCALE,
    VoiceStages,
    copy_model,
    extra_input,
    split_voice,
)
from synthesis.waveform_graphs import WaveformGraphs, WaveformModels
from ttsfarm.core.errors import EngineOutOfMemory
from ttsfarm.core.voices import Voice

__all__ = ["STAGES", "FrontResult", "StagedEngine"]

log = logging.getLogger(__name__)


class StagedEngine(EngineBasics):
    """Same interface as :class:`synthesis.engine.Engine`; see the module docstring. Its stages
    are public for benchmarks: :attr:`front`, :meth:`plan`, :meth:`waveform_audio` and, with
    buckets, :attr:`waveform` (the slots)."""

    def __init__(self, voice: Voice, options: EngineOptions | None = None) -> None:
        self.voice = voice
        self.options = options = options or EngineOptions()
        use_cuda = wants_cuda(options.provider)
        self.precision: Precision = "fp16" if use_cuda and options.precision != "fp32" else "fp32"
        self.buckets = use_cuda if options.shape_buckets is None else options.shape_buckets
        self.builds = SessionBuilds()
        self.background = Background(f"ttsfarm-prepare-{voice.name}")
        self.timer = StageTimer()
        self.frame_overflows = 0
        """Batches that needed more frames than ``options.max_batch_frames`` allows, and ran in halves."""
        self.last_bucket: Bucket | None = None
        self.warmup_seconds = 0.0
        self.stages: VoiceStages = self._stages(voice, use_cuda)
        self._device = "cuda" if use_cuda else "cpu"
        graphs = use_cuda and self.buckets
        front_cuda, waveform_cuda = stage_cuda_options(options, graphs)
        arena: CudaOptions = (FIXED_SHAPE_ARENA,) if self.buckets else ()
        """Every session sees one shape with buckets: its own arena needs no room to grow."""
        plain_options = session_options(options.cpu_threads, False, options.profile_prefix)
        front_providers = providers_for(use_cuda, options.device_id, (*arena, *front_cuda))
        fronts: SessionCache[FrontKey, ort.InferenceSession] = SessionCache(
            options.max_sessions, f"voice {voice.name}'s front session"
        )
        self.front = FrontStage(
            self.stages.front,
            self.stages.names,
            buckets=self.buckets,
            sessions=fronts,
            builds=self.builds,
            session_options=plain_options,
            providers=front_providers,
            device=self._device,
            device_id=options.device_id,
        )
        self._plain_options = plain_options
        self._run_slots = threading.BoundedSemaphore(max(options.concurrent_runs, 1))
        """Fronts run at once (``options.concurrent_runs``)."""
        half = self.precision == "fp16"
        fp16 = convert_to_fp16(self.stages.waveform, whole_graph=True) if half else None
        self._models = WaveformModels(fp16, self.stages.waveform)
        self.waveform: WaveformGraphs | None = None
        """The waveform slots, with buckets; without, :meth:`_run_dynamic` runs the stage."""
        self._waveform_dynamic: ort.InferenceSession | None = None
        expand = self.stages.expand.SerializeToString()
        with device(options.device_id if use_cuda else None).gate.shared():  # builds: no capture meanwhile
            self._expand = self.builds.build(expand, plain_options, front_providers)
            if self.buckets:
                self.waveform = self._waveform_graphs(voice, graphs, arena, NHWC in waveform_cuda)
            first = self.front.session(self.front.key(1, len(warmup_ids(voice))))
        check_device(first, use_cuda, options.device_id)
        self.provider: str = first.get_providers()[0]
        layout = "NHWC" if NHWC in waveform_cuda else "NCHW"
        log.info(
            "voice %s loaded on %s (%s, staged%s)",
            voice.name,
            self.provider,
            self.precision,
            f", waveform as CUDA graphs in {layout}" if self.graphs else "",
        )
        self._warm_up()

    def _stages(self, voice: Voice, use_cuda: bool) -> VoiceStages:
        model = onnx.load(str(voice.model_path))
        if self.options.gathered_positions:
            model = with_gathered_relative_positions(model)[0]
        stages = split_voice(model)
        if not use_cuda:
            return stages
        front, waveform = (with_biases_apart(stage)[0] for stage in (stages.front, stages.waveform))
        return replace(stages, front=front, waveform=waveform)

    def _waveform_graphs(self, voice: Voice, graphs: bool, arena: CudaOptions, nhwc: bool) -> WaveformGraphs:
        options = self.options
        on_device = device(options.device_id if self._device == "cuda" else None)
        shared = graphs and not nhwc and on_device.share_arena("graphs")
        if graphs and not shared and not nhwc:
            log.warning("the GPU arena is taken by bucket sessions: each waveform graph keeps its own")
        copier_providers = providers_for(self._device == "cuda", options.device_id, ())
        copier = self.builds.build(copy_model().SerializeToString(), self._plain_options, copier_providers)
        return WaveformGraphs(
            self._models,
            self.stages.names,
            hop_length=voice.hop_length,
            voice_name=voice.name,
            options=options,
            graphs=graphs,
            device=on_device,
            arena=arena,
            session_options=session_options(options.cpu_threads, shared, options.profile_prefix, True),
            copier=copier,
            builds=self.builds,
            timer=self.timer,
            shared_arena=shared,
            ask_capture=self._ask_capture,
        )

    @property
    def graphs(self) -> bool:
        """Waveform slots are replayed as CUDA graphs (false off CUDA, or once one could not be)."""
        return self.waveform is not None and self.waveform.graphs

    @property
    def capture_seconds(self) -> float:
        return self.waveform.capture_seconds if self.waveform else 0.0

    @property
    def precision_fallbacks(self) -> int:
        return self.waveform.precision_fallbacks if self.waveform else 0

    def padded_shape(self, lengths: Sequence[int], length_scale: float) -> tuple[int, int]:
        """Rows and phoneme ids a batch of these item lengths is computed as."""
        key = self.front.key(len(lengths), max(lengths))
        return key if key else (len(lengths), max(lengths))

    def prepare(self, batch_sizes: Sequence[int], max_ids: int = ID_BUCKETS[-1]) -> int:
        """Build the front sessions and capture the waveform graphs for these batch sizes, in
        this thread; returns the runs it took (``synthesis.bucket_preparation``). Batches may run
        meanwhile (:meth:`~synthesis.engine_base.EngineBasics.prepare_later`)."""
        return prepare_buckets(self, batch_sizes, max_ids)

    def prepare_later(
        self, batch_sizes: Sequence[int], max_ids: int = ID_BUCKETS[-1], after: threading.Event | None = None
    ) -> Future[int | None]:
        """:meth:`prepare` in the background (see the base class); batches meanwhile take the
        buckets of the rows being prepared (``FrontStage.key``)."""
        self.front.plan_rows(batch_sizes)
        return super().prepare_later(batch_sizes, max_ids, after)

    def _ask_capture(self, rows: int, frames: int) -> None:
        """A batch ran the ``(rows, frames)`` slot before its graph was captured: capture it in
        the background (after the preparation, if that is still going)."""
        waveform = self.waveform
        if waveform is not None:
            work = partial(waveform.capture, rows, frames)
            self.background.ask((rows, frames), work, f"the capture of {rows} x {frames} frames")

    def speak(self, items: Sequence[EngineItem], scales: Scales) -> list[Spoken]:
        """Synthesize a batch: each item's audio, ``sum(durations) * hop`` long, and its durations."""
        if not items:
            return []
        longest = max(len(item.phoneme_ids) for item in items)
        estimate = bucket_for(len(items), longest, scales.length_scale)
        if len(items) > 1 and estimate.rows * estimate.frames > self.options.max_batch_frames:
            return self._in_halves(items, scales)
        try:
            spoken = self._spoken(items, scales)
        except Exception as error:  # onnxruntime raises its own untyped errors
            if is_out_of_memory(error):
                raise EngineOutOfMemory(str(error)) from error
            raise
        if spoken is None:  # spoke longer than estimated: run it in halves
            self.frame_overflows += 1
            return self._in_halves(items, scales)
        audio, samples, durations = spoken
        started = time.perf_counter()
        try:
            cut = cut_items(audio, samples, len(items))  # copies: the lent buffer goes back
            return spoken_items(cut, durations, [len(item.phoneme_ids) for item in items])
        finally:
            self.release(audio)
            self.timer.spent(cut=time.perf_counter() - started)

    def _spoken(
        self, items: Sequence[EngineItem], scales: Scales
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The batch's audio on the host, each item's samples and the durations; ``None`` if the
        batch needs more frames than a run may take. With buckets the batch holds the device's
        gate (``synthesis.run_gate``) from its front to its copy: no capture runs meanwhile."""
        with self.waveform.device.gate.shared() if self.waveform else nullcontext():
            with self._run_slots:
                started = time.perf_counter()
                front = self.front.run(items, scales)
                self.timer.spent(front=time.perf_counter() - started)
            planned = self.plan(front, len(items))
            if planned is None:
                return None
            plan, samples = planned
            return self.waveform_audio(front, plan, scales.noise_scale), samples, front.durations

    def plan(self, front: FrontResult, items: int) -> tuple[Plan, np.ndarray] | None:
        """The frame plan of a batch and each item's samples; ``None`` if the batch needs more
        frames than one run may take (it then runs in halves)."""
        started = time.perf_counter()
        durations = front.durations
        totals = durations.sum(axis=1)
        frames_needed = max(int(totals.max()), 1)
        frames = frame_bucket(frames_needed) if self.buckets else frames_needed
        self.last_bucket = Bucket(durations.shape[0], durations.shape[1], frames)
        plan = Plan(durations, frames)
        self.timer.spent(plan=time.perf_counter() - started)
        if items > 1 and plan.rows * plan.frames > self.options.max_batch_frames:
            return None
        return plan, totals[:items] * self.voice.hop_length

    def waveform_audio(self, front: FrontResult, plan: Plan, noise_scale: float) -> np.ndarray:
        """A planned batch's audio on the host, ``(rows, samples)``; give it back with
        :meth:`release`. With buckets: expanded into its slot here, replayed on the graph lane,
        copied here; without, both stages run here."""
        binding = self.expand_binding(front, plan, noise_scale)
        if self.waveform is None:
            return self._run_dynamic(binding)
        slot = self.waveform.expanded(self._expand, binding, plan.rows, plan.frames)
        return self.waveform.replayed(slot)

    def release(self, audio: np.ndarray) -> None:
        """Give back the host buffer a batch's audio came in (with buckets it was lent by the
        slots; without, it is the session's own array, and nothing happens)."""
        if self.waveform is not None:
            self.waveform.release(audio)

    def expand_binding(self, front: FrontResult, plan: Plan, noise_scale: float) -> Any:
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

    def expand(self, binding: Any) -> list[ort.OrtValue]:
        """Run expand with its outputs on the device: the prior, the mask and the extras."""
        names = self.stages.names
        for name in (names.prior, names.mask, *names.extras):
            binding.bind_output(name, self._device, self.options.device_id)
        self._expand.run_with_iobinding(binding)
        return list(binding.get_outputs())

    def _run_dynamic(self, binding: Any) -> np.ndarray:
        names = self.stages.names
        expanded = self.expand(binding)
        if self._waveform_dynamic is None:
            model = (self._models.fp16 or self._models.fp32).SerializeToString()
            layout = waveform_cuda_options(self.options, False, (), fp32=False)
            providers = providers_for(self._device == "cuda", self.options.device_id, layout)
            self._waveform_dynamic = self.builds.build(model, self._plain_options, providers)
        waveform = self._waveform_dynamic.io_binding()
        for name, value in zip((names.prior, names.mask, *names.extras), expanded, strict=True):
            waveform.bind_ortvalue_input(name, value)
        waveform.bind_output(AUDIO_OUTPUT, "cpu")
        self._waveform_dynamic.run_with_iobinding(waveform)
        audio = waveform.get_outputs()[0].numpy()
        return np.asarray(audio).reshape(audio.shape[0], -1)

    def stage_totals(self) -> dict[str, float]:
        return self.timer.totals()

    def end_profiling(self) -> list[str]:
        if not self.options.profile_prefix:
            return []
        slots = self.waveform.sessions() if self.waveform else []
        return [str(session.end_profiling()) for session in [*self.front.sessions.values(), *slots]]
