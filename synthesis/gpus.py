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


class GpuMemory:
    """Memory of one GPU through NVML, the NVIDIA driver's own library."""

    def __init__(self, cuda_device: int) -> None:
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self.index = nvml_index(cuda_device, os.environ.get("CUDA_VISIBLE_DEVICES"))
        try:
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        except BaseException:  # no object to close: let NVML go here
            pynvml.nvmlShutdown()
            raise

    def __enter__(self) -> GpuMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self) -> tuple[int, int]:
        """(used, total) bytes on the device, from every process on it."""
        info = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
        return int(info.used), int(info.total)

    def free(self) -> int:
        """Bytes free on the device now."""
        return int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).free)

    def close(self) -> None:
        """Let NVML go (it counts its users: one shutdown per init)."""
        self._nvml.nvmlShutdown()


def free_gpu_memory(cuda_device: int) -> int | None:
    """Bytes free on CUDA device ``cuda_device`` now (:class:`GpuMemory`); ``None`` without a
    GPU, where ``CUDA_VISIBLE_DEVICES`` names devices by UUID or MIG instance (NVML's numbers
    would then be a guess), or where NVML cannot say."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not gpu_present() or (visible and not all(entry.strip().isdigit() for entry in visible.split(","))):
        return None
    import pynvml

    try:
        with GpuMemory(cuda_device) as memory:
            return memory.free()
    except pynvml.NVMLError as error:
        log.warning("the free memory of GPU %d is unknown (%s)", cuda_device, error)
        return None
