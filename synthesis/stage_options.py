"""The CUDA provider options of the staged engine's sessions, by stage (``synthesis.staged``)."""

from __future__ import annotations

from typing import Final, NamedTuple

from synthesis.engine import EngineOptions
from synthesis.sessions import NHWC, CudaOptions

FUSED_CONV_BIAS: Final = ("fuse_conv_bias", "1")
GRAPH_OPTIONS: Final = (("enable_cuda_graph", "1"),)
"""Captured graphs share one arena only where nothing but the graph lane touches the device
between a batch's expand and its replay: the waveform graphs in NCHW with plain fronts. A
captured graph's scratch memory is free in the arena between its replays, and a buffer made
there meanwhile is written over by the next replay. With captured fronts, whose lane runs beside
the graph lane, every captured graph keeps an arena of its own (run 14: in one shared arena the
front's input buffers were overwritten during waveform replays, 19 of 400 farm jobs failed); so
it does with ``prefer_nhwc`` (run 12: 131 of 400 farm jobs stored in a shared arena, 400 of 400
each on its own; docs/benchmarks.md)."""


class StageCudaOptions(NamedTuple):
    """Extra CUDA provider options of the staged engine's sessions, by stage."""

    front: CudaOptions
    """The front and expand sessions: ``cuda_options`` only. The front predicts the durations,
    which set every item's length; NHWC there changed 7 of 79 lengths (run 13)."""
    waveform: CudaOptions
    """The waveform sessions: ``cuda_options``, ``waveform_cuda_options`` (the layout) and, when
    they are captured, :data:`GRAPH_OPTIONS`."""


def stage_cuda_options(options: EngineOptions, graphs: bool) -> StageCudaOptions:
    """What each stage's sessions get of ``options`` (see :class:`StageCudaOptions`)."""
    waveform = (*options.cuda_options, *options.waveform_cuda_options)
    return StageCudaOptions(options.cuda_options, (*waveform, *GRAPH_OPTIONS) if graphs else waveform)


def waveform_cuda_options(
    options: EngineOptions, graphs: bool, arena: CudaOptions, fp32: bool
) -> CudaOptions:
    """A waveform session's CUDA options. An fp32 slot's are NCHW whatever the layout: it is
    cuDNN's fallback where fp16 has no plan (1 to 4 rows), and in NHWC it gave wrong audio for
    single items (run 11)."""
    fused = (FUSED_CONV_BIAS,) if options.fused_conv_bias else ()
    chosen = (*arena, *stage_cuda_options(options, graphs).waveform, *fused)
    return tuple(option for option in chosen if not (fp32 and option == NHWC))
