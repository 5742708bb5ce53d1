"""The machine's NVIDIA GPUs, as the driver sees them: how many, and how much memory one has
free (through NVML, the driver's own library). Nothing here loads onnxruntime or CUDA."""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


def gpu_count() -> int:
    """GPUs the NVIDIA driver reports on this machine (0 without the driver)."""
    gpus = Path("/proc/driver/nvidia/gpus")
    return sum(1 for _ in gpus.iterdir()) if gpus.is_dir() else 0


def gpu_present() -> bool:
    """True when an NVIDIA driver reports at least one GPU on this machine."""
    return gpu_count() > 0


def nvml_index(cuda_device: int, visible: str | None) -> int:
    """NVML numbers every GPU of the host; CUDA only those in ``CUDA_VISIBLE_DEVICES``."""
    if not visible:
        return cuda_device
    listed = [entry.strip() for entry in visible.split(",")]
    if cuda_device < len(listed) and listed[cuda_device].isdigit():
        return int(listed[cuda_device])
    return cuda_device  # UUIDs or a short list: the best guess is the same number


def free_gpu_memory(cuda_device: int) -> int | None:
    """Bytes free on CUDA device ``cuda_device`` now, through NVML, the NVIDIA driver's own
    library; ``None`` without a GPU, where ``CUDA_VISIBLE_DEVICES`` names devices by UUID or MIG
    instance (NVML's numbers would then be a guess), or where NVML cannot say."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not gpu_present() or (visible and not all(entry.strip().isdigit() for entry in visible.split(","))):
        return None
    import pynvml

    try:
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(nvml_index(cuda_device, visible))
            return int(pynvml.nvmlDeviceGetMemoryInfo(handle).free)
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError as error:
        log.warning("the free memory of GPU %d is unknown (%s)", cuda_device, error)
        return None
