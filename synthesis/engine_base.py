"""What both engines share: their options, how onnxruntime's errors are read, and the steps
every engine takes once loaded (warm-up, fillers, a batch too large run in halves)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Final

import numpy as np
import onnxruntime as ort

from synthesis.background import Background
from synthesis.buckets import ID_BUCKETS
from synthesis.items import EngineItem, Scales, Spoken, filler_ids, voice_scales, warmup_ids
from synthesis.session_cache import SessionBuilds
from synthesis.sessions import CUDA, CudaOptions, Precision, Provider
from ttsfarm.core.voices import Voice

MAX_BATCH_FRAMES: Final = 1 << 17
"""Rows times decoder frames per session run; larger batches are split. cuDNN describes a tensor
with 32-bit sizes, and the last upsampling layer holds rows x frames x hop (256) x channels
(32 to 64) values: past 2**31 the run fails with ``CUDNN_STATUS_NOT_SUPPORTED``."""

DEFAULT_MAX_SESSIONS: Final = 64
"""Bucket sessions kept per voice; the least recently used goes first past this."""

NO_FP16_PLAN_MARKERS: Final = ("HEURISTIC_QUERY_FAILED", "CUDNN_FE failure")
"""How cuDNN says it has no plan for a convolution's shapes in fp16 (seen on an H200 for one
dilated convolution at 1 to 4 rows): that bucket then runs fp32. Any other error is raised."""

AFTER_CHECK_SECONDS: Final = 0.5
"""How often a preparation waiting to begin looks whether its engine was closed meanwhile."""

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
    max_sessions: int = DEFAULT_MAX_SESSIONS
    """Bucket sessions kept at once."""
    cuda_options: CudaOptions = ()
    """Extra CUDA provider options for every session of the engine."""
    waveform_cuda_options: CudaOptions = ()
    """Extra CUDA provider options for the staged engine's waveform sessions only, e.g. the
    layout ``(("prefer_nhwc", "1"),)`` (``TTSFARM_CUDA_LAYOUT``): the sessions that compute the
    durations must not get it (NHWC there changed 7 of 79 segment lengths,
    docs/decisions/0013-nhwc-waveform-auto.md). The
    single-session engine, whose one graph holds the durations too, does not use them."""
    gathered_positions: bool = True
    """The text encoder's relative-position pads and slices as one ``Gather`` each
    (``synthesis.relative_positions``): the same outputs to the bit, fewer copies on the GPU.
    Off only to compare with the voice's graph as exported."""
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


def is_out_of_memory(error: BaseException) -> bool:
    text = str(error).lower()
    return any(marker in text for marker in OUT_OF_MEMORY_MARKERS)


def is_missing_fp16_plan(error: BaseException) -> bool:
    return any(marker in str(error) for marker in NO_FP16_PLAN_MARKERS)


def check_piper_interface(session: ort.InferenceSession, path: str) -> None:
    """Raise ``ValueError`` unless the session's graph has a Piper voice's inputs and output."""
    inputs = [value.name for value in session.get_inputs()]
    check_piper_names(inputs, [value.name for value in session.get_outputs()], path)


def check_piper_names(inputs: Iterable[str], outputs: Iterable[str], path: str) -> None:
    """Raise ``ValueError`` unless these are a Piper voice's inputs and outputs."""
    inputs, outputs = set(inputs), set(outputs)
    if not inputs >= PIPER_INPUTS or PIPER_OUTPUT not in outputs:
        raise ValueError(
            f"{path} takes {sorted(inputs)} and gives {sorted(outputs)}, where a Piper voice takes "
            f"{sorted(PIPER_INPUTS)} and gives {PIPER_OUTPUT!r}"
        )


class EngineBasics:
    """What both engines (:class:`Engine`, ``synthesis.staged.StagedEngine``) share once loaded."""

    voice: Voice
    options: EngineOptions
    provider: str
    warmup_seconds: float
    builds: SessionBuilds
    background: Background
    """The engine's own thread for work done while its batches run."""

    @property
    def sessions_built(self) -> int:
        """Sessions built so far."""
        return self.builds.built

    @property
    def session_seconds(self) -> float:
        """Seconds spent building them."""
        return self.builds.seconds

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

    def speak(self, items: Sequence[EngineItem], scales: Scales) -> list[Spoken]:
        """Synthesize a batch: each item's audio and the frames each of its phoneme ids got."""
        raise NotImplementedError

    def prepare(self, batch_sizes: Sequence[int], max_ids: int = ID_BUCKETS[-1]) -> int:
        """Build the sessions for these batch sizes ahead of use; returns the runs it took."""
        raise NotImplementedError

    def prepare_later(
        self, batch_sizes: Sequence[int], max_ids: int = ID_BUCKETS[-1], after: threading.Event | None = None
    ) -> Future[int | None]:
        """:meth:`prepare` in the engine's background thread (``synthesis.background``), once
        ``after`` is set, if given; return at once. Batches run meanwhile, and the first to need
        a session builds it."""

        def prepare() -> int:
            while after is not None and not after.wait(AFTER_CHECK_SECONDS):
                if not self.background.open:  # closed before it began
                    return 0
            return self.prepare(batch_sizes, max_ids) if self.background.open else 0

        return self.background.submit(prepare, f"the preparation of voice {self.voice.name}")

    def close(self) -> None:
        """Stop the work done in the background (its step under way ends first); batches still run."""
        self.background.close()

    def run(self, items: Sequence[EngineItem], scales: Scales) -> list[np.ndarray]:
        """Synthesize a batch; one float32 waveform per item (:meth:`speak` without the frames)."""
        return [spoken.audio for spoken in self.speak(items, scales)]

    def _in_halves(self, items: Sequence[EngineItem], scales: Scales) -> list[Spoken]:
        """A batch too large for one run (frames over the limit), run as two."""
        middle = len(items) // 2
        return [*self.speak(items[:middle], scales), *self.speak(items[middle:], scales)]

    def run_fillers(self, rows: int, max_ids: int, scales: Scales) -> int:
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
