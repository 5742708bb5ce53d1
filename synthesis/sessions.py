"""Building ONNX Runtime sessions for a voice: providers and session options."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

import onnxruntime as ort

from synthesis.gpus import gpu_count, gpu_present
from ttsfarm.core.errors import DeviceUnavailable

log = logging.getLogger(__name__)

Provider = Literal["auto", "cuda", "cpu"]
Precision = Literal["auto", "fp32", "fp16"]

CudaOptions: TypeAlias = tuple[tuple[str, str], ...]
"""Extra CUDA provider options, as ``(key, value)`` pairs."""

CUDA: Final = "CUDAExecutionProvider"
CPU: Final = "CPUExecutionProvider"
NHWC: Final = ("prefer_nhwc", "1")
"""The CUDA provider option that runs convolutions in NHWC (``TTSFARM_CUDA_LAYOUT=nhwc``)."""
CUDA_DEFAULTS: Final = (("cudnn_conv_algo_search", "HEURISTIC"),)
"""``EXHAUSTIVE`` (ORT's default) selects cuDNN's heuristic B: 3x slower at batch 8 on an H200,
even with one shape per session (docs/decisions/0003-cudnn-heuristic-search.md)."""
FIXED_SHAPE_ARENA: Final = ("arena_extend_strategy", "kSameAsRequested")
"""For sessions that only ever see one shape (the staged engine's): their own arena grows by what
a run asks for, not by doubling (ORT's default), since it is sized once, at the first run or
capture (NHWC at batch 32: 69,181 MiB against 73,863 MiB after prepare,
docs/decisions/0014-fixed-shape-arenas.md)."""
SHARED_ARENA_CONFIG: Final = "session.use_env_allocators"
INITIALIZERS_OFF_ARENA_CONFIG: Final = "session.use_device_allocator_for_initializers"
ARENA_SHRINKAGE_CONFIG: Final = "memory.enable_memory_arena_shrinkage"
NO_SPINNING_CONFIG: Final = "session.intra_op.allow_spinning"

CGROUP_CPU_LIMIT: Final = Path("/sys/fs/cgroup/cpu.max")
"""Where Linux (cgroup v2) states a container's CPU limit: ``QUOTA PERIOD``, or ``max PERIOD``."""


def cpu_count() -> int:
    """The CPUs this process may use: those it may run on, and no more than its container's CPU
    limit (``cpus:`` in compose), which does not show in the former. onnxruntime's threads, a
    GPU worker's text processes and the jobs mastered at once follow it."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    try:
        quota, period = CGROUP_CPU_LIMIT.read_text().split()
        return max(1, min(cpus, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):  # no cgroup v2 here, or no limit ("max")
        return cpus


def wants_cuda(provider: Provider) -> bool:
    """Whether these options ask for CUDA and this onnxruntime build has it.

    ``auto`` asks for CUDA only where a GPU is present, so CPU machines with the GPU build of
    onnxruntime do not log a failed CUDA load, and uses the CPU where CUDA cannot run. ``cuda``
    insists: without a GPU or a CUDA build it raises :class:`DeviceUnavailable`.
    """
    if provider == "cuda":
        if not gpu_present():
            raise DeviceUnavailable(
                "a GPU was asked for (--gpu or TTSFARM_PROVIDER=cuda) but the NVIDIA driver reports "
                "none on this machine: run the worker on a GPU host, or with --cpu"
            )
        if CUDA not in ort.get_available_providers():
            raise DeviceUnavailable(
                "a GPU was asked for but this onnxruntime has no CUDA provider: install "
                "onnxruntime-gpu (scripts/install does), or run with --cpu"
            )
        return True
    return provider == "auto" and gpu_present() and CUDA in ort.get_available_providers()


def check_device(session: ort.InferenceSession, use_cuda: bool, device_id: int) -> None:
    """Raise :class:`DeviceUnavailable` if CUDA was wanted and the session did not get it
    (onnxruntime quietly builds a CPU session when the CUDA provider fails to start)."""
    if use_cuda and session.get_providers()[0] != CUDA:
        count = gpu_count()
        raise DeviceUnavailable(
            f"GPU {device_id} was asked for but onnxruntime could not start CUDA on it "
            f"({count} GPU{'s' if count != 1 else ''} here; its own error is in the log above): "
            "check the device number, the NVIDIA driver and the CUDA and cuDNN libraries"
        )


def providers_for(use_cuda: bool, device_id: int, cuda_options: Sequence[tuple[str, str]] = ()) -> list[Any]:
    """Execution providers in order of preference."""
    if not use_cuda:
        return [CPU]
    if hasattr(ort, "preload_dlls"):
        ort.preload_dlls()
    options = {"device_id": str(device_id), **dict(CUDA_DEFAULTS), **dict(cuda_options)}
    return [(CUDA, options), CPU]


def session_options(
    cpu_threads: int, shared_arena: bool, profile_prefix: str | None = None, weights_off_arena: bool = False
) -> ort.SessionOptions:
    """Options for every session of a voice; ``cpu_threads`` 0 means one per core.

    ``weights_off_arena`` allocates the weights outside the (shared) arena, so that the arena
    holds only what runs need while they run.
    """
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = cpu_threads or cpu_count()
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    if shared_arena:
        options.add_session_config_entry(SHARED_ARENA_CONFIG, "1")
    if weights_off_arena:
        options.add_session_config_entry(INITIALIZERS_OFF_ARENA_CONFIG, "1")
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return options


def starter_options(cpu_threads: int, profile_prefix: str | None = None) -> ort.SessionOptions:
    """Options for a session that must be ready at once (``synthesis.plain_session``): no graph
    optimization and no plan for values to share memory, which together are about 1.1 s of a
    Piper voice's 1.26 s build on 2 cores; and no spinning, so that the full session's build
    beside it gets a core."""
    options = session_options(cpu_threads, False, profile_prefix)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.enable_mem_reuse = False
    options.add_session_config_entry(NO_SPINNING_CONFIG, "0")
    return options


def run_options(use_cuda: bool, give_back_memory: bool = True) -> ort.RunOptions | None:
    """Options for each run. With ``give_back_memory``, on the CPU the arena gives back, after
    every run, the memory the run freed: it otherwise keeps the peak of the largest batch shape
    it has seen, and a worker's memory rose in steps as longer batches came (joe, 200 runs of
    10-390 ids: 421 MiB kept, 288 MiB with this; docs/deploy.md). That costs each run its
    allocations again (10-17% of a 414-word text's engine time on a 2-core machine): one-off
    commands, whose peak is bounded by the longest segment, skip it. Not on CUDA, where the
    arena is shared and captured graphs need their addresses to stay."""
    if use_cuda or not give_back_memory:
        return None
    options = ort.RunOptions()
    options.add_run_config_entry(ARENA_SHRINKAGE_CONFIG, "cpu:0")
    return options


ORT_LOG_SEVERITY: Final = 3
"""onnxruntime's own log, which goes to stderr unformatted: errors only (its warnings repeat
what the engine logs). The level is process-wide; it is set where sessions are built, never at
import."""


def build_session(
    model: bytes | str, options: ort.SessionOptions, providers: list[Any]
) -> ort.InferenceSession:
    """A session that raises when a GPU kernel fails, instead of quietly moving to the CPU."""
    ort.set_default_logger_severity(ORT_LOG_SEVERITY)
    session = ort.InferenceSession(model, options, providers=providers)
    session.disable_fallback()
    return session
