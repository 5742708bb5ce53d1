"""The staged engine's waveform stage with shape buckets: slots replayed as CUDA graphs.

A *slot* is one ``(rows, frames)`` shape of the waveform stage (flow and decoder, fp16 on CUDA):
a session with fixed input and output buffers. Expand writes a batch straight into the inputs
of its slot, once the slot's previous batch is out: a slot is held from expand until its audio
has been copied to the host. On CUDA the slot's first run builds cuDNN's plans, and its graph is
captured by :meth:`WaveformGraphs.capture` alone, with no batch on the device
(``synthesis.run_gate``); until then the slot runs plainly, and a batch that ran it asks for its
capture. Replays go one at a time on the device's graph lane (``synthesis.devices``), which does
nothing else but build the waveform sessions: expand before a replay and the copy of the audio
after it run in the caller's thread, so the lane takes the interpreter lock twice per batch, not
once per session run.

Where cuDNN has no fp16 plan for a shape, that slot runs fp32 from then on. Off CUDA (tests) the
slots are plain sessions with the same buffers, run on the same lane.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, TypeVar

import numpy as np
import onnx
import onnxruntime as ort

from synthesis.devices import Device
from synthesis.engine_base import EngineOptions, is_missing_fp16_plan, is_out_of_memory
from synthesis.session_cache import SessionBuilds, SessionCache
from synthesis.sessions import CudaOptions, providers_for
from synthesis.stage_options import waveform_cuda_options
from synthesis.stage_timer import StageTimer
from synthesis.stages import AUDIO_OUTPUT, COPY_INPUT, COPY_OUTPUT, StageNames, with_fixed_inputs

log = logging.getLogger(__name__)

T = TypeVar("T")

SKIP_CAPTURE: Final = (("gpu_graph_id", "-1"),)
"""Run options for a waveform session's runs before its capture: not captured, so that cuDNN
builds its plans (and says when it has none in fp16) outside the capture, and so that a batch
never captures while others run."""


@dataclass
class WaveformSlot:
    """One ``(rows, frames)`` shape of the waveform stage: a session and its fixed buffers."""

    session: ort.InferenceSession
    binding: Any
    inputs: dict[str, ort.OrtValue]
    output: ort.OrtValue
    fp32: bool
    graph: bool
    """Built to be captured as a CUDA graph (even if the engine's later slots are not)."""
    runs: int = 0
    captured: bool = False
    """Its graph is captured (off CUDA graphs: a capture's run has been made): runs replay it.
    Until then it runs plainly."""
    held: threading.Lock = field(default_factory=threading.Lock)
    """Held from the moment expand writes a batch into :attr:`inputs` until its audio has been
    copied out of :attr:`output` to the host."""


@dataclass(frozen=True)
class WaveformModels:
    """The waveform stage's graphs: fp16 (``None`` where the engine runs fp32) and fp32."""

    fp16: onnx.ModelProto | None
    fp32: onnx.ModelProto


class WaveformGraphs:
    """The slots of one voice, their replays on the graph lane, and the copies to the host."""

    def __init__(
        self,
        models: WaveformModels,
        names: StageNames,
        *,
        hop_length: int,
        voice_name: str,
        options: EngineOptions,
        graphs: bool,
        device: Device,
        arena: CudaOptions,
        session_options: ort.SessionOptions,
        copier: ort.InferenceSession,
        builds: SessionBuilds,
        timer: StageTimer,
        shared_arena: bool = False,
        ask_capture: Callable[[int, int], None] | None = None,
    ) -> None:
        self.models = models
        self.names = names
        self.hop_length = hop_length
        self.voice_name = voice_name
        self.options = options
        self.graphs = graphs
        """Slots are captured as CUDA graphs (false off CUDA, or once one could not be)."""
        self.device = device
        self.slots: SessionCache[tuple[int, int], WaveformSlot] = SessionCache(
            options.max_sessions, f"voice {voice_name}'s waveform slot"
        )
        self.precision_fallbacks = 0
        self.capture_seconds = 0.0
        self._arena = arena
        self._session_options = session_options
        self._copier = copier
        self._builds = builds
        self._timer = timer
        self._shared_arena = shared_arena
        """The slots share one arena (NCHW): each is built on the graph lane, between replays."""
        self._ask_capture = ask_capture
        """Called with a slot's shape when a batch ran it before its capture."""
        self._lane = device.graph_lane()
        self._on_cuda = device.device_id is not None
        self._skip_capture = ort.RunOptions()
        for key, value in SKIP_CAPTURE:
            self._skip_capture.add_run_config_entry(key, value)

    def expanded(self, expand: ort.InferenceSession, binding: Any, rows: int, frames: int) -> WaveformSlot:
        """Run ``expand`` (inputs bound in ``binding``) into the inputs of the ``(rows, frames)``
        slot, which is returned held: its previous batch is out, and :meth:`replayed` lets it go."""
        slot = self._held_slot(rows, frames)
        try:
            for name, buffer in slot.inputs.items():
                binding.bind_ortvalue_output(name, buffer)
            started = time.perf_counter()
            expand.run_with_iobinding(binding)
            self._timer.spent(expand=time.perf_counter() - started)
        except BaseException:
            slot.held.release()
            raise
        return slot

    def replayed(self, slot: WaveformSlot) -> np.ndarray:
        """Replay a held slot on the graph lane, copy its audio to the host in this thread (into
        a buffer lent until :meth:`release`), and let the slot go (and the fp32 one that ran
        instead, if fp16 had no plan)."""
        ran = slot
        try:
            rows, frames = self.shape_of(slot)
            submitted = time.perf_counter()
            ran, began, ended = self._lane.submit(partial(self._timed_replay, slot, rows, frames)).result()
            started = time.perf_counter()
            self._timer.spent(lane_wait=began - submitted, lane_return=started - ended)
            audio = self._to_host(ran.output, rows)
            self._timer.spent(copy=time.perf_counter() - started)
            if ran.graph and not ran.captured and self._ask_capture is not None:
                self._ask_capture(rows, frames)
            return audio
        finally:
            if ran is not slot:
                ran.held.release()
            slot.held.release()

    def release(self, audio: np.ndarray) -> None:
        """Give back the host buffer that :meth:`replayed` lent (never from inside a batch):
        unlocking one the pool does not keep is no call to make beside a capture."""
        with self.device.gate.shared():
            self.device.host.give(audio)

    def capture(self, rows: int, frames: int) -> None:
        """Build and capture the ``(rows, frames)`` slot (on the graph lane), once no batch is on
        the device; batches wait meanwhile. Never from inside a batch."""
        if self.captured(rows, frames):
            return
        with self.device.gate.alone():
            self._lane.submit(self._capture, rows, frames).result()

    def captured(self, rows: int, frames: int) -> bool:
        """The ``(rows, frames)`` slot is built and its graph captured (see ``WaveformSlot``)."""
        slot = self.slots.find((rows, frames))
        return slot is not None and slot.captured

    def build(self, rows: int, frames: int) -> None:
        """Build the ``(rows, frames)`` slot in this thread, so that builds may go side by side
        (``StagedEngine.prepare``, which holds the device's gate shared: no capture runs beside
        it). Slots that share one arena (NCHW) are built on the graph lane instead, between
        replays, as a batch builds one."""
        if self._shared_arena:
            self.slot(rows, frames)
        else:
            self._slot(rows, frames)

    def replay(self, rows: int, frames: int) -> None:
        """Replay the ``(rows, frames)`` slot once on the graph lane, with whatever its inputs
        hold: the replay's own time, for benchmarks (:meth:`capture` it first)."""
        slot = self.slot(rows, frames)
        with slot.held:
            self._lane.submit(self._replay, slot, rows, frames).result()

    def slot(self, rows: int, frames: int) -> WaveformSlot:
        """The ``(rows, frames)`` slot, built on the graph lane on first use (not held)."""
        return self._on_lane(partial(self._slot, rows, frames))

    def shape_of(self, slot: WaveformSlot) -> tuple[int, int]:
        rows, _, frames = slot.inputs[self.names.mask].shape()
        return rows, frames

    def sessions(self) -> list[ort.InferenceSession]:
        return [slot.session for slot in self.slots.values()]

    def _held_slot(self, rows: int, frames: int) -> WaveformSlot:
        """The ``(rows, frames)`` slot, held: its previous batch may still be in it. A slot not
        built yet (or dropped) is built on the graph lane, where every waveform session is built
        and run (in NCHW they share one arena)."""
        key = (rows, frames)
        started = time.perf_counter()
        while True:
            slot = self.slots.find(key) or self.slot(rows, frames)
            slot.held.acquire()
            if self.slots.find(key) is slot:
                self._timer.spent(slot_wait=time.perf_counter() - started)
                return slot
            slot.held.release()  # it went fp32, or was dropped, meanwhile

    def _timed_replay(self, slot: WaveformSlot, rows: int, frames: int) -> tuple[WaveformSlot, float, float]:
        """:meth:`_replay` on the graph lane, with when it began and ended (``perf_counter``)."""
        began = time.perf_counter()
        ran = self._replay(slot, rows, frames)
        ended = time.perf_counter()
        self._timer.spent(waveform=ended - began)
        return ran, began, ended

    def _replay(self, slot: WaveformSlot, rows: int, frames: int, capture: bool = False) -> WaveformSlot:
        """Run the held slot's session; returns the slot that ran, held: ``slot``, or an fp32
        one made here if fp16 has no plan (the caller lets both go).

        With graphs, runs before the capture are plain: cuDNN builds its plans in the first (and
        says if it has none in fp16) outside any capture. A run with ``capture`` (only from
        :meth:`_capture`, after a first run) captures the graph; later runs replay it.
        """
        try:
            if slot.graph and not (slot.captured or capture):
                slot.session.run_with_iobinding(slot.binding, self._skip_capture)
            else:
                slot.session.run_with_iobinding(slot.binding)
            slot.runs += 1
            slot.captured = slot.captured or capture
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
            self.slots.put((rows, frames), fp32)
            return self._replay(fp32, rows, frames)
        except BaseException:
            fp32.held.release()
            raise

    def _capture(self, rows: int, frames: int) -> None:
        slot = self._slot(rows, frames)
        started = time.perf_counter()
        while not slot.captured:  # a first run for cuDNN's plans, if it had none, then the capture
            if not slot.held.acquire(blocking=False):
                break  # held outside any batch (a benchmark's replay): it stays uncaptured
            held = slot
            try:
                slot = self._replay(held, rows, frames, capture=held.runs > 0)
            finally:
                if slot is not held:  # the fp32 slot that ran instead, held by _replay
                    slot.held.release()
                held.held.release()
        self.capture_seconds += time.perf_counter() - started

    def _to_host(self, audio: ort.OrtValue, rows: int) -> np.ndarray:
        """A slot's audio copied to host memory inside a session run, with the GIL free: through
        ``OrtValue.numpy`` the graph lane held it for the whole copy, and in a worker it then
        also waited for it after every run while 32 job threads took turns
        (docs/decisions/0019-copy-inside-a-session-run.md). The copy goes into a buffer lent by the
        device's pool (page-locked on
        CUDA: ``synthesis.host_buffers``); :meth:`release` gives it back."""
        host = self.device.host.take(audio.shape())
        try:
            binding = self._copier.io_binding()
            binding.bind_ortvalue_input(COPY_INPUT, audio)
            binding.bind_output(COPY_OUTPUT, "cpu", 0, np.float32, list(host.shape), host.ctypes.data)
            self._copier.run_with_iobinding(binding)
        except BaseException:
            self.device.host.give(host)
            raise
        return host.reshape(rows, -1)

    def _on_lane(self, work: Callable[[], T]) -> T:
        return self._lane.submit(work).result()

    def _slot(self, rows: int, frames: int) -> WaveformSlot:
        return self.slots.get((rows, frames), lambda: self._new_slot(rows, frames, fp32=False))

    def _new_slot(self, rows: int, frames: int, fp32: bool) -> WaveformSlot:
        names = self.names
        model = self.models.fp32 if fp32 or self.models.fp16 is None else self.models.fp16
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
            session = self._builds.build(fixed, self._session_options, self.providers(fp32))
        except Exception as error:  # onnxruntime raises its own untyped errors
            if not self.graphs or is_out_of_memory(error):
                raise
            log.warning("voice %s: no CUDA graph for the waveform (%s): plain runs", self.voice_name, error)
            self.graphs = False  # it was True, so this is CUDA; the providers follow
            session = self._builds.build(fixed, self._session_options, self.providers(fp32))
        inputs = {name: self._buffer(shape, types[name]) for name, shape in dims.items()}
        rank = len(model.graph.output[0].type.tensor_type.shape.dim)  # Piper's is (rows, 1, 1, samples)
        audio_shape = (rows, *[1] * (rank - 2), frames * self.hop_length)
        output = self._buffer(audio_shape, onnx.TensorProto.FLOAT)
        binding = bound(session, inputs, {AUDIO_OUTPUT: output})
        return WaveformSlot(session, binding, inputs, output, fp32, graph=self.graphs)

    def providers(self, fp32: bool = False) -> list[Any]:
        """A waveform session's providers (``synthesis.stage_options``)."""
        options = waveform_cuda_options(self.options, self.graphs, self._arena, fp32)
        return providers_for(self._on_cuda, self.options.device_id, options)

    def _buffer(self, shape: Sequence[int], elem_type: int) -> ort.OrtValue:
        """A buffer on the engine's device that a slot's session reads or writes at every run."""
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
        where = "cuda" if self._on_cuda else "cpu"
        return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, where, self.options.device_id)


def bound(
    session: ort.InferenceSession, inputs: dict[str, ort.OrtValue], outputs: dict[str, ort.OrtValue]
) -> Any:
    """``session``'s binding to these fixed buffers, by name."""
    binding = session.io_binding()
    for name, buffer in inputs.items():
        binding.bind_ortvalue_input(name, buffer)
    for name, buffer in outputs.items():
        binding.bind_ortvalue_output(name, buffer)
    return binding
