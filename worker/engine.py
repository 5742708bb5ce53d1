"""The ONNX Runtime session for one Piper voice: batched phoneme ids in, trimmed waveforms out.

The model does not output lengths, so at load we expose Piper's per-phoneme duration tensor
(the output of the graph's only ``Ceil`` node). Each item's exact sample count is the sum of
its durations times the voice's hop length; everything past it is padding and is cut off.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import onnx
import onnxruntime as ort

from worker.voices import Voice

log = logging.getLogger(__name__)
ort.set_default_logger_severity(3)  # onnxruntime's own warnings go to stderr unformatted

Provider = Literal["auto", "cuda", "cpu"]

PAD_ID: Final = 0
"""Phoneme id used to right-pad shorter items in a batch (Piper's ``_``)."""

WARMUP_PHONEMES: Final = "h\u0259l\u02c8o\u028a."  # "hello." in IPA
"""A short utterance run once at load, so kernels and memory pools are ready."""

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
    """How to build the ONNX Runtime session."""

    provider: Provider = "auto"
    """``cuda`` or ``auto`` use the GPU when onnxruntime-gpu sees one; ``cpu`` never does."""
    device_id: int = 0
    """Which GPU to pin the session to."""
    cpu_threads: int = 0
    """Intra-op threads on CPU; 0 means one per available core."""
    warmup: bool = True
    """Run a short utterance at load, so the first real job is not slow."""


class EngineOutOfMemory(RuntimeError):
    """The runtime could not allocate memory for a batch."""


def is_out_of_memory(error: BaseException) -> bool:
    text = str(error).lower()
    return any(marker in text for marker in OUT_OF_MEMORY_MARKERS)


def expose_durations(model: onnx.ModelProto) -> str:
    """Add the ``Ceil`` durations tensor to the graph outputs; return its name."""
    ceil_outputs = [out for node in model.graph.node if node.op_type == "Ceil" for out in node.output]
    if len(ceil_outputs) != 1:
        raise ValueError(f"expected one Ceil node in a Piper voice, found {len(ceil_outputs)}")
    name = str(ceil_outputs[0])
    if all(output.name != name for output in model.graph.output):
        model.graph.output.append(onnx.ValueInfoProto(name=name))
    return name


def warmup_ids(voice: Voice) -> list[int]:
    """Phoneme ids of :data:`WARMUP_PHONEMES` in the voice's own id map."""
    id_map = voice.phoneme_id_map
    ids = [*id_map["^"], *id_map["_"]]
    for phoneme in WARMUP_PHONEMES:
        if phoneme in id_map:
            ids += [*id_map[phoneme], *id_map["_"]]
    return [*ids, *id_map["$"]]


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def gpu_present() -> bool:
    """True when an NVIDIA driver reports at least one GPU on this machine."""
    gpus = Path("/proc/driver/nvidia/gpus")
    return gpus.is_dir() and any(gpus.iterdir())


def choose_providers(options: EngineOptions) -> list[Any]:
    """Execution providers in order of preference for these options.

    ``auto`` asks for CUDA only where a GPU is present, so CPU machines with the GPU build
    of onnxruntime do not log a failed CUDA load; ``cuda`` always tries it.
    """
    wants_cuda = options.provider == "cuda" or (options.provider == "auto" and gpu_present())
    if wants_cuda and "CUDAExecutionProvider" in ort.get_available_providers():
        if hasattr(ort, "preload_dlls"):
            ort.preload_dlls()
        cuda = {"device_id": options.device_id, "cudnn_conv_algo_search": "HEURISTIC"}
        return [("CUDAExecutionProvider", cuda), "CPUExecutionProvider"]
    if options.provider == "cuda":
        log.warning("CUDA was asked for but onnxruntime has no CUDA provider here; using CPU")
    return ["CPUExecutionProvider"]


class Engine:
    """Owns the ONNX session of one voice. Not thread-safe: the batcher is its only caller."""

    def __init__(self, voice: Voice, options: EngineOptions | None = None) -> None:
        self.voice = voice
        self.options = options or EngineOptions()
        model = onnx.load(str(voice.model_path))
        self._durations_name = expose_durations(model)
        session_options = ort.SessionOptions()
        session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session_options.intra_op_num_threads = self.options.cpu_threads or _cpu_count()
        session_options.inter_op_num_threads = 1
        session_options.log_severity_level = 3
        self.session = ort.InferenceSession(
            model.SerializeToString(), session_options, providers=choose_providers(self.options)
        )
        self._has_sid = any(i.name == "sid" for i in self.session.get_inputs())
        self.provider: str = self.session.get_providers()[0]
        log.info("voice %s loaded on %s", voice.name, self.provider)
        self.warmup_seconds = 0.0
        if self.options.warmup:
            started = time.perf_counter()
            self.run([EngineItem(warmup_ids(voice))], self.default_scales())
            self.warmup_seconds = time.perf_counter() - started

    @property
    def on_gpu(self) -> bool:
        return self.provider == "CUDAExecutionProvider"

    def default_scales(self) -> Scales:
        return Scales(self.voice.noise_scale, self.voice.length_scale, self.voice.noise_w)

    def run(self, items: Sequence[EngineItem], scales: Scales) -> list[np.ndarray]:
        """Synthesize a batch in one ``session.run``; one float32 waveform per item."""
        if not items:
            return []
        lengths = np.array([len(item.phoneme_ids) for item in items], dtype=np.int64)
        ids = np.full((len(items), int(lengths.max())), PAD_ID, dtype=np.int64)
        for row, item in enumerate(items):
            ids[row, : lengths[row]] = item.phoneme_ids
        feeds = {"input": ids, "input_lengths": lengths, "scales": scales.as_array()}
        if self._has_sid:
            sids = [item.speaker_id or 0 for item in items]
            feeds["sid"] = np.array(sids, dtype=np.int64)
        try:
            audio, durations = self.session.run(None, feeds)
        except Exception as error:  # onnxruntime raises its own untyped errors
            if is_out_of_memory(error):
                raise EngineOutOfMemory(str(error)) from error
            raise
        audio = audio.reshape(len(items), -1)
        samples = durations.reshape(len(items), -1).sum(axis=1).astype(np.int64)
        samples *= self.voice.hop_length
        return [audio[row, : samples[row]].copy() for row in range(len(items))]
